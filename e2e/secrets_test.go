package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"stratum/internal/stratumtest"
	"stratum/tpm/tpmtest"
)

var (
	recoveryKeyLine = regexp.MustCompile(`recovery key:\s+(stratum-rk1-[A-Z2-7-]+)`)
	bannerPin       = regexp.MustCompile(`CA pin:\s+(sha256:[0-9a-f]{64})`)
	recoverHint     = regexp.MustCompile(`(?m)^\s+(stratum tpm recover .+)$`)
)

// dirDigest is every file under dir with its mode and content hash.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + info.Mode().String())
		if info.Mode().IsRegular() {
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(c)
			b.WriteString(" " + hex.EncodeToString(sum[:]))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// refusedServe runs a serve that must fail at start.
func refusedServe(t *testing.T, dir string, extra ...string) result {
	t.Helper()
	r := stratum(t, append([]string{"serve", "--data", dir, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0"}, extra...)...)
	if r.code == 0 {
		t.Fatalf("serve %v started: %s", extra, r.stdout)
	}
	return r
}

// bannerPinOf is the CA pin the founder's banner shows (printed just after the
// listeners startFounder waits for).
func bannerPinOf(t testing.TB, f *stratumtest.Founder) string {
	t.Helper()
	if m := bannerPin.FindStringSubmatch(f.Stdout()); m != nil {
		return m[1]
	}
	t.Fatalf("no CA pin in the banner: %s", f.Stdout())
	return ""
}

func stopOK(t testing.TB, f *stratumtest.Founder) {
	t.Helper()
	if code, _ := f.Stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("founder exit %d: %s", code, f.Stderr())
	}
}

// A founder whose data key lives in its TPM: init, restart, a PCR 7
// change refused with the exact recovery command (which works), recovery
// onto a second TPM.
func TestTPMSealedFounder(t *testing.T) {
	t.Parallel()
	tpmA, tpmB := tpmtest.StartSwtpm(t), tpmtest.StartSwtpm(t)
	dir := filepath.Join(t.TempDir(), "data")

	r := stratum(t, "init", "--data", dir, "--parent-domain", "lab.example.com", "--region", "lab-1", "--tpm", tpmA)
	if r.code != 0 {
		t.Fatalf("init --tpm = %d %q", r.code, r.stderr)
	}
	m := recoveryKeyLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("init --tpm printed no recovery key: %q", r.stdout)
	}
	rk := m[1]
	pin := bannerPin.FindStringSubmatch(r.stdout)[1]
	if _, err := os.Stat(filepath.Join(dir, "data.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("init --tpm wrote a plain data.key")
	}
	for _, name := range []string{"data.key.tpm", "data.key.recovery"} {
		if mode := fileMode(t, filepath.Join(dir, name)); mode != 0o600 {
			t.Errorf("%s mode %v", name, mode)
		}
	}
	rkBody := strings.TrimPrefix(rk, "stratum-rk1-")
	if strings.Contains(dirDigest(t, dir), rkBody) {
		t.Fatal("the recovery key is in a file name")
	}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, _ error) error {
		if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(rkBody)) || bytes.Contains(b, []byte(strings.ReplaceAll(rkBody, "-", "")))) {
			t.Errorf("%s holds the recovery key", p)
		}
		return nil
	})

	// Two restarts: the key comes out of the TPM each time.
	for range 2 {
		f := stratumtest.ServeDev(t, dir, "--tpm", tpmA)
		if bannerPinOf(t, f) != pin {
			t.Fatalf("serving CA pin %s, want %s", bannerPinOf(t, f), pin)
		}
		stopOK(t, f)
		if strings.Contains(f.Stdout()+f.Stderr(), rkBody) {
			t.Fatal("the founder printed the recovery key")
		}
	}

	// Secure Boot changed: the start is refused, naming PCR 7 and the
	// command, and the directory is as it was.
	tpmtest.ExtendSocketPCR(t, tpmA, 7)
	before := dirDigest(t, dir)
	r = refusedServe(t, dir, "--tpm", tpmA)
	for _, want := range []string{"PCR 7", "Nothing was changed on disk"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal lacks %q: %s", want, r.stderr)
		}
	}
	hint := recoverHint.FindStringSubmatch(r.stderr)
	if hint == nil {
		t.Fatalf("no recovery command in %q", r.stderr)
	}
	if dirDigest(t, dir) != before {
		t.Fatal("a refused start changed the data directory")
	}

	// Bad input to recover: each refused, nothing changed.
	other := strings.Replace(rk, rkBody[:4], "AAAA", 1)
	for name, tc := range map[string]struct {
		key  string // on stdin
		args []string
	}{
		"mistyped key":   {other, []string{"--tpm", tpmA}},
		"not a key":      {"hunter2", []string{"--tpm", tpmA}},
		"missing socket": {rk, []string{"--tpm", filepath.Join(t.TempDir(), "gone.sock")}},
	} {
		r := stratumIn(t, tc.key+"\n", append([]string{"tpm", "recover", "--data", dir, "--recovery-key", "-"}, tc.args...)...)
		if r.code == 0 {
			t.Fatalf("recover with %s succeeded", name)
		}
		if strings.Contains(r.stderr, rkBody[5:]) {
			t.Fatalf("recover with %s: the error shows the key: %s", name, r.stderr)
		}
		if dirDigest(t, dir) != before {
			t.Fatalf("recover with %s changed the directory", name)
		}
	}

	// The printed command, exactly, with the key on stdin.
	args := strings.Fields(hint[1])
	if args[0] != "stratum" {
		t.Fatalf("hint %q", hint[1])
	}
	if r := stratumIn(t, rk+"\n", args[1:]...); r.code != 0 {
		t.Fatalf("the printed recovery command = %d %q", r.code, r.stderr)
	}
	f := stratumtest.ServeDev(t, dir, "--tpm", tpmA)
	if bannerPinOf(t, f) != pin {
		t.Fatalf("CA pin after recovery %s, want %s", bannerPinOf(t, f), pin)
	}
	stopOK(t, f)

	// New hardware: reseal onto another TPM under PCRs 7 and 11.
	if r := stratumIn(t, rk, "tpm", "recover", "--data", dir, "--tpm", tpmB, "--tpm-pcrs", "7,11", "--recovery-key", "-"); r.code != 0 {
		t.Fatalf("recover onto a second TPM = %d %q", r.code, r.stderr)
	}
	f = stratumtest.ServeDev(t, dir, "--tpm", tpmB)
	if bannerPinOf(t, f) != pin {
		t.Fatalf("CA pin on the second TPM %s, want %s", bannerPinOf(t, f), pin)
	}
	stopOK(t, f)
	if r := refusedServe(t, dir, "--tpm", tpmA); !strings.Contains(r.stderr, "different TPM") {
		t.Errorf("the old TPM: %s", r.stderr)
	}
	if r := refusedServe(t, dir, "--tpm", filepath.Join(t.TempDir(), "gone.sock")); !strings.Contains(r.stderr, "no TPM") || !strings.Contains(r.stderr, "--to-file") {
		t.Errorf("a missing TPM socket: %s", r.stderr)
	}
}

// ageIdentity writes a new age identity file and returns it with its
// public key.
func ageIdentity(t *testing.T) (file, recipient string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "identity.txt")
	if err := os.WriteFile(file, []byte("# operator\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, id.Recipient().String()
}

// A file-key founder backs up encrypted while serving, moves its key into
// the TPM, and its backup restores onto a fresh directory that serves the
// same CA with nothing but an operator's identity.
func TestConvertAndEncryptedBackups(t *testing.T) {
	t.Parallel()
	tpmA, tpmB := tpmtest.StartSwtpm(t), tpmtest.StartSwtpm(t)
	tmp := t.TempDir()
	dirA := filepath.Join(tmp, "a")
	f := stratumtest.ServeDev(t, dirA)
	pin := bannerPinOf(t, f)
	email, password := credentials(t, dirA)
	tok, status, err := createToken(f, f.Login(t, email, password).Token, "before-backup")
	if err != nil || status != 201 {
		t.Fatalf("create token: %d %v", status, err)
	}
	alice, aliceKey := ageIdentity(t)
	bob, bobKey := ageIdentity(t)
	mallory, _ := ageIdentity(t)
	recipients := filepath.Join(tmp, "recipients.txt")
	os.WriteFile(recipients, []byte("# the operators\n"+bobKey+"\n"), 0o644)

	withKey := filepath.Join(tmp, "with-key.age")
	r := stratum(t, "backup", "--data", dirA, "--out", withKey, "--recipient", aliceKey, "--recipients-file", recipients, "--include-data-key")
	if r.code != 0 || !strings.Contains(r.stdout, "running founder") {
		t.Fatalf("live encrypted backup = %d %q %q", r.code, r.stdout, r.stderr)
	}
	raw, err := os.ReadFile(withKey)
	if err != nil || !bytes.HasPrefix(raw, []byte("age-encryption.org/v1\n")) {
		t.Fatalf("the backup is not an age file: %v %q", err, raw[:min(len(raw), 40)])
	}
	if fileMode(t, withKey) != 0o600 {
		t.Error("backup mode is not 0600")
	}
	noRecipient := filepath.Join(tmp, "refused.age")
	if r := stratum(t, "backup", "--data", dirA, "--out", noRecipient, "--include-data-key"); r.code == 0 || !strings.Contains(r.stderr, "--recipient") {
		t.Fatalf("--include-data-key without a recipient = %d %q", r.code, r.stderr)
	}
	if r := stratum(t, "backup", "--data", dirA, "--out", noRecipient, "--recipient", "age1notakey"); r.code == 0 {
		t.Fatal("a malformed recipient was accepted")
	}
	if _, err := os.Stat(noRecipient); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused backup wrote its file")
	}
	stopOK(t, f)

	// The file-key founder moves its key into the TPM.
	r = stratum(t, "tpm", "convert", "--data", dirA, "--tpm", tpmA)
	if r.code != 0 || recoveryKeyLine.FindStringSubmatch(r.stdout) == nil {
		t.Fatalf("convert = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dirA, "data.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("convert left data.key")
	}
	f = stratumtest.ServeDev(t, dirA, "--tpm", tpmA)
	if bannerPinOf(t, f) != pin || !tokenIDs(t, f, f.Login(t, email, password).Token)[tok.ID] {
		t.Fatal("the converted founder does not serve its store")
	}
	stopOK(t, f)

	// Restores that must be refused, leaving no directory behind.
	tampered := filepath.Join(tmp, "tampered.age")
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)-100] ^= 0x01
	os.WriteFile(tampered, flipped, 0o600)
	truncated := filepath.Join(tmp, "truncated.age")
	os.WriteFile(truncated, raw[:len(raw)*2/3], 0o600)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no identity":    {[]string{"--in", withKey}, "--identity"},
		"wrong identity": {[]string{"--in", withKey, "--identity", mallory}, "none of the given identities"},
		"tampered":       {[]string{"--in", tampered, "--identity", alice}, "tampered"},
		"truncated":      {[]string{"--in", truncated, "--identity", alice}, "truncated"},
		"missing TPM":    {[]string{"--in", withKey, "--identity", alice, "--ca-pin", pin, "--tpm", filepath.Join(tmp, "gone.sock")}, "no TPM"},
		"no pin":         {[]string{"--in", withKey, "--identity", alice}, "--ca-pin " + pin},
	} {
		dir := filepath.Join(tmp, "refused-"+strings.ReplaceAll(name, " ", "-"))
		r := stratum(t, append([]string{"restore", "--data", dir}, tc.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("restore, %s = %d %q; want an error naming %q", name, r.code, r.stderr, tc.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("restore, %s: left %s behind", name, dir)
		}
	}

	// New hardware with nothing but the backup and Bob's identity.
	dirB := filepath.Join(tmp, "b")
	r = stratum(t, "restore", "--data", dirB, "--in", withKey, "--identity", bob, "--ca-pin", pin)
	if r.code != 0 || !strings.Contains(r.stdout, pin) {
		t.Fatalf("restore with the data key = %d %q %q", r.code, r.stdout, r.stderr)
	}
	fB := stratumtest.ServeDev(t, dirB)
	if bannerPinOf(t, fB) != pin {
		t.Fatalf("the restored founder serves CA pin %s, want %s", bannerPinOf(t, fB), pin)
	}
	// The original CA certificate.
	if err := fB.UseCA(filepath.Join(dirA, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	if !tokenIDs(t, fB, fB.Login(t, email, password).Token)[tok.ID] {
		t.Error("a token created before the backup is missing from the restore")
	}
	stopOK(t, fB)

	// An offline backup of the sealed founder carries its key too, and
	// restores sealed to another TPM.
	offline := filepath.Join(tmp, "offline.age")
	if r := stratum(t, "backup", "--data", dirA, "--tpm", tpmA, "--out", offline, "--recipient", aliceKey, "--include-data-key"); r.code != 0 {
		t.Fatalf("offline backup with the sealed key = %d %q", r.code, r.stderr)
	}
	dirC := filepath.Join(tmp, "c")
	r = stratum(t, "restore", "--data", dirC, "--in", offline, "--identity", alice, "--tpm", tpmB, "--new-cluster")
	if r.code != 0 || recoveryKeyLine.FindStringSubmatch(r.stdout) == nil {
		t.Fatalf("restore sealed to a TPM = %d %q %q", r.code, r.stdout, r.stderr)
	}
	fC := stratumtest.ServeDev(t, dirC, "--tpm", tpmB)
	if bannerPinOf(t, fC) != pin {
		t.Fatalf("CA pin %s, want %s", bannerPinOf(t, fC), pin)
	}
	stopOK(t, fC)
}
