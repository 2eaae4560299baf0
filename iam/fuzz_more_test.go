package iam

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"stratum/apierr"
)

// FuzzParsePolicy: a policy document is a request body (POST /v1/iam/tokens).
// No document panics the parser; a refusal is INVALID_POLICY with at least
// one issue; an accepted policy validates and re-encodes to a document
// that parses to the same policy.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{
		`{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"]}]}`,
		`{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:DescribeRelease"],"resource":["*"]}]}`,
		`{"version":"2026-01-01","statement":[{"effect":"deny","action":["iam:*"],"resource":["*"]},{"effect":"allow","action":["join:*"],"resource":["*"]}]}`,
		`{"version":"2026-01-01","statement":[{"effect":"allow","action":["iam:CreateToken"],"resource":["stratum:iam:token/*"]}]}`,
		`{"version":"2026-01-01","statement":[{"effect":"allow","action":["nope:Nope"],"resource":["*"]}]}`,
		`{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"],"Effect":"deny"}]}`,
		`{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"]}],"Statement":[]}`,
		`{"version":"2026-01-01","statement":[{"effect":"allow","action":"*","resource":["*"]}]}`,
		`{"version":"2026-01-01","statement":[]}`, `{"version":"2025-01-01"}`, `{}`, `null`, `[]`, ``, `{"version":1}`,
		`{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"]}]} {}`,
		`{"version":"2026-01-01","statement":[null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		defer skipKnownPanic(t)
		p, err := ParsePolicy(raw)
		if err != nil {
			e, ok := apierr.As(err)
			if !ok || e.Code != apierr.InvalidPolicy || len(e.Issues) == 0 {
				t.Fatalf("refusal %v (%T) is not INVALID_POLICY with issues", err, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted policy does not validate: %v", err)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePolicy(again)
		if err != nil {
			t.Fatalf("re-encoded policy %s refused: %v", again, err)
		}
		if !reflect.DeepEqual(p, back) {
			t.Fatalf("round trip changed the policy:\n%+v\n%+v", p, back)
		}
	})
}

// skipKnownPanic lets a long fuzzing run (STRATUM_FUZZ_SKIP_KNOWN=1) look
// past the reported statementOf panic (a top-level key "statement[" with
// no closing bracket: iam/policy.go statementOf slices rest[:-1]) to find
// other bugs. Without the variable, go test replays the kept crasher in
// testdata/fuzz/FuzzParsePolicy and fails until the bug is fixed.
func skipKnownPanic(t *testing.T) {
	v := recover()
	if v == nil {
		return
	}
	if os.Getenv("STRATUM_FUZZ_SKIP_KNOWN") != "" && strings.Contains(fmt.Sprint(v), "slice bounds out of range [:-1]") {
		t.Skip("known bug: iam.statementOf")
	}
	panic(v)
}
