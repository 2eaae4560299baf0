package joiner

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzParseBundle: the join bundle is the founder's answer the joiner
// adopts. No bundle panics parseBundle, publicBundle, check or the env
// file rendering; bundle.json is a JSON object without a secret field;
// an env file never holds a line break inside a value.
func FuzzParseBundle(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, ``, `{"clusterId":"c","role":"worker","caBundle":"x","nodeCert":"y","nodeKey":"z"}`,
		`{"clusterId":"c","role":"control-plane","parentDomain":"p","region":"r","adminPassword":"pw","openBaoToken":"t","vips":{"openBao":"10.0.0.5"},"extra":{"a":[1,2]}}`,
		`{"role":"postgres","openBaoNodeToken":null,"generation":18446744073709551615}`, `{"generation":-1}`, `{"nodeKey":1}`,
		`{"caBundle":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}`, `{"adminPassword":"a\nb"}`, `{"vips":{"openBao":"::1"}}`,
		`{"clusterId":"c","clusterId":"d"}`,
	} {
		f.Add([]byte(s), "nodeId: n-abcd1234\n")
	}
	f.Fuzz(func(t *testing.T, raw []byte, nodeYAML string) {
		b, all, err := parseBundle(raw)
		if err != nil {
			return
		}
		pub, err := publicBundle(all)
		if err != nil {
			t.Fatalf("publicBundle: %v", err)
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(pub, &back); err != nil {
			t.Fatalf("bundle.json is not a JSON object: %v\n%s", err, pub)
		}
		for k := range back {
			if slices.Contains(secretFields, k) {
				t.Fatalf("bundle.json carries the secret %q", k)
			}
		}
		_, _ = checkBundle(b, "sha256:"+strings.Repeat("0", 64), nodeYAML)
		env, err := renderEnv(controlPlaneEnv(b, "n-abcd1234"))
		if err == nil {
			for _, line := range strings.Split(strings.TrimSuffix(string(env), "\n"), "\n") {
				if !strings.HasPrefix(line, "STRATUM_") || !strings.Contains(line, "=") || strings.ContainsAny(line, "\r\x00") {
					t.Fatalf("env line %q", line)
				}
			}
		}
		_ = bootstrapCredentials(b)
	})
}
