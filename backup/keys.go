package backup

import (
	"fmt"
	"strings"

	"filippo.io/age"

	"stratum/crypto"
)

// maxKeyFile bounds a recipients or identity file; real ones are a few
// lines.
const maxKeyFile = 1 << 20

// ParseRecipients parses recipients given one by one (--recipient) and in
// age recipients files (--recipients-file): age1... X25519 and age1pq1...
// hybrid keys, with blank and # lines ignored in files.
func ParseRecipients(list []string) ([]age.Recipient, error) {
	var out []age.Recipient
	for i, s := range list {
		rs, err := age.ParseRecipients(strings.NewReader(strings.TrimSpace(s)))
		if err != nil || len(rs) != 1 {
			return nil, fmt.Errorf("recipient %d is not an age public key (age1...)", i+1)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// ReadRecipientsFile returns the recipient lines of an age recipients
// file, checked, so they can be passed on (to a running founder) as text.
func ReadRecipientsFile(path string) ([]string, error) {
	b, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s holds no recipients", path)
	}
	if _, err := ParseRecipients(lines); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lines, nil
}

// LoadIdentities reads age identity files (AGE-SECRET-KEY-1...). Errors
// name the file and line, never the key.
func LoadIdentities(paths []string) ([]age.Identity, error) {
	var out []age.Identity
	for _, p := range paths {
		b, err := readKeyFile(p)
		if err != nil {
			return nil, err
		}
		ids, err := age.ParseIdentities(strings.NewReader(string(b)))
		clear(b)
		if err != nil {
			return nil, fmt.Errorf("identity file %s: %s", p, identityProblem(err))
		}
		out = append(out, ids...)
	}
	return out, nil
}

// identityProblem keeps age's line number and drops anything else: an
// identity parse error could in principle carry key material.
func identityProblem(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "error at line ") {
		if i := strings.Index(msg, ":"); i > 0 {
			return msg[:i] + ": not an age identity (AGE-SECRET-KEY-1...)"
		}
	}
	if strings.Contains(msg, "no identities") {
		return "no identities in the file"
	}
	return "not an age identity file"
}

func readKeyFile(path string) ([]byte, error) { return crypto.ReadFileLimit(path, maxKeyFile) }
