package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"stratum/cli"
	"stratum/crypto"
	"stratum/internal/freeport"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// cliEnv is the environment of an operator logged in to f with stratum
// login: the API and CA from their env twins, the credentials file in a
// directory of the test's own.
func cliEnv(t *testing.T, f *stratumtest.Founder) []string {
	t.Helper()
	return []string{"STRATUM_API=https://" + f.API, "STRATUM_CA_FILE=" + filepath.Join(f.Dir, "ca.pem"), "XDG_CONFIG_HOME=" + t.TempDir()}
}

func cliLogin(t *testing.T, f *stratumtest.Founder, env []string) {
	t.Helper()
	email, password := f.Credentials(t)
	if r := stratumEnvIn(t, env, password+"\n", "login", "--email", email, "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// allCommands walks the command tree the binary runs: a new command is
// in it by being registered, so no test table can forget it.
func allCommands() []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		out = append(out, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(cli.NewRoot())
	return out
}

func commandArgs(c *cobra.Command) []string { return strings.Fields(c.CommandPath())[1:] }

// TestCLIEveryCommand drives every command of the tree: --help and -h
// print to stdout and exit 0, every flag's help names its environment
// twin (or says it has none), --version answers, an unknown flag is a
// usage error (exit 2, nothing on stdout), a group without its
// subcommand is one too; then -o json (and yaml) on every command that
// prints a resource, against a running founder.
func TestCLIEveryCommand(t *testing.T) {
	cmds := allCommands()
	if len(cmds) < 40 {
		t.Fatalf("only %d commands in the tree", len(cmds))
	}
	for _, c := range cmds {
		args := commandArgs(c)
		name := strings.Join(append([]string{"stratum"}, args...), " ")
		t.Run(name, func(t *testing.T) {
			for _, h := range []string{"--help", "-h"} {
				r := stratum(t, append(append([]string{}, args...), h)...)
				topic := !c.Runnable() && !c.HasSubCommands() // a help topic: its text
				if r.code != 0 || r.stderr != "" || (!topic && !strings.Contains(r.stdout, "Usage:")) || (topic && !strings.Contains(r.stdout, c.Long)) {
					t.Fatalf("%s %s: exit %d, stdout %q, stderr %q", name, h, r.code, r.stdout, r.stderr)
				}
				if h == "-h" {
					continue
				}
				_, flagsPart, _ := strings.Cut(r.stdout, "\nFlags:\n")
				lines := strings.Split(flagsPart, "\n")
				c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
					if fl.Hidden || fl.Name == "help" || fl.Name == "version" {
						return
					}
					for _, l := range lines {
						if strings.Contains(l, "--"+fl.Name+" ") || strings.HasSuffix(l, "--"+fl.Name) {
							if !strings.Contains(l, "[env STRATUM_") && !strings.Contains(l, "[no env twin") {
								t.Errorf("%s --help: --%s shows no environment twin: %q", name, fl.Name, l)
							}
							return
						}
					}
					t.Errorf("%s --help does not show --%s", name, fl.Name)
				})
			}
			if r := stratum(t, append(append([]string{}, args...), "--version")...); r.code != 0 || !strings.HasPrefix(r.stdout, "stratum ") {
				t.Errorf("%s --version: exit %d, stdout %q, stderr %q", name, r.code, r.stdout, r.stderr)
			}
			r := stratum(t, append(append([]string{}, args...), "--no-such-flag")...)
			if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "no-such-flag") {
				t.Errorf("%s --no-such-flag: exit %d (want 2), stdout %q, stderr %q", name, r.code, r.stdout, r.stderr)
			}
			if c.HasSubCommands() {
				if r := stratum(t, append(append([]string{}, args...), "no-such-command")...); r.code != 2 || r.stdout != "" {
					t.Errorf("%s no-such-command: exit %d (want 2), stdout %q", name, r.code, r.stdout)
				}
			}
		})
	}

	t.Run("exit codes are documented", func(t *testing.T) {
		r := stratum(t, "help", "exit-codes")
		for _, want := range []string{"0  ok", "1  error", "2  usage", "3  not authenticated", "4  trust failure", "5  not found", "6  conflict", "7  try again later"} {
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Fatalf("stratum help exit-codes: exit %d, no %q in\n%s", r.code, want, r.stdout)
			}
		}
	})
	t.Run("completion", func(t *testing.T) {
		for _, sh := range []string{"bash", "zsh", "fish"} {
			if r := stratum(t, "completion", sh); r.code != 0 || !strings.Contains(r.stdout, "stratum") {
				t.Errorf("completion %s: exit %d", sh, r.code)
			}
		}
	})

	testResourceOutputs(t, cmds)
}

// testResourceOutputs runs -o json on every command that prints a
// resource, in an order that makes each one's subject exist.
func testResourceOutputs(t *testing.T, cmds []*cobra.Command) {
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	env := cliEnv(t, f)
	cliLogin(t, f, env)
	run := func(args ...string) result { return stratumEnv(t, env, args...) }
	jsonOf := func(args ...string) map[string]any {
		t.Helper()
		r := run(append(args, "-o", "json")...)
		var v map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil {
			t.Fatalf("stratum %s -o json: exit %d, stdout %q, stderr %q", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return v
	}
	covered := map[string]bool{}
	cover := func(path string) { covered[path] = true }

	if v := jsonOf("version"); v["version"] == nil || v["commit"] == nil {
		t.Fatalf("version -o json: %v", v)
	}
	cover("version")

	tok := jsonOf("token", "create", "--uses", "3")
	cover("token create")
	token, _ := tok["token"].(string)
	if !strings.HasPrefix(token, "sjt1.") {
		t.Fatalf("token create -o json: %v", tok)
	}
	if v := jsonOf("token", "list"); len(v["tokens"].([]any)) != 1 {
		t.Fatalf("token list: %v", v)
	}
	cover("token list")
	var y map[string]any
	if r := run("token", "list", "-o", "yaml"); r.code != 0 || yaml.Unmarshal([]byte(r.stdout), &y) != nil || y["tokens"] == nil {
		t.Fatalf("token list -o yaml: exit %d %q", r.code, r.stdout)
	}

	j1, j2 := register(t, f, token, "127.0.0.21"), register(t, f, token, "127.0.0.22")
	j3joiner, j3 := registerJoiner(t, f, token, "127.0.0.23")
	if v := jsonOf("joins", "list"); len(v["registrations"].([]any)) != 3 {
		t.Fatalf("joins list: %v", v)
	}
	cover("joins list")
	if v := jsonOf("joins", "get", j1); v["joinId"] != j1 {
		t.Fatalf("joins get: %v", v)
	}
	cover("joins get")
	if v := jsonOf("joins", "approve", j1); v["state"] != "delivering" {
		t.Fatalf("joins approve: %v", v)
	}
	cover("joins approve")
	// By default approve prints one line, not the registration.
	if r := run("joins", "approve", j3); r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "approved "+j3+" as node ") {
		t.Fatalf("joins approve: exit %d, %q", r.code, r.stdout)
	}
	if v := jsonOf("joins", "cancel", j1, "--reason", "test"); v["joinId"] != j1 {
		t.Fatalf("joins cancel: %v", v)
	}
	cover("joins cancel")
	if v := jsonOf("joins", "reject", j2, "--reason", "test"); v["state"] != "rejected" {
		t.Fatalf("joins reject: %v", v)
	}
	cover("joins reject")
	// Exit codes from the API's error codes: not found, conflict.
	if r := run("joins", "get", "j-00000000"); r.code != 5 {
		t.Errorf("joins get of an unknown join: exit %d (want 5) %s", r.code, r.stderr)
	}
	if r := run("joins", "reject", j2, "--reason", "again"); r.code != 6 {
		t.Errorf("rejecting a rejected join: exit %d (want 6) %s", r.code, r.stderr)
	}
	if r := stratumEnv(t, append(env, "STRATUM_TOKEN=not-a-token"), "joins", "list"); r.code != 3 {
		t.Errorf("a bad token: exit %d (want 3) %s", r.code, r.stderr)
	}

	for _, path := range [][]string{{"members"}, {"release-set"}, {"sessions", "list"}} {
		jsonOf(path...)
		cover(strings.Join(path, " "))
	}
	// release-set reads the summary, then pages of nodes[] up to --nodes.
	if v := jsonOf("release-set", "--nodes", "1"); len(v["nodes"].([]any)) != 1 || v["summary"] == nil {
		t.Errorf("release-set --nodes 1: %d nodes, summary %v", len(v["nodes"].([]any)), v["summary"])
	}
	if r := run("release-set", "--nodes", "1"); r.code != 0 || !strings.Contains(r.stdout, "showing 1 of 2 nodes") {
		t.Errorf("release-set --nodes 1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// members remove: j3 joins (its joiner reports installing and done),
	// then leaves; the founder and unknown nodes are refused.
	for _, phase := range []string{"installing", "done"} {
		j3joiner.Must(t, "POST", "/v1/join/registrations/"+j3+"/progress", map[string]string{"phase": phase}, 200, nil)
	}
	ms := jsonOf("members")["members"].([]any) // in join order: the founder first
	if len(ms) != 2 || ms[1].(map[string]any)["state"] != "active" {
		t.Fatalf("after j3 joined: members %v", ms)
	}
	founder, node3 := ms[0].(map[string]any)["nodeId"].(string), ms[1].(map[string]any)["nodeId"].(string)
	// members replace: j4's machine takes node3's place (node id and
	// address), then joins as node3.
	tok4, _ := jsonOf("token", "create")["token"].(string)
	j4joiner, j4 := registerJoiner(t, f, tok4, "127.0.0.24")
	if v := jsonOf("members", "replace", node3, "--join", j4, "--reason", "test"); v["joinId"] != j4 || v["assignment"].(map[string]any)["nodeId"] != node3 {
		t.Fatalf("members replace %s --join %s: %v", node3, j4, v)
	}
	cover("members replace")
	for _, phase := range []string{"installing", "done"} {
		j4joiner.Must(t, "POST", "/v1/join/registrations/"+j4+"/progress", map[string]string{"phase": phase}, 200, nil)
	}
	if ms := jsonOf("members")["members"].([]any); len(ms) != 2 || ms[1].(map[string]any)["nodeId"] != node3 || ms[1].(map[string]any)["state"] != "active" {
		t.Fatalf("after j4 replaced %s: members %v", node3, ms)
	}
	// inventory apply and list.
	inv := filepath.Join(t.TempDir(), "rack.yaml")
	doc := "machines:\n  - match: {keyFingerprint: sha256:" + strings.Repeat("ab", 32) + "}\n    nodeId: n-inv00001\n    role: worker\n    mgmtIp: 127.0.0.31\n"
	if err := os.WriteFile(inv, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	jsonOf("inventory", "apply", "-f", inv)
	cover("inventory apply")
	if v := jsonOf("inventory", "list"); len(v["machines"].([]any)) != 1 || v["machines"].([]any)[0].(map[string]any)["state"] != "expected" {
		t.Fatalf("inventory list: %v", v)
	}
	cover("inventory list")
	if r := run("members", "remove", founder, "--reason", "test"); r.code != 6 || !strings.Contains(r.stderr, "cannot remove itself") {
		t.Errorf("members remove of the founder %s: exit %d (want 6) %s", founder, r.code, r.stderr)
	}
	if r := run("members", "remove", "n-nosuchnd", "--reason", "test"); r.code != 5 {
		t.Errorf("members remove of an unknown node: exit %d (want 5) %s", r.code, r.stderr)
	}
	if r := run("members", "remove", node3); r.code != 2 || !strings.Contains(r.stderr, "reason") {
		t.Errorf("members remove without --reason: exit %d (want 2) %s", r.code, r.stderr)
	}
	if v := jsonOf("members", "remove", node3, "--reason", "test"); node3 == "" || v["nodeId"] != node3 {
		t.Fatalf("members remove %q: %v", node3, v)
	}
	cover("members remove")
	if v := jsonOf("members"); len(v["members"].([]any)) != 1 {
		t.Errorf("after members remove: %v", v)
	}
	if v := jsonOf("cluster", "release", "set", "0.1.0"); v["admissionRelease"] != "0.1.0" {
		t.Fatalf("cluster release set: %v", v)
	}
	cover("cluster release set")

	a := stratumtest.SignedReleaseTree(t, "0.2.0", []string{"0.1.0"}, 1<<20)
	if v := jsonOf("release", "trust-key", a.PubFile, "--name", "a.pub"); v["keyId"] != a.KeyID || v["file"] != "a.pub" || v["trusted"] != true {
		t.Fatalf("release trust-key: %v", v)
	}
	cover("release trust-key")
	if v := jsonOf("release", "keys"); len(v["keys"].([]any)) != 1 || v["keys"].([]any)[0].(map[string]any)["trusted"] != true {
		t.Fatalf("release keys: %v", v)
	}
	cover("release keys")
	if v := jsonOf("release", "push", a.Dir); v["release"] != "0.2.0" {
		t.Fatalf("release push: %v", v)
	}
	cover("release push")
	if v := jsonOf("release", "get", "0.2.0"); v["release"] != "0.2.0" {
		t.Fatalf("release get: %v", v)
	}
	cover("release get")
	b := stratumtest.SignedReleaseTree(t, "0.3.0", []string{"0.2.0"}, 1<<10)
	b.TrustOn(t, f)
	if v := jsonOf("release", "import", b.Dir); v["release"] != "0.3.0" {
		t.Fatalf("release import: %v", v)
	}
	cover("release import")
	if v := jsonOf("release", "list"); len(v["releases"].([]any)) != 2 {
		t.Fatalf("release list: %v", v)
	}
	cover("release list")
	if r := run("release", "get", "9.9.9"); r.code != 5 {
		t.Errorf("release get of an unknown release: exit %d (want 5)", r.code)
	}

	for _, c := range cmds {
		if c.Flags().Lookup("output") != nil && !covered[strings.Join(commandArgs(c), " ")] {
			t.Errorf("%s prints a resource (-o) but this test does not drive its -o json", c.CommandPath())
		}
	}
}

// register registers a joiner with its own self-signed key on f's join
// listener and returns the join id.
func register(t *testing.T, f *stratumtest.Founder, token, mgmt string) string {
	t.Helper()
	_, id := registerJoiner(t, f, token, mgmt)
	return id
}

// registerJoiner is register answering the joiner too, for its progress.
func registerJoiner(t *testing.T, f *stratumtest.Founder, token, mgmt string) (*stratumtest.Client, string) {
	t.Helper()
	j := f.Joiner(t, nil)
	v := j.Register(t, wire.RegisterRequest{Token: token, Release: "0.1.0", Hostname: "node-" + strings.ReplaceAll(mgmt, ".", "-"), MgmtIP: mgmt}, 201)
	if v.JoinID == "" {
		t.Fatalf("register: no join id: %+v", v)
	}
	return j, v.JoinID
}

// TestCLILogin: stratum login reads the password from stdin, keeps the
// session in a 0600 file the admin commands use, refuses a file others
// can read, and logout ends the session on the founder and forgets it; a
// wrong password exits 3 and keeps nothing; a rate-limited login says
// when to retry.
func TestCLILogin(t *testing.T) {
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	env := cliEnv(t, f)
	var cfgDir string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "XDG_CONFIG_HOME="); ok {
			cfgDir = v
		}
	}
	creds := filepath.Join(cfgDir, "stratum", "credentials")
	email, password := f.Credentials(t)

	if r := stratumEnv(t, env, "token", "list"); r.code != 3 || !strings.Contains(r.stderr, "stratum login") {
		t.Fatalf("before login: exit %d (want 3), %s", r.code, r.stderr)
	}
	if r := stratumEnvIn(t, env, password+"\n", "login", "--password-stdin"); r.code != 2 {
		t.Fatalf("login --password-stdin without --email: exit %d (want 2)", r.code)
	}
	if r := stratumEnvIn(t, env, "wrong-password\n", "login", "--email", email, "--password-stdin"); r.code != 3 {
		t.Fatalf("a wrong password: exit %d (want 3) %s", r.code, r.stderr)
	}
	if _, err := os.Stat(creds); !os.IsNotExist(err) {
		t.Fatalf("a failed login wrote %s: %v", creds, err)
	}

	r := stratumEnvIn(t, env, password+"\n", "login", "--email", email, "--password-stdin")
	if r.code != 0 || !strings.Contains(r.stdout, "logged in to https://"+f.API) {
		t.Fatalf("login: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, err := os.Stat(creds)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", st, err)
	}
	if dst, _ := os.Stat(filepath.Dir(creds)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("credentials directory mode %v", dst.Mode().Perm())
	}
	raw, _ := os.ReadFile(creds)
	if bytes.Contains(raw, []byte(password)) {
		t.Fatal("the credentials file holds the password")
	}
	var file struct {
		Sessions map[string]struct{ Token string } `json:"sessions"`
	}
	if err := json.Unmarshal(raw, &file); err != nil || file.Sessions["https://"+f.API].Token == "" {
		t.Fatalf("credentials file: %s %v", raw, err)
	}
	session := file.Sessions["https://"+f.API].Token
	if r := stratumEnv(t, env, "token", "list"); r.code != 0 {
		t.Fatalf("token list with the kept session: exit %d %s", r.code, r.stderr)
	}

	if err := os.Chmod(creds, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := stratumEnv(t, env, "token", "list"); r.code == 0 || !strings.Contains(r.stderr, "chmod 600") {
		t.Fatalf("a credentials file others can read: exit %d %s", r.code, r.stderr)
	}
	os.Chmod(creds, 0o600)

	if r := stratumEnv(t, env, "logout"); r.code != 0 {
		t.Fatalf("logout: exit %d %s", r.code, r.stderr)
	}
	if raw, _ := os.ReadFile(creds); bytes.Contains(raw, []byte(session)) {
		t.Fatal("logout left the session in the credentials file")
	}
	if r := stratumEnv(t, env, "token", "list"); r.code != 3 {
		t.Fatalf("after logout: exit %d (want 3)", r.code)
	}
	if r := stratumEnv(t, append(env, "STRATUM_TOKEN="+session), "token", "list"); r.code != 3 {
		t.Fatalf("the logged-out session still works: exit %d", r.code)
	}

	// Wrong passwords until the founder limits this source: the CLI says
	// when to retry.
	for i := 0; ; i++ {
		r := stratumEnvIn(t, env, "wrong-password\n", "login", "--email", email, "--password-stdin")
		if strings.Contains(r.stderr, "retry in") {
			// Its own code (help exit-codes): a script waits and
			// retries, where a wrong password (3) needs a person.
			if r.code != cli.ExitRetry {
				t.Fatalf("a limited login: exit %d, want %d", r.code, cli.ExitRetry)
			}
			break
		}
		if i == 20 {
			t.Fatalf("no rate limit after %d wrong logins; last: %s", i, r.stderr)
		}
	}
}

// TestCLILoginRemembersTheCA: stratum login run in the founder's
// directory with a relative --ca-file keeps that file's absolute path
// with the session, so the next command, run from another directory
// with no --ca-file, trusts it; a --ca-file given then still wins.
func TestCLILoginRemembersTheCA(t *testing.T) {
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	email, password := f.Credentials(t)
	env := append(stratumtest.Env(), "STRATUM_API=https://"+f.API, "XDG_CONFIG_HOME="+t.TempDir())
	run := func(dir, stdin string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(stratumtest.Binary(t), args...)
		cmd.Dir, cmd.Env, cmd.Stdin = dir, env, strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := run(f.Dir, password+"\n", "login", "--ca-file", "ca.pem", "--email", email, "--password-stdin"); code != 0 {
		t.Fatalf("login: exit %d\n%s", code, out)
	}
	elsewhere := t.TempDir()
	if code, out := run(elsewhere, "", "token", "list"); code != 0 {
		t.Fatalf("token list from another directory after login --ca-file ca.pem: exit %d\n%s", code, out)
	}
	other := filepath.Join(elsewhere, "other-ca.pem")
	ca, err := crypto.NewCA("cl-othercaa", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run(elsewhere, "", "token", "list", "--ca-file", other); code == 0 {
		t.Fatalf("a --ca-file naming another CA was not used: exit 0\n%s", out)
	}
}

// TestPasswordRemovesBootstrapCredentials: once the bootstrap admin
// changes its password (stratum password), bootstrap-credentials.txt,
// which holds the old one, is gone, and the sign-in hint the console
// shows (GET /v1/auth/sign-in) no longer points to it; the new password
// signs in, the old one does not.
func TestPasswordRemovesBootstrapCredentials(t *testing.T) {
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	env := cliEnv(t, f)
	cliLogin(t, f, env)
	email, old := f.Credentials(t)
	creds := filepath.Join(f.Dir, "bootstrap-credentials.txt")
	hint := func() wire.SignInHint {
		t.Helper()
		var h wire.SignInHint
		f.AdminClient().Must(t, "GET", "/v1/auth/sign-in", nil, http.StatusOK, &h)
		return h
	}
	if !hint().BootstrapCredentials {
		t.Fatal("a new dev founder's sign-in hint does not name bootstrap-credentials.txt")
	}
	const newPassword = "a-new-password-for-the-admin"
	if r := stratumEnvIn(t, env, old+"\n"+newPassword+"\n", "password"); r.code != 0 {
		t.Fatalf("stratum password: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(creds); !os.IsNotExist(err) {
		raw, _ := os.ReadFile(creds)
		t.Fatalf("%s is still there after the password changed (%v):\n%s", creds, err, raw)
	}
	if hint().BootstrapCredentials {
		t.Error("the sign-in hint still names bootstrap-credentials.txt after the password changed")
	}
	if r := stratumEnvIn(t, env, old+"\n", "login", "--email", email, "--password-stdin"); r.code != 3 {
		t.Errorf("the old password: exit %d (want 3)", r.code)
	}
	if r := stratumEnvIn(t, env, newPassword+"\n", "login", "--email", email, "--password-stdin"); r.code != 0 {
		t.Errorf("the new password: exit %d %s", r.code, r.stderr)
	}
}

// TestCLIFounderNotAnswering: an admin command against an address where
// no founder listens (one stopped, or a mistyped --api) says so and names
// the address and where it came from, with exit 1, instead of only Go's
// dial error.
func TestCLIFounderNotAnswering(t *testing.T) {
	api := "https://127.0.0.1:" + strconv.Itoa(freeport.Must(t, "127.0.0.1"))
	ca, err := crypto.NewCA("cl-noanswer1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	r := stratumEnv(t, []string{"STRATUM_API=" + api, "STRATUM_CA_FILE=" + caFile, "STRATUM_TOKEN=sat1.x.y"}, "token", "list")
	if r.code != 1 {
		t.Fatalf("exit %d (want 1): %s", r.code, r.stderr)
	}
	for _, want := range []string{"no founder answers at " + api, "STRATUM_API", "connection refused"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "sat1.x.y") {
		t.Errorf("stderr shows the token: %s", r.stderr)
	}
}

// TestCLIReleasePush: push uploads a signed tree from this machine to a
// running founder, which keeps exactly its bytes; a tree that fails
// verification (a flipped byte, an untrusted signer) is refused and
// leaves nothing.
func TestCLIReleasePush(t *testing.T) {
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	env := cliEnv(t, f)
	cliLogin(t, f, env)
	tree := stratumtest.SignedReleaseTree(t, "0.2.0", []string{"0.1.0"}, 8<<20)

	// A founder that trusts no key yet says how to trust one.
	if r := stratumEnv(t, env, "release", "push", tree.Dir); r.code == 0 || !strings.Contains(r.stderr, "stratum release trust-key") {
		t.Fatalf("a push before any key is trusted: exit %d, and the error does not name stratum release trust-key: %s", r.code, r.stderr)
	}

	// Untrusted: the founder holds another signer's key only.
	stratumtest.SignedReleaseTree(t, "0.2.0", nil, 10).TrustOn(t, f)
	if r := stratumEnv(t, env, "release", "push", tree.Dir); r.code == 0 || !strings.Contains(r.stderr, "signature") {
		t.Fatalf("an untrusted tree: exit %d %s", r.code, r.stderr)
	}
	tree.TrustOn(t, f)
	blob := filepath.Join(tree.Dir, filepath.FromSlash(tree.Blob))
	good, _ := os.ReadFile(blob)
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 1
	os.WriteFile(blob, bad, 0o644)
	if r := stratumEnv(t, env, "release", "push", tree.Dir); r.code == 0 || !strings.Contains(r.stderr, tree.Blob) {
		t.Fatalf("a tampered tree: exit %d %s", r.code, r.stderr)
	}
	for _, d := range []string{"releases/0.2.0", "uploads"} {
		if _, err := os.Stat(filepath.Join(f.Dir, d)); !os.IsNotExist(err) {
			t.Fatalf("a refused push left %s: %v", d, err)
		}
	}
	if r := stratumEnv(t, env, "release", "list"); r.code != 0 || strings.Contains(r.stdout, "0.2.0") {
		t.Fatalf("release list after refused pushes: exit %d %s", r.code, r.stdout)
	}

	os.WriteFile(blob, good, 0o644)
	r := stratumEnv(t, env, "release", "push", tree.Dir)
	if r.code != 0 || !strings.Contains(r.stdout, "pushed release 0.2.0") {
		t.Fatalf("push: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	kept, err := os.ReadFile(filepath.Join(f.Dir, "releases", "0.2.0", filepath.FromSlash(tree.Blob)))
	if err != nil || !bytes.Equal(kept, good) {
		t.Fatalf("the founder kept other bytes: %v", err)
	}
	// Sizes read as sizes: the 8 MiB blob and the 3 MiB sysext are 11.0 MiB.
	if r := stratumEnv(t, env, "release", "list"); r.code != 0 || !regexp.MustCompile(`(?m)^0\.2\.0\s+\d+\s+11\.0 MiB\s`).MatchString(r.stdout) {
		t.Fatalf("release list does not show 0.2.0 with its size as 11.0 MiB: exit %d %s", r.code, r.stdout)
	}
	// The same content again is fine; --data on a running founder says
	// how to do it through the API.
	if r := stratumEnv(t, env, "release", "push", tree.Dir); r.code != 0 {
		t.Fatalf("pushing the same tree again: exit %d %s", r.code, r.stderr)
	}
	if r := stratumEnv(t, nil, "release", "list", "--data", f.Dir); r.code == 0 || !strings.Contains(r.stderr, "--api") {
		t.Fatalf("release list --data on a running founder: exit %d %s", r.code, r.stderr)
	}
}

// TestReleaseUploadRefusesHostileTar: the upload endpoint of a running
// founder, attacked with tar streams that would write outside the tree
// (.., an absolute path, a symbolic link then a file through it), that
// carry a file the signed manifest does not list, or that exceed the
// founder's --release-upload-limit: each is refused, and nothing is
// written outside the staging directory nor kept.
func TestReleaseUploadRefusesHostileTar(t *testing.T) {
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true, Args: []string{"--release-upload-limit", "2MiB"}})
	admin := f.Admin(t)
	tree := stratumtest.SignedReleaseTree(t, "0.2.0", []string{"0.1.0"}, 4<<10)
	tree.TrustOn(t, f)
	mb, _ := os.ReadFile(filepath.Join(tree.Dir, "payload", "manifest.json"))
	sb, _ := os.ReadFile(filepath.Join(tree.Dir, "payload", "manifest.sig"))
	outside := filepath.Join(filepath.Dir(f.Dir), "escaped-"+filepath.Base(f.Dir))

	type entry struct {
		name, link string
		typ        byte
		body       []byte
	}
	stream := func(entries ...entry) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, e := range append([]entry{{name: "payload/manifest.json", body: mb}, {name: "payload/manifest.sig", body: sb}}, entries...) {
			typ := e.typ
			if typ == 0 {
				typ = tar.TypeReg
			}
			tw.WriteHeader(&tar.Header{Name: e.name, Linkname: e.link, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body))})
			tw.Write(e.body)
		}
		tw.Close()
		return b.Bytes()
	}
	rel, _ := filepath.Rel(filepath.Join(f.Dir, "uploads"), outside)
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"dot-dot", stream(entry{name: filepath.ToSlash(rel), body: []byte("pwned")}), 400},
		{"absolute", stream(entry{name: outside, body: []byte("pwned")}), 400},
		{"symlink", stream(entry{name: "os/link", typ: tar.TypeSymlink, link: filepath.Dir(outside)}, entry{name: "os/link/" + filepath.Base(outside), body: []byte("pwned")}), 400},
		{"unlisted file", stream(entry{name: "os/extra", body: []byte("pwned")}), 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", "https://"+f.API+"/v1/admin/releases/upload", bytes.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+admin.Token)
			req.Header.Set("Content-Type", "application/x-tar")
			resp, err := f.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if _, err := os.Lstat(outside); !os.IsNotExist(err) {
				t.Fatalf("the upload wrote outside the tree: %v", err)
			}
			for _, d := range []string{"uploads", "releases/0.2.0"} {
				if _, err := os.Stat(filepath.Join(f.Dir, d)); !os.IsNotExist(err) {
					t.Fatalf("a refused upload left %s", d)
				}
			}
		})
	}
	// The CLI against the limit: a clear refusal, exit 1.
	big := stratumtest.SignedReleaseTree(t, "0.3.0", []string{"0.1.0"}, 3<<20)
	big.TrustOn(t, f)
	env := cliEnv(t, f)
	cliLogin(t, f, env)
	if r := stratumEnv(t, env, "release", "push", big.Dir); r.code != 1 || !strings.Contains(r.stderr, "limit") {
		t.Fatalf("push over the limit: exit %d %s", r.code, r.stderr)
	}
}

// TestReleaseTrustKeyOnAStoppedFounder: on the data directory of a
// founder that has started once (its keys adopted) and is stopped, a key
// file dropped there trusts nothing: stratum release keys --data lists it
// untrusted, the offline import refuses the tree it signs, naming the
// command that trusts it; stratum release trust-key --data trusts it, the
// listing says so and the same import goes through. The founder started
// again lists the same (table and -o json alike), and release keys --data
// beside it points at the API.
func TestReleaseTrustKeyOnAStoppedFounder(t *testing.T) {
	t.Parallel()
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	if code, _ := f.Stop(os.Interrupt, 20*time.Second); code != 0 {
		t.Fatalf("the founder exited %d", code)
	}
	tree := stratumtest.SignedReleaseTree(t, "0.2.0", nil, 1024)
	tree.Trust(t, f.Dir)
	dropped := filepath.Join(f.Dir, "release-keys", tree.KeyID[:16]+".pub")
	if r := stratum(t, "release", "keys", "--data", f.Dir); r.code != 0 || !regexp.MustCompile(`(?m)^`+tree.KeyID[:16]+`\.pub +`+tree.KeyID+` +NO: stratum release trust-key`).MatchString(r.stdout) {
		t.Fatalf("release keys --data with a dropped key file: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := stratum(t, "release", "import", "--data", f.Dir, tree.Dir); r.code == 0 || !strings.Contains(r.stderr, "stratum release trust-key "+dropped) {
		t.Fatalf("an offline import signed by a dropped key: exit %d %s", r.code, r.stderr)
	}
	if r := stratum(t, "release", "trust-key", "--data", f.Dir, dropped); r.code != 0 || !strings.Contains(r.stdout, tree.KeyID) {
		t.Fatalf("release trust-key --data: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := stratum(t, "release", "import", "--data", f.Dir, tree.Dir); r.code != 0 || !strings.Contains(r.stdout, "imported release 0.2.0") {
		t.Fatalf("the offline import once the key is trusted: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	offline := map[string]string{}
	for _, o := range []string{"table", "json"} {
		r := stratum(t, "release", "keys", "--data", f.Dir, "-o", o)
		if r.code != 0 || !strings.Contains(r.stdout, tree.KeyID) || strings.Contains(r.stdout, "NO") || strings.Contains(r.stdout, "false") {
			t.Fatalf("release keys --data -o %s once the key is trusted: exit %d %q %q", o, r.code, r.stdout, r.stderr)
		}
		offline[o] = r.stdout
	}
	var keys wire.ReleaseKeys
	if err := json.Unmarshal([]byte(offline["json"]), &keys); err != nil || len(keys.Keys) != 1 || keys.Keys[0] != (wire.ReleaseKey{File: tree.KeyID[:16] + ".pub", KeyID: tree.KeyID, Trusted: true}) {
		t.Fatalf("release keys --data -o json: %+v %v", keys, err)
	}

	f = stratumtest.ServeDev(t, f.Dir)
	env := cliEnv(t, f)
	cliLogin(t, f, env)
	for o, want := range offline {
		if r := stratumEnv(t, env, "release", "keys", "-o", o); r.code != 0 || r.stdout != want {
			t.Errorf("release keys -o %s through the API: exit %d %q %q, want the --data output %q", o, r.code, r.stdout, r.stderr, want)
		}
	}
	if r := stratum(t, "release", "keys", "--data", f.Dir); r.code == 0 || !strings.Contains(r.stderr, "stratum release keys --api") {
		t.Fatalf("release keys --data on a running founder: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
