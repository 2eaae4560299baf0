package join

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"regexp"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/semver"
	"stratum/strictjson"
	"stratum/wire"
)

const (
	maxFactsSize   = 64 << 10
	maxTokenLen    = 512
	maxMachineID   = 128
	maxHostnameLen = 253
)

var hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// DecodeRegisterRequest decodes strictly and validates every field at
// once: unknown fields are named, wrong types and bad values listed.
func DecodeRegisterRequest(body []byte) (wire.RegisterRequest, error) {
	var req wire.RegisterRequest
	// An empty body is an empty registration: the answer lists what is
	// required.
	if err := strictjson.DecodeChecked(strictjson.OrEmptyObject(body), &req, "the registration has problems", func() apierr.Fields { return registerProblems(req) }); err != nil {
		return wire.RegisterRequest{}, err
	}
	return req, nil
}

// problems lists every bad field. The token is only checked for presence:
// a malformed token is JOIN_TOKEN_INVALID like any other bad one.
func registerProblems(r wire.RegisterRequest) apierr.Fields {
	var f apierr.Fields
	if r.Token == "" {
		f.Add("token", "required")
	} else if len(r.Token) > maxTokenLen {
		f.Add("token", "longer than %d characters", maxTokenLen)
	}
	if r.Release == "" {
		f.Add("release", "required")
	} else if semver.Valid(r.Release) != nil {
		f.Add("release", "not a semantic version (e.g. 0.6.0)")
	}
	if r.Hostname == "" {
		f.Add("hostname", "required")
	} else if len(r.Hostname) > maxHostnameLen || !hostnamePattern.MatchString(r.Hostname) {
		f.Add("hostname", "not a host name")
	}
	if r.MgmtIP != "" {
		cluster.ValidateIP(&f, "mgmtIp", r.MgmtIP)
	}
	if len(r.MachineID) > maxMachineID || !printable(r.MachineID) {
		f.Add("machineId", "at most %d printable ASCII characters", maxMachineID)
	}
	if facts := bytes.TrimSpace(r.Facts); len(facts) > 0 && string(facts) != "null" {
		switch {
		case len(facts) > maxFactsSize:
			f.Add("facts", "larger than 64 KiB")
		case facts[0] != '{' || !json.Valid(facts):
			f.Add("facts", "must be a JSON object")
		}
	}
	return f
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// normalIP is the canonical text of an IP, so 2001:db8::1 and
// 2001:0db8::1 are one address.
func normalIP(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return s
	}
	return a.Unmap().String()
}
