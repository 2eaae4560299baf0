package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestSafetyFlagsHaveNoEnvTwin: a variable left in an operator's shell
// must not allow a downgrade or a plaintext unseal key, while ordinary
// flags keep their twins.
func TestSafetyFlagsHaveNoEnvTwin(t *testing.T) {
	t.Setenv("STRATUM_API_ADDR", "127.0.0.1:1")
	cmd := &cobra.Command{Use: "test"}
	safety := map[string]*bool{}
	for _, name := range []string{"allow-downgrade", "insecure-store-unseal-key", "accept-audit-rollback", "allow-public-connect"} {
		t.Setenv("STRATUM_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")), "true")
		safety[name] = cmd.Flags().Bool(name, false, "")
	}
	addr := cmd.Flags().String("api-addr", "", "")
	if err := applyEnvTwins(cmd); err != nil {
		t.Fatal(err)
	}
	for name, set := range safety {
		if *set {
			t.Errorf("the environment set the safety flag --%s", name)
		}
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
