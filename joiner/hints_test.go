package joiner

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"stratum/apiclient"
	"stratum/internal/stratumtest/fakefounder"
	"stratum/internal/syncbuf"
	"stratum/wire"
)

// TestEachRefusalHintsOnce: the founder's error messages carry their own
// advice; what the joiner prints for each (the final error, or the line
// before a retry) says that advice once. The messages are the real
// founder's (join/tokens.go, release/mirror.go, join/release.go).
func TestEachRefusalHintsOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		code, msg  string
		retryAfter string
		hint       string // a regexp matching the advice
	}{
		{name: "refused token", status: 401, code: "JOIN_TOKEN_INVALID", msg: fakefounder.TokenMessage,
			hint: `(?i)ask the operator|new (join )?token`},
		{name: "corrupt release", status: 503, code: "RELEASE_CORRUPT",
			msg:  "file payload/a.bin of release 0.6.0 failed verification on the founder; an operator must re-import the release",
			hint: `(?i)re-?import|import it again`},
		{name: "busy mirror", status: 503, code: "RELEASE_BUSY", retryAfter: "2",
			msg:  "the founder is already sending 4 release files, its limit; retry after the Retry-After delay",
			hint: `(?i)retry`},
		{name: "release mismatch", status: 409, code: "RELEASE_MISMATCH",
			msg:  "the joiner's release does not match the cluster's: the joiner runs 0.5.0 and the cluster 0.6.0: run stratum join with --self-upgrade, or install the cluster's release",
			hint: `--self-upgrade`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{},
				Body: io.NopCloser(strings.NewReader(`{"code":"` + tc.code + `","message":"` + tc.msg + `"}`))}
			if tc.retryAfter != "" {
				resp.Header.Set("Retry-After", tc.retryAfter)
			}
			err := apiclient.ResponseError(resp)
			printed := err.Error()
			if te, ok := err.(*apiclient.TransientError); ok {
				printed = apiclient.RetryNotice("downloading payload/a.bin", te, time.Second)
			}
			if n := len(regexp.MustCompile(tc.hint).FindAllString(printed, -1)); n != 1 {
				t.Errorf("the advice is printed %d times, want once: %s", n, printed)
			}
		})
	}
}

// TestUnknownReleaseNamesTheFlag: a machine that says nothing of its
// release is told the exact flag to add, with the release the cluster
// admits as the example; asking the founder registers nothing.
func TestUnknownReleaseNamesTheFlag(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.Release = ""
	err := runJoiner(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "e.g. --release 0.6.0,") {
		t.Fatalf("want the flag with the cluster's release as the example, got %v", err)
	}
	if n := strings.Count(err.Error(), "--release"); n != 2 { // "give it with --release, e.g. --release 0.6.0"
		t.Errorf("the flag is named %d times: %v", n, err)
	}
	if len(f.Regs) != 0 {
		t.Errorf("asking the founder left %d registrations", len(f.Regs))
	}

	cfg.Token = "sjt1.nope.nope"
	err = runJoiner(t, cfg)
	if n := strings.Count(err.Error(), "ask the operator"); n != 1 {
		t.Errorf("a bad token with no release: %v", err)
	}
}

// TestReleaseRecordedByARun: the release the founder accepted is recorded
// in the state dir, so the next run needs no --release.
func TestReleaseRecordedByARun(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	f.OnEvent = func(r *fakefounder.Reg, ev string) {
		if ev == "registered" {
			go f.Set(r.ID, wire.StateRejected, func(r *fakefounder.Reg) { r.Reason = "test" })
		}
	}
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	if err := runJoiner(t, cfg); ExitCode(err) != ExitRejected {
		t.Fatalf("first run: %v", err)
	}
	if v, err := readReleaseFile(cfg.StateDir); err != nil || v != "0.6.0" {
		t.Fatalf("recorded release %q, %v", v, err)
	}
	cfg.Release = ""
	cfg.Token = "sjt1.tok1.secret2"
	f.Token = cfg.Token
	if err := runJoiner(t, cfg); ExitCode(err) != ExitRejected {
		t.Fatalf("second run: %v", err)
	}
	last := f.Registers[len(f.Registers)-1]
	if last["release"] != "0.6.0" {
		t.Errorf("second run registered with %v", last["release"])
	}
	contains(t, out.String(), "release 0.6.0, recorded by a previous run")
}
