package joinflow

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"stratum/internal/stratumtest"
	"stratum/release"
	"stratum/tpm"
	"stratum/tpm/tpmtest"
)

const blobSize = 48 << 20

// releaseTree writes a signed release 0.2.0 (upgrading 0.1.0) and returns
// its directory and the key directory that trusts it.
func releaseTree(t *testing.T, work string) (tree, keys string) {
	t.Helper()
	tree = filepath.Join(work, "tree")
	blob := make([]byte, blobSize)
	rand.Read(blob)
	sum := sha256.Sum256(blob)
	blobPath := filepath.Join(tree, "os", "blobs", "sha256", hex.EncodeToString(sum[:]))
	os.MkdirAll(filepath.Dir(blobPath), 0o755)
	os.MkdirAll(filepath.Join(tree, "sysext"), 0o755)
	if err := os.WriteFile(blobPath, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tree, "sysext", "stratum-ovs_3.5.3.raw"), []byte("sysext image"), 0o644)
	keys = filepath.Join(work, "keys")
	rk := stratumtest.NewReleaseKey(t, keys)
	mustRun(t, "release", "sign", "--key", rk.Key, "--release", "0.2.0", "--upgrades-from", "0.1.0", tree)
	mustRun(t, "release", "verify", "--keys", keys, tree)
	// The verifying side holds public keys only.
	return tree, rk.CopyPub(t, filepath.Join(work, "pub"))
}

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// initFounder creates a cluster on release 0.2.0 with an OpenBao unseal
// key, trusts pubKeys and imports the tree.
func initFounder(t *testing.T, work, tree, pubKeys, unsealKey string) string {
	dir := filepath.Join(work, "founder")
	cfg := filepath.Join(work, "cluster.yaml")
	os.WriteFile(cfg, []byte("parentDomain: stratum.example.com\nregion: lab-1\nclusterRelease: 0.2.0\ndnsUpstreamServers: []\nsecrets:\n  openBaoUnsealKey: "+unsealKey+"\n"), 0o600)
	mustRun(t, "init", "--data", dir, "--config", cfg)
	copyFile(t, filepath.Join(pubKeys, "release.pub"), filepath.Join(dir, "release-keys", "release.pub"))
	out := mustRun(t, "release", "import", "--data", dir, tree)
	if !strings.Contains(out, "0.2.0") {
		t.Fatalf("import output does not name the release: %s", out)
	}
	return dir
}

// TestSelfUpgradeJoin: a joiner on 0.1.0 is told to upgrade, downloads the
// release from the founder through RELEASE_BUSY and a cut connection,
// runs its hook, re-registers on 0.2.0, is approved, persists its
// delivery with the unseal key sealed to its TPM, and exits 0.
func TestSelfUpgradeJoin(t *testing.T) {
	work := t.TempDir()
	tree, pub := releaseTree(t, work)
	unsealKey := "unseal-" + hex.EncodeToString(randomBytes(12))
	f := stratumtest.Serve(t, initFounder(t, work, tree, pub, unsealKey), "--release-concurrency", "1")
	sock := tpmtest.StartSwtpm(t)

	// Take the only release slot with a slow reader of our own.
	var tok struct{ Token string }
	f.Operator(t).Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": "control-plane", "uses": 2}, 201, &tok)
	holder := selfSignedClient(t, f.Pool, 32<<10)
	var reg struct {
		JoinID, State string
		Upgrade       *struct{ From, To, Source string }
	}
	post(t, holder, "https://"+f.Join+"/v1/join/registrations", map[string]any{"token": tok.Token, "release": "0.1.0", "selfUpgrade": true, "hostname": "holder", "mgmtIp": "192.0.2.99"}, 201, &reg)
	if reg.State != "needs-upgrade" || reg.Upgrade == nil || reg.Upgrade.To != "0.2.0" || reg.Upgrade.Source != "" {
		t.Fatalf("holder registration: %+v", reg)
	}
	blobPath := firstBlob(t, tree)
	resp, err := holder.Get("https://" + f.Join + "/v1/join/registrations/" + reg.JoinID + "/release/" + blobPath)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("holder read: %v %v", err, resp)
	}
	resp.Body.Read(make([]byte, 1))

	proxy := startCuttingProxy(t, f.Join, 20<<20)
	hook := filepath.Join(work, "hook.sh")
	hookOut := filepath.Join(work, "hook.out")
	os.WriteFile(hook, []byte("#!/bin/sh\nset -e\necho \"$2\" > "+hookOut+"\ncd \"$1\" && find . -type f | sort >> "+hookOut+"\n"), 0o755)
	state, root := filepath.Join(work, "state"), filepath.Join(work, "root")
	joiner := exec.Command(stratumtest.Binary(t), "join", "--founder", proxy.addr(), "--token", tok.Token, "--ca-pin", f.Pin,
		"--release", "0.1.0", "--self-upgrade", "--upgrade-hook", hook, "--release-keys", pub,
		"--state-dir", state, "--root", root, "--tpm", sock, "--hostname", "lab-2", "--mgmt-ip", "192.0.2.12")
	joiner.Env = stratumtest.Env()
	var jout bytes.Buffer
	joiner.Stdout, joiner.Stderr = &jout, &jout
	if err := joiner.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- joiner.Wait() }()

	// Hold the slot until the joiner has been refused at least once.
	waitFor(t, 30*time.Second, "a RELEASE_BUSY answer", func() bool { return metric(t, f, "stratum_release_busy_total") >= 1 })
	resp.Body.Close()

	// Approve once it re-registers on the cluster's release.
	var joinID string
	waitFor(t, 2*time.Minute, "the upgraded joiner to be pending\n"+jout.String(), func() bool {
		var list struct {
			Registrations []struct{ JoinID, State, Release, Hostname string }
		}
		f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations?state=pending", nil, 200, &list)
		for _, r := range list.Registrations {
			if r.Hostname == "lab-2" && r.Release == "0.2.0" {
				joinID = r.JoinID
				return true
			}
		}
		return false
	})
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+joinID+"/approve", map[string]any{}, 200, nil)

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("joiner: %v\n%s\nfounder:\n%s", err, jout.String(), f.Output())
		}
	case <-time.After(2 * time.Minute):
		joiner.Process.Kill()
		t.Fatalf("joiner did not finish:\n%s", jout.String())
	}
	out := jout.String()

	// The cut download resumed with a range rather than starting again.
	if !proxy.cut.Load() {
		t.Fatal("the proxy never cut a connection")
	}
	if got := proxy.toClient.Load(); got > blobSize*3/2 {
		t.Fatalf("%d bytes crossed the proxy for a %d-byte release: the cut download restarted", got, blobSize)
	}
	if !strings.Contains(out, "resuming") {
		t.Fatalf("the joiner did not say it resumed:\n%s", out)
	}
	// The hook saw the new release and only verified files.
	hookSaw, err := os.ReadFile(hookOut)
	if err != nil {
		t.Fatalf("hook did not run: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(hookSaw), "0.2.0\n") || !strings.Contains(string(hookSaw), blobPath) || strings.Contains(string(hookSaw), ".partial") {
		t.Fatalf("hook saw:\n%s", hookSaw)
	}

	var members struct {
		Members []struct{ NodeID, State, MgmtIP string }
	}
	f.Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
	if len(members.Members) != 2 || members.Members[1].State != "active" || members.Members[1].MgmtIP != "192.0.2.12" {
		t.Fatalf("members: %+v", members)
	}

	checkRoot(t, root, state, unsealKey)
	untrustedKey(t, f, work, hook)

	// The boot-time unseal service gets the key back from the same TPM,
	// and not once PCR 7 has changed.
	sealed := filepath.Join(root, "etc/stratum/secrets/openbao-unseal.tpm")
	got := mustRun(t, "tpm", "unseal", "--in", sealed, "--tpm", sock)
	if strings.TrimSpace(got) != unsealKey {
		t.Fatalf("tpm unseal printed %q", got)
	}
	extendPCR7(t, sock)
	if out, code := run(t, "tpm", "unseal", "--in", sealed, "--tpm", sock); code == 0 || !strings.Contains(out, "PCR") {
		t.Fatalf("unseal after a PCR 7 change: exit %d: %s", code, out)
	}
}

// checkRoot: every secret file is 0600 and the unseal key's bytes are in
// no file under the root or the state dir.
func checkRoot(t *testing.T, root, state, unsealKey string) {
	t.Helper()
	secretDir := filepath.Join(root, "etc/stratum/secrets")
	entries, err := os.ReadDir(secretDir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("secrets: %v", err)
	}
	for _, p := range []string{"etc/stratum/controlplane.env", "etc/stratum/axdnsd.env", "etc/stratum/bootstrap-credentials.txt", "etc/stratum/secrets/node.key", "etc/stratum/secrets/postgres-password", "etc/stratum/secrets/openbao-unseal.tpm"} {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	var bundle map[string]any
	raw, err := os.ReadFile(filepath.Join(root, "etc/stratum/bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &bundle)
	for _, k := range []string{"nodeKey", "postgresPassword", "adminPassword", "openBaoToken", "axdnsdEncryptionKey", "openBaoUnsealKey"} {
		if v, ok := bundle[k]; ok && v != "" {
			t.Errorf("bundle.json carries %s", k)
		}
	}
	for _, dir := range []string{root, state} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte(unsealKey)) {
				t.Errorf("the unseal key is in plaintext in %s", p)
			}
			return nil
		})
	}
}

func extendPCR7(t *testing.T, sock string) {
	tp, err := tpm.Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	digest := sha256.Sum256([]byte("firmware update"))
	_, err = tpm2.PCRExtend{
		PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(7), Auth: tpm2.PasswordAuth(nil)},
		Digests:   tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: digest[:]}}},
	}.Execute(tp)
	if err != nil {
		t.Fatal(err)
	}
}

func firstBlob(t *testing.T, tree string) string {
	matches, _ := filepath.Glob(filepath.Join(tree, "os", "blobs", "sha256", "*"))
	if len(matches) != 1 {
		t.Fatalf("blobs: %v", matches)
	}
	rel, _ := filepath.Rel(tree, matches[0])
	return rel
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metric reads one unlabelled counter from /metrics.
func metric(t *testing.T, f *stratumtest.Founder, name string) float64 {
	resp, err := f.Client.Get("https://" + f.API + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var x float64
			json.Unmarshal([]byte(v), &x)
			return x
		}
	}
	return -1
}

func post(t *testing.T, c *http.Client, url string, body any, want int, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(context.Background(), "POST", url, bytes.NewReader(b))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d, want %d: %s", url, resp.StatusCode, want, raw)
	}
	if out != nil {
		json.Unmarshal(raw, out)
	}
}

// untrustedKey: a joiner whose release keys do not include the signer
// refuses the manifest, names the key, and never runs its hook.
func untrustedKey(t *testing.T, f *stratumtest.Founder, work, hook string) {
	t.Helper()
	other := filepath.Join(work, "other-keys")
	os.MkdirAll(other, 0o700)
	mustRun(t, "release", "keygen", "--out", filepath.Join(other, "other"))
	os.Remove(filepath.Join(other, "other.key"))
	var tok struct{ Token string }
	f.Operator(t).Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": "worker"}, 201, &tok)
	marker := filepath.Join(work, "hook.out")
	os.Remove(marker)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, stratumtest.Binary(t), "join", "--founder", f.Join, "--token", tok.Token, "--ca-pin", f.Pin,
		"--release", "0.1.0", "--self-upgrade", "--upgrade-hook", hook, "--release-keys", other,
		"--state-dir", filepath.Join(work, "state2"), "--root", filepath.Join(work, "root2"), "--hostname", "lab-3", "--mgmt-ip", "192.0.2.13")
	cmd.Env = stratumtest.Env()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a manifest signed by an untrusted key was accepted:\n%s", out)
	}
	signer := keyIDOf(t, filepath.Join(work, "pub", "release.pub"))
	if !strings.Contains(string(out), signer) {
		t.Fatalf("the refusal does not name the signing key %s:\n%s", signer, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the hook ran on an unverified release")
	}
}

// keyIDOf is the release key id: SHA-256 of the raw ed25519 public key.
func keyIDOf(t *testing.T, pubFile string) string {
	raw, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := release.ParsePublicKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return release.KeyID(pub)
}
