package cli

import (
	"flag"
	"testing"
)

// TestSafetyFlagsHaveNoEnvTwin: a variable left in an operator's shell
// must not allow a downgrade or a plaintext unseal key.
func TestSafetyFlagsHaveNoEnvTwin(t *testing.T) {
	t.Setenv("STRATUM_ALLOW_DOWNGRADE", "true")
	t.Setenv("STRATUM_INSECURE_STORE_UNSEAL_KEY", "true")
	t.Setenv("STRATUM_API_ADDR", "127.0.0.1:1")
	fs := flag.NewFlagSet("stratum test", flag.ContinueOnError)
	allow := fs.Bool("allow-downgrade", false, "")
	insecure := fs.Bool("insecure-store-unseal-key", false, "")
	addr := fs.String("api-addr", "", "")
	if err := parseFlags(fs, nil); err != nil {
		t.Fatal(err)
	}
	if *allow || *insecure {
		t.Fatalf("environment set a safety flag: allow-downgrade=%v insecure-store-unseal-key=%v", *allow, *insecure)
	}
	if *addr != "127.0.0.1:1" {
		t.Fatalf("an ordinary flag lost its env twin: %q", *addr)
	}
}
