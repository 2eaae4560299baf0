// Package e2e drives the real stratum binary: it is built once, statically
// (CGO_ENABLED=0), and each test runs it as an operator would.
package e2e

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"stratum/internal/stratumtest"
)

func TestMain(m *testing.M) { os.Exit(stratumtest.Main(m)) }

// env is the environment without STRATUM_* twins that would change flags.
func env() []string { return stratumtest.Env() }

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

// stratum runs the binary to completion.
func stratum(t *testing.T, args ...string) result {
	t.Helper()
	return stratumEnv(t, nil, args...)
}

// stratumEnv runs the binary with extra environment variables.
func stratumEnv(t *testing.T, extra []string, args ...string) result {
	t.Helper()
	return stratumEnvIn(t, extra, "", args...)
}

// stratumIn runs the binary with stdin, as an operator pasting a key.
func stratumIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return stratumEnvIn(t, nil, stdin, args...)
}

func stratumEnvIn(t *testing.T, extra []string, stdin string, args ...string) result {
	t.Helper()
	r := stratumtest.RunInput(t, extra, stdin, args...)
	return result{code: r.Code, stdout: r.Stdout, stderr: r.Stderr}
}

// call sends a JSON request to the admin API as token (none when empty):
// the status and the raw answer.
func call(f *stratumtest.Founder, method, path, token string, body any) (int, []byte, error) {
	c := f.AdminClient()
	c.Token = token
	return c.Raw(method, path, body)
}

// credentials reads bootstrap-credentials.txt.
func credentials(t *testing.T, dir string) (email, password string) {
	t.Helper()
	email, password = (&stratumtest.Founder{Dir: dir}).Credentials(t)
	if len(password) != 24 {
		t.Fatalf("bootstrap password of %d characters, want 24", len(password))
	}
	return email, password
}

type apiToken struct {
	ID    string `json:"tokenId"`
	Token string `json:"token"`
}

const describeOnly = `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:DescribeRelease"],"resource":["*"]}]}`

func createToken(f *stratumtest.Founder, admin, name string) (apiToken, int, error) {
	status, body, err := call(f, "POST", "/v1/iam/tokens", admin, map[string]any{"name": name, "ttl": "1h", "policy": json.RawMessage(describeOnly)})
	if err != nil || status != 201 {
		return apiToken{}, status, err
	}
	var tok apiToken
	if err := json.Unmarshal(body, &tok); err != nil || tok.ID == "" || tok.Token == "" {
		return apiToken{}, status, fmt.Errorf("create token answer %s: %v", body, err)
	}
	return tok, status, nil
}

func tokenIDs(t testing.TB, f *stratumtest.Founder, admin string) map[string]bool {
	t.Helper()
	status, body, err := call(f, "GET", "/v1/iam/tokens", admin, nil)
	if err != nil || status != 200 {
		t.Fatalf("list tokens: %d %s %v", status, body, err)
	}
	var out struct {
		Tokens []struct {
			ID string `json:"tokenId"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, tk := range out.Tokens {
		ids[tk.ID] = true
	}
	return ids
}

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestStaticBinary(t *testing.T) {
	f, err := elf.Open(stratumtest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary has a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
		t.Fatalf("the binary links %v", libs)
	}
	if r := stratum(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "stratum ") {
		t.Fatalf("stratum version = %d %q %q", r.code, r.stdout, r.stderr)
	}
}
