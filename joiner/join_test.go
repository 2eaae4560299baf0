package joiner

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest/fakefounder"
	"stratum/internal/syncbuf"
	"stratum/wire"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/tpm"
	"stratum/tpm/tpmtest"
)

func TestPinMismatchRefused(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	other, err := crypto.NewCA("cl-other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.CAPin = other.Pin()
	start := time.Now()
	err = runJoiner(t, cfg)
	var pe *PinError
	if !errors.As(err, &pe) {
		t.Fatalf("want a PinError, got %v", err)
	}
	// The presented CA's pin is never printed: pasted as --ca-pin, it
	// would trust whoever answered. The error names the pin given and
	// where the right one is printed.
	if strings.Contains(err.Error(), f.CA.Pin()) || strings.Contains(out.String(), f.CA.Pin()) {
		t.Errorf("the refusal prints the presented CA's pin: %v\n%s", err, out.String())
	}
	for _, want := range []string{other.Pin(), "another pin", "stratum serve", "stratum token create"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if ExitCode(err) != ExitFailed {
		t.Errorf("exit code %d, want %d (an untrusted founder is fatal)", ExitCode(err), ExitFailed)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("a pin mismatch must not be retried (took %s)", time.Since(start))
	}
	if len(f.Registers) != 0 {
		t.Errorf("the founder received %d registrations through an unpinned channel", len(f.Registers))
	}
}

func TestVerifyPinnedRejectsUnchainedLeaf(t *testing.T) {
	// A server that presents the pinned CA next to a leaf the CA did not
	// issue must be refused: the pin alone is not enough.
	ca, _ := crypto.NewCA("cl-a", time.Now())
	rogue, _ := crypto.NewCA("cl-rogue", time.Now())
	leaf, err := rogue.Issue(crypto.LeafRequest{CommonName: "founder", Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = verifyPinned([]*x509.Certificate{leaf.Cert, ca.Cert}, ca.Pin(), time.Now())
	var pe *PinError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("want a PinError about verification, got %v", err)
	}
	good, _ := ca.Issue(crypto.LeafRequest{CommonName: "founder", URIs: []*url.URL{crypto.FounderURI("cl-a")}, Server: true, Validity: time.Hour}, time.Now())
	if err := verifyPinned([]*x509.Certificate{good.Cert, ca.Cert}, ca.Pin(), time.Now()); err != nil {
		t.Fatalf("a leaf of the pinned CA is refused: %v", err)
	}
	if err := verifyPinned([]*x509.Certificate{good.Cert}, ca.Pin(), time.Now()); err == nil {
		t.Fatal("a chain without the CA certificate is accepted")
	}
}

// TestJoinWithTPM is the whole join on the cluster's release: register,
// pending, approved with a queue position, delivering, the delivery
// persisted at its modes with the unseal key sealed to a real (software)
// TPM, installing, done, joined.
func TestJoinWithTPM(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	f := fakefounder.New(t, fakefounder.Options{})
	unseal := "unseal-" + crypto.RandomHex(24)
	delivery, sec := f.Delivery(t, "n-abc12def", unseal)
	f.AcceptOn("registered", delivery)
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.TPMPath = sock
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	o := out.String()
	for _, want := range []string{"joiner key fingerprint: sha256:", "registered as join j-test0001",
		"state: pending", "state: approved: waiting for its turn, queue position 2", "state: delivering",
		"sealed the OpenBao unseal key", "state: installing", "state: joined"} {
		contains(t, o, want)
	}
	// One line per state change: the long-poll did not spin.
	if n := strings.Count(o, "state: pending"); n != 1 {
		t.Errorf("pending printed %d times", n)
	}
	// The registration carried what SPEC 4.2 lists.
	reg := f.Registers[0]
	for _, k := range []string{"token", "release", "selfUpgrade", "hostname", "mgmtIp", "machineId", "facts", "attestation"} {
		if _, ok := reg[k]; !ok {
			t.Errorf("registration lacks %s: %v", k, reg)
		}
	}
	if got := phases(f); got != "installing,done" {
		t.Errorf("progress phases %s, want installing,done", got)
	}

	root := cfg.Root
	wantModes := map[string]fs.FileMode{
		"etc/stratum/node.yaml":                     0o644,
		"etc/stratum/bundle.json":                   0o644,
		"etc/stratum/controlplane.env":              0o600,
		"etc/stratum/axdnsd.env":                    0o600,
		"etc/stratum/bootstrap-credentials.txt":     0o600,
		"etc/stratum/secrets/node.key":              0o600,
		"etc/stratum/secrets/node.crt":              0o644,
		"etc/stratum/secrets/ca.pem":                0o644,
		"etc/stratum/secrets/postgres-password":     0o600,
		"etc/stratum/secrets/admin-password":        0o600,
		"etc/stratum/secrets/openbao-token":         0o600,
		"etc/stratum/secrets/axdnsd-encryption-key": 0o600,
		"etc/stratum/secrets/openbao-node.token":    0o600,
		"etc/stratum/secrets/openbao-unseal.tpm":    0o600,
	}
	checkModes(t, root, wantModes)
	if st, err := os.Stat(filepath.Join(root, "etc/stratum/secrets")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("secrets dir: %v %v, want 0700", st.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/stratum/secrets/openbao-unseal.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a plaintext unseal key exists: %v", err)
	}

	// bundle.json: every secret dropped, everything else kept.
	bj := readFile(t, root, "etc/stratum/bundle.json")
	for name, v := range map[string]string{"nodeKey": sec.NodeKey, "postgresPassword": sec.Postgres, "adminPassword": sec.Admin,
		"openBaoToken": sec.OpenBao, "openBaoNodeToken": sec.OpenBaoNode, "axdnsdEncryptionKey": sec.Axdnsd, "openBaoUnsealKey": sec.Unseal} {
		if strings.Contains(bj, v) || strings.Contains(bj, `"`+name+`"`) {
			t.Errorf("bundle.json holds %s", name)
		}
	}
	var pub map[string]any
	if err := json.Unmarshal([]byte(bj), &pub); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"clusterId", "nodes", "parentDomain", "region", "dnsUpstreamServers", "caBundle", "nodeCert", "adminEmail", "generation", "vips", "futureField"} {
		if _, ok := pub[k]; !ok {
			t.Errorf("bundle.json lost %s", k)
		}
	}

	// Each secret in its own file, exactly.
	for rel, want := range map[string]string{
		"etc/stratum/node.yaml":                     sec.NodeYAML,
		"etc/stratum/secrets/node.key":              sec.NodeKey,
		"etc/stratum/secrets/node.crt":              sec.NodeCertPEM,
		"etc/stratum/secrets/ca.pem":                sec.CAPEM,
		"etc/stratum/secrets/postgres-password":     sec.Postgres,
		"etc/stratum/secrets/admin-password":        sec.Admin,
		"etc/stratum/secrets/openbao-token":         sec.OpenBao,
		"etc/stratum/secrets/axdnsd-encryption-key": sec.Axdnsd,
		"etc/stratum/secrets/openbao-node.token":    sec.OpenBaoNode,
		"etc/stratum/axdnsd.env":                    "ENCRYPTION_KEY=" + sec.Axdnsd + "\n",
		"etc/stratum/bootstrap-credentials.txt":     "email=" + sec.AdminEmail + "\npassword=" + sec.Admin + "\n",
		"etc/stratum/controlplane.env": "STRATUM_IAM_ADMIN_EMAIL=" + sec.AdminEmail + "\nSTRATUM_IAM_ADMIN_PASSWORD=" + sec.Admin +
			"\nSTRATUM_OPENBAO_TOKEN=" + sec.OpenBao + "\nSTRATUM_OPENBAO_ADDR=https://192.0.2.242:8200\nSTRATUM_PARENT_DOMAIN=stratum.test" +
			"\nSTRATUM_REGION=lab-1\nSTRATUM_CLUSTER_ID=cl-test1234\nSTRATUM_NODE_ID=n-abc12def\n",
	} {
		if got := readFile(t, root, rel); got != want {
			t.Errorf("%s:\n got %q\nwant %q", rel, got, want)
		}
	}

	// The unseal key is in no file, under root or in the state dir; the
	// TPM gives it back.
	assertAbsent(t, root, unseal)
	assertAbsent(t, cfg.StateDir, unseal)
	got, err := tpm.UnsealFile(sock, filepath.Join(root, "etc/stratum/secrets/openbao-unseal.tpm"))
	if err != nil {
		t.Fatalf("unseal: %v", err)
	}
	if string(got) != unseal {
		t.Fatalf("unsealed %q, want the delivered key", got)
	}

	// The state dir: identity 0600, state 0600; a rerun finds the join
	// done without registering again.
	checkModes(t, cfg.StateDir, map[string]fs.FileMode{identityFile: 0o600, stateFile: 0o600})
	var out2 syncbuf.Buffer
	cfg.Out = &out2
	before := len(f.Registers)
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if len(f.Registers) != before {
		t.Errorf("a rerun after joined registered again")
	}
	contains(t, out2.String(), "state: joined")
}

func TestNoTPMFailsAndReports(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	unseal := "unseal-" + crypto.RandomHex(24)
	delivery, _ := f.Delivery(t, "n-abc12def", unseal)
	f.OnEvent = func(r *fakefounder.Reg, ev string) {
		if ev == "registered" {
			f.ApproveAndDeliver(r, delivery)
		}
	}
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	err := runJoiner(t, cfg)
	if !errors.Is(err, ErrFailed) || ExitCode(err) != ExitFailed {
		t.Fatalf("want a failed join (exit 4), got %v (exit %d)\n%s", err, ExitCode(err), out.String())
	}
	if !strings.Contains(err.Error(), "no TPM") || !strings.Contains(err.Error(), "--insecure-store-unseal-key") {
		t.Errorf("the error should say there is no TPM and name the flag: %v", err)
	}
	if got := phases(f); got != "failed" {
		t.Fatalf("progress phases %q, want failed", got)
	}
	if msg, _ := f.Progress[0]["message"].(string); !strings.Contains(msg, "no TPM") {
		t.Errorf("the failure reported to the founder does not say why: %q", msg)
	}
	assertAbsent(t, cfg.Root, unseal)
	for _, name := range []string{"openbao-unseal.tpm", "openbao-unseal.key"} {
		if _, err := os.Stat(filepath.Join(cfg.Root, "etc/stratum/secrets", name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after the failure", name)
		}
	}
	// A rerun with the same token reports the final outcome again.
	err = runJoiner(t, cfg)
	if ExitCode(err) != ExitFailed {
		t.Errorf("rerun: %v (exit %d), want exit 4", err, ExitCode(err))
	}
}

func TestNoTPMInsecureFlag(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	unseal := "unseal-" + crypto.RandomHex(24)
	delivery, _ := f.Delivery(t, "n-abc12def", unseal)
	f.AcceptOn("registered", delivery)
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.InsecureStoreUnsealKey = true
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	contains(t, out.String(), "WARNING: no TPM")
	checkModes(t, cfg.Root, map[string]fs.FileMode{"etc/stratum/secrets/openbao-unseal.key": 0o600})
	if got := readFile(t, cfg.Root, "etc/stratum/secrets/openbao-unseal.key"); got != unseal {
		t.Errorf("plaintext unseal key %q", got)
	}
}

func TestRejectedAfterRetriedRegistration(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	f.Unavailable = 1 // the first registration meets a founder starting up
	f.OnEvent = func(r *fakefounder.Reg, ev string) {
		if ev == "registered" {
			go func() {
				time.Sleep(50 * time.Millisecond)
				f.Set(r.ID, wire.StateRejected, func(r *fakefounder.Reg) { r.Reason = "unknown machine in rack r9" })
			}()
		}
	}
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	start := time.Now()
	err := runJoiner(t, cfg)
	if !errors.Is(err, ErrRejected) || ExitCode(err) != ExitRejected {
		t.Fatalf("want rejected (exit 3), got %v\n%s", err, out.String())
	}
	if !strings.Contains(err.Error(), "unknown machine in rack r9") {
		t.Errorf("the reason is not in the error: %v", err)
	}
	o := out.String()
	contains(t, o, "UNAVAILABLE")
	contains(t, o, "retrying in 1s") // Retry-After honoured
	contains(t, o, "state: rejected: unknown machine in rack r9")
	if time.Since(start) < time.Second {
		t.Errorf("Retry-After: 1 was not honoured")
	}
}

func TestBadTokenEndsTheRun(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.Token = "sjt1.nope.nope"
	err := runJoiner(t, cfg)
	e, ok := apierr.As(err)
	if !ok || e.Code != apierr.JoinTokenInvalid {
		t.Fatalf("want JOIN_TOKEN_INVALID, got %v", err)
	}
	if !strings.Contains(err.Error(), "unknown, expired, revoked or used up") {
		t.Errorf("message: %v", err)
	}
	if n := strings.Count(err.Error()+out.String(), "ask the operator"); n != 1 {
		t.Errorf("the hint is printed %d times, want once:\n%v\n%s", n, err, out.String())
	}
	if len(f.Registers) != 1 {
		t.Errorf("a refused token was retried %d times", len(f.Registers))
	}
}

func TestReleaseMismatchWithoutSelfUpgrade(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.Release = "0.5.0"
	err := runJoiner(t, cfg)
	e, ok := apierr.As(err)
	if !ok || e.Code != apierr.ReleaseMismatch || !strings.Contains(err.Error(), `"clusterRelease":"0.6.0"`) {
		t.Fatalf("want RELEASE_MISMATCH with details, got %v", err)
	}
}

func phases(f *fakefounder.Founder) string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var p []string
	for _, b := range f.Progress {
		p = append(p, b["phase"].(string))
	}
	return strings.Join(p, ",")
}

func checkModes(t *testing.T, root string, want map[string]fs.FileMode) {
	t.Helper()
	for rel, mode := range want {
		st, err := os.Stat(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %04o, want %04o", rel, st.Mode().Perm(), mode)
		}
	}
}

func readFile(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertAbsent fails if secret's bytes occur in any file under dir.
func assertAbsent(t *testing.T, dir, secret string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret in plaintext", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRestartDuringInstall: a run that stops after reporting installing
// (here: done is refused once) is picked up by the next run, which
// persists the delivery again and reports only done.
func TestRestartDuringInstall(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	f.RefuseDone = 1
	delivery, sec := f.Delivery(t, "n-abc12def", "")
	f.AcceptOn("registered", delivery)
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	if err := runJoiner(t, cfg); err == nil || !strings.Contains(err.Error(), "done refused by the test") || ExitCode(err) != 1 {
		t.Fatalf("first run: %v", err)
	}
	// Meanwhile something damaged a secret: the rerun rewrites it.
	if err := os.WriteFile(filepath.Join(cfg.Root, "etc/stratum/secrets/postgres-password"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out2 syncbuf.Buffer
	cfg.Out = &out2
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("rerun: %v\n%s", err, out2.String())
	}
	contains(t, out2.String(), "picking up registration j-test0001 (installing)")
	if got := phases(f); got != "installing,done,done" {
		t.Errorf("phases %s, want installing,done,done", got)
	}
	if got := readFile(t, cfg.Root, "etc/stratum/secrets/postgres-password"); got != sec.Postgres {
		t.Errorf("postgres-password not rewritten")
	}
	checkModes(t, cfg.Root, map[string]fs.FileMode{"etc/stratum/secrets/postgres-password": 0o600})
	for _, name := range []string{"openbao-unseal.tpm", "openbao-unseal.key"} {
		if _, err := os.Stat(filepath.Join(cfg.Root, "etc/stratum/secrets", name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s written for an empty unseal key", name)
		}
	}
}
