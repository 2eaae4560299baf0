package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrust16_10_SecretsOffTheCommandLine: the join token and the
// recovery key can come from a file (or stdin), so they need not be on a
// command line ps and shell history show; giving both forms is a usage
// error.
func TestTrust16_10_SecretsOffTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "join-token")
	if err := os.WriteFile(tokenFile, []byte("sjt1.aaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := stratum(t, "join", "--founder", "127.0.0.1:1", "--token", "x", "--token-file", tokenFile, "--ca-pin", "sha256:00"); r.code != 2 {
		t.Errorf("join with --token and --token-file: exit %d, want 2 (usage)", r.code)
	}
	if r := stratum(t, "join", "--founder", "127.0.0.1:1", "--token-file", filepath.Join(dir, "missing"), "--ca-pin", "sha256:00"); r.code == 0 || !strings.Contains(r.stderr, "read the join token") {
		t.Errorf("join --token-file of a missing file: exit %d %s", r.code, r.stderr)
	}
	if r := stratum(t, "tpm", "recover", "--data", dir, "--recovery-key", "-", "--recovery-key-file", tokenFile); r.code != 2 {
		t.Errorf("tpm recover with both key forms: exit %d, want 2", r.code)
	}
	if r := stratum(t, "tpm", "recover", "--data", dir, "--recovery-key-file", filepath.Join(dir, "missing")); r.code == 0 || !strings.Contains(r.stderr, "read the recovery key") {
		t.Errorf("tpm recover --recovery-key-file of a missing file: exit %d %s", r.code, r.stderr)
	}
	// The recovery key itself as --recovery-key's value is refused
	// before anything is read, and the refusal does not repeat it.
	key := "SRK1-ABCD-EFGH-IJKL-MNOP"
	if r := stratum(t, "tpm", "recover", "--data", dir, "--recovery-key", key); r.code != 2 || strings.Contains(r.stdout+r.stderr, key) ||
		!strings.Contains(r.stderr, "--recovery-key-file") || !strings.Contains(r.stderr, "stdin") {
		t.Errorf("tpm recover --recovery-key KEY: exit %d (want 2, a refusal naming - and --recovery-key-file, without the key):\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := stratum(t, "join", "--help"); !strings.Contains(r.stdout, "--token-file") || !strings.Contains(r.stdout, "STRATUM_JOIN_TOKEN_FILE") {
		t.Errorf("join --help does not offer --token-file: %s", r.stdout)
	}
}
