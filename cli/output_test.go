package cli

import (
	"bytes"
	"testing"
)

// TestRenderKeepsTheAnswer: -o json and -o yaml print the API's answer
// as it came: one newline at the end of the JSON (the answer's own is not
// doubled), integers as integers in YAML (not 2.5324732416e+10).
func TestRenderKeepsTheAnswer(t *testing.T) {
	raw := []byte(`{"memoryBytes":25324732416,"load":0.5,"big":12345678901234567890,"nodes":[{"cpus":2}],"name":"vm"}` + "\n")
	for _, tc := range []struct {
		format outputFormat
		want   string
	}{
		{"json", "{\n  \"memoryBytes\": 25324732416,\n  \"load\": 0.5,\n  \"big\": 12345678901234567890,\n  \"nodes\": [\n    {\n      \"cpus\": 2\n    }\n  ],\n  \"name\": \"vm\"\n}\n"},
		{"yaml", "big: 1.2345678901234567e+19\nload: 0.5\nmemoryBytes: 25324732416\nname: vm\nnodes:\n  - cpus: 2\n"},
	} {
		var b bytes.Buffer
		if err := tc.format.render(&b, raw, nil, nil); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("-o %s:\n%s\nwant\n%s", tc.format, b.String(), tc.want)
		}
	}
}
