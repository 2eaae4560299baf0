package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestSafetyFlagsHaveNoEnvTwin: a variable left in an operator's shell
// must not allow a downgrade or a plaintext unseal key, while ordinary
// flags keep their twins.
func TestSafetyFlagsHaveNoEnvTwin(t *testing.T) {
	t.Setenv("STRATUM_ALLOW_DOWNGRADE", "true")
	t.Setenv("STRATUM_INSECURE_STORE_UNSEAL_KEY", "true")
	t.Setenv("STRATUM_API_ADDR", "127.0.0.1:1")
	cmd := &cobra.Command{Use: "test"}
	allow := cmd.Flags().Bool("allow-downgrade", false, "")
	insecure := cmd.Flags().Bool("insecure-store-unseal-key", false, "")
	addr := cmd.Flags().String("api-addr", "", "")
	if err := applyEnvTwins(cmd); err != nil {
		t.Fatal(err)
	}
	if *allow || *insecure {
		t.Fatalf("environment set a safety flag: allow-downgrade=%v insecure-store-unseal-key=%v", *allow, *insecure)
	}
	if *addr != "127.0.0.1:1" {
		t.Fatalf("an ordinary flag lost its env twin: %q", *addr)
	}
}

// TestJoinTokenTwin: the joiner's token is STRATUM_JOIN_TOKEN, never the
// admin bearer token STRATUM_TOKEN an operator shell may hold.
func TestJoinTokenTwin(t *testing.T) {
	root := NewRoot()
	join, _, err := root.Find([]string{"join"})
	if err != nil {
		t.Fatal(err)
	}
	if got := envTwin(join, "token"); got != "STRATUM_JOIN_TOKEN" {
		t.Fatalf("join --token twin = %q", got)
	}
	tok, _, _ := root.Find([]string{"token", "create"})
	if got := envTwin(tok, "ttl"); got != "STRATUM_TTL" {
		t.Fatalf("token create --ttl twin = %q", got)
	}
}
