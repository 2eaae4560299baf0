package founder

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"stratum/cluster"
	"stratum/crypto"
	"stratum/internal/stratumtest"
	"stratum/store"
	"stratum/tpm"
	"stratum/tpm/tpmtest"
)

// dirState is every file under a directory with its mode and content
// hash, to prove a refused operation changed nothing.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return fs.SkipAll
		}
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			v += " " + hex.EncodeToString(sum[:])
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertUnchanged(t *testing.T, dir string, before map[string]string) {
	t.Helper()
	after := dirState(t, dir)
	if len(after) != len(before) {
		t.Fatalf("the directory changed: %d entries before, %d after", len(before), len(after))
	}
	for p, v := range before {
		if after[p] != v {
			t.Fatalf("%s changed", p)
		}
	}
}

// initSealed creates a cluster whose data key is sealed to the swtpm at
// sock and returns the directory and its recovery key.
func initSealed(t *testing.T, sock string, pcrs []int) (DataDir, *crypto.RecoveryKey, string) {
	t.Helper()
	d := DataDir(filepath.Join(t.TempDir(), "data"))
	res, err := InitWithKey(d, cluster.DevDefaults(), true, KeySource{TPM: sock, PCRs: pcrs}, "", time.Now())
	if err != nil {
		t.Fatalf("init with a TPM: %v", err)
	}
	if res.RecoveryKey == nil {
		t.Fatal("init with a TPM printed no recovery key")
	}
	return d, res.RecoveryKey, res.CAPin
}

// caPinOf opens the store with the key ks finds and returns its CA pin:
// the proof that the key is the store's.
func caPinOf(t *testing.T, d DataDir, ks KeySource) string {
	t.Helper()
	db, err := d.OpenStore(ks)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer db.Close()
	var pin string
	if err := db.View(func(tx *store.Tx) error {
		ca, err := cluster.LoadCA(tx)
		if err == nil {
			pin = ca.Pin()
		}
		return err
	}); err != nil {
		t.Fatalf("load CA: %v", err)
	}
	return pin
}

func TestInitWithTPM(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	d, rk, pin := initSealed(t, sock, []int{7, 11})
	if _, err := os.Stat(d.DataKey()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("init with a TPM wrote a plain %s", d.DataKey())
	}
	for _, p := range []string{d.DataKeyTPM(), d.DataKeyRecovery()} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", p, err, st.Mode())
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(strings.ToUpper(string(b)), strings.TrimPrefix(rk.Reveal(), "stratum-rk1-")[:20]) {
			t.Fatalf("%s holds the recovery key", p)
		}
	}
	if pcrs, err := tpm.SealedPCRs(d.DataKeyTPM()); err != nil || len(pcrs) != 2 || pcrs[1] != 11 {
		t.Fatalf("sealed to %v, %v; want 7,11", pcrs, err)
	}
	// A restart: the key comes from the TPM, given by path or implied.
	if got := caPinOf(t, d, KeySource{TPM: sock}); got != pin {
		t.Fatalf("CA pin after restart %s, want %s", got, pin)
	}
}

func TestInitWithoutTPMLeavesNothing(t *testing.T) {
	d := DataDir(filepath.Join(t.TempDir(), "data"))
	_, err := InitWithKey(d, cluster.DevDefaults(), true, KeySource{TPM: filepath.Join(t.TempDir(), "no.sock")}, "", time.Now())
	if !errors.Is(err, tpm.ErrNoTPM) {
		t.Fatalf("init without a TPM = %v, want ErrNoTPM", err)
	}
	if _, err := os.Stat(string(d)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused init created the data directory")
	}
}

func TestPCRChangeRefusedWithRecoveryCommand(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	d, _, _ := initSealed(t, sock, nil)
	before := dirState(t, string(d))
	tpmtest.ExtendSocketPCR(t, sock, 7)

	_, err := d.LoadDataKey(KeySource{TPM: sock})
	if !errors.Is(err, tpm.ErrPolicyMismatch) {
		t.Fatalf("LoadDataKey after a PCR 7 change = %v, want ErrPolicyMismatch", err)
	}
	abs, _ := filepath.Abs(string(d))
	for _, want := range []string{"PCR 7", "Nothing was changed", "stratum tpm recover --data " + abs + " --tpm " + sock + " --tpm-pcrs 7 --recovery-key -"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%v", want, err)
		}
	}
	assertUnchanged(t, string(d), before)
}

func TestRecover(t *testing.T) {
	first, second := tpmtest.StartSwtpm(t), tpmtest.StartSwtpm(t)
	other, _ := crypto.NewRecoveryKey()
	tests := []struct {
		name    string
		key     func(rk *crypto.RecoveryKey) string
		opts    RecoverOptions
		wantErr error
		// check runs after a successful recovery.
		check func(t *testing.T, d DataDir, pin string)
	}{
		{name: "another recovery key", key: func(*crypto.RecoveryKey) string { return other.Reveal() }, opts: RecoverOptions{Keys: KeySource{TPM: second}}, wantErr: crypto.ErrWrongRecoveryKey},
		{name: "mistyped", key: func(rk *crypto.RecoveryKey) string { return mistype(rk.Reveal()) }, opts: RecoverOptions{Keys: KeySource{TPM: second}}, wantErr: crypto.ErrRecoveryKeyTypo},
		{name: "not a key", key: func(*crypto.RecoveryKey) string { return "hunter2" }, opts: RecoverOptions{ToFile: true}, wantErr: crypto.ErrRecoveryKeyFormat},
		{name: "TPM socket missing", key: (*crypto.RecoveryKey).Reveal, opts: RecoverOptions{Keys: KeySource{TPM: filepath.Join(t.TempDir(), "gone.sock")}}, wantErr: tpm.ErrNoTPM},
		{name: "onto a second TPM, PCRs 7,11", key: (*crypto.RecoveryKey).Reveal, opts: RecoverOptions{Keys: KeySource{TPM: second, PCRs: []int{7, 11}}},
			check: func(t *testing.T, d DataDir, pin string) {
				if got := caPinOf(t, d, KeySource{TPM: second}); got != pin {
					t.Fatalf("CA pin %s, want %s", got, pin)
				}
				if _, err := d.LoadDataKey(KeySource{TPM: first}); !errors.Is(err, tpm.ErrWrongTPM) {
					t.Fatalf("the first TPM still opens the resealed key: %v", err)
				}
			}},
		{name: "back to a file", key: (*crypto.RecoveryKey).Reveal, opts: RecoverOptions{ToFile: true},
			check: func(t *testing.T, d DataDir, pin string) {
				if got := caPinOf(t, d, KeySource{}); got != pin {
					t.Fatalf("CA pin %s, want %s", got, pin)
				}
				for _, p := range []string{d.DataKeyTPM(), d.DataKeyRecovery()} {
					if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("%s is left after --to-file", p)
					}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rk, pin := initSealed(t, first, nil)
			tpmtest.ExtendSocketPCR(t, first, 7)
			before := dirState(t, string(d))
			o := tt.opts
			o.RecoveryKey = tt.key(rk)
			err := d.Recover(o)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Recover = %v, want %v", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), strings.TrimPrefix(rk.Reveal(), "stratum-rk1-")[:10]) {
					t.Fatal("the error shows the recovery key")
				}
				assertUnchanged(t, string(d), before)
				return
			}
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			tt.check(t, d, pin)
		})
	}
}

// mistype changes one character of a printed recovery key.
func mistype(s string) string {
	b := []byte(s)
	i := len("stratum-rk1-") + 1
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// The PCRs recovered to are the ones asked for, at their values now: the
// same TPM opens the key again after the recovery.
func TestRecoverAfterPCRChangeOnTheSameTPM(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	d, rk, pin := initSealed(t, sock, nil)
	tpmtest.ExtendSocketPCR(t, sock, 7)
	if err := d.Recover(RecoverOptions{RecoveryKey: rk.Reveal(), Keys: KeySource{TPM: sock}}); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if got := caPinOf(t, d, KeySource{TPM: sock}); got != pin {
		t.Fatalf("CA pin %s, want %s", got, pin)
	}
	// The recovery key still works for the next time.
	tpmtest.ExtendSocketPCR(t, sock, 7)
	if err := d.Recover(RecoverOptions{RecoveryKey: rk.Reveal(), Keys: KeySource{TPM: sock}}); err != nil {
		t.Fatalf("second Recover: %v", err)
	}
}

func TestConvert(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	d := DataDir(filepath.Join(t.TempDir(), "data"))
	res, err := Init(d, cluster.DevDefaults(), true, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	// No TPM: refused, data.key untouched, nothing sealed left behind.
	before := dirState(t, string(d))
	if _, err := d.ConvertToTPM(KeySource{TPM: filepath.Join(t.TempDir(), "gone.sock")}); !errors.Is(err, tpm.ErrNoTPM) {
		t.Fatalf("convert without a TPM = %v", err)
	}
	assertUnchanged(t, string(d), before)

	rk, err := d.ConvertToTPM(KeySource{TPM: sock})
	if err != nil || rk == nil {
		t.Fatalf("convert: %v", err)
	}
	if _, err := os.Stat(d.DataKey()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("convert left data.key")
	}
	if got := caPinOf(t, d, KeySource{TPM: sock}); got != res.CAPin {
		t.Fatalf("CA pin %s, want %s", got, res.CAPin)
	}
	if _, err := d.ConvertToTPM(KeySource{TPM: sock}); err == nil || !strings.Contains(err.Error(), "already sealed") {
		t.Fatalf("a second convert = %v", err)
	}
	// The new recovery key opens the key.
	if err := d.Recover(RecoverOptions{RecoveryKey: rk.Reveal(), ToFile: true}); err != nil {
		t.Fatalf("recover with the key convert printed: %v", err)
	}
	if got := caPinOf(t, d, KeySource{}); got != res.CAPin {
		t.Fatalf("CA pin %s, want %s", got, res.CAPin)
	}
}

func TestLoadDataKeyStates(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	sealed, _, _ := initSealed(t, sock, nil)
	plain := DataDir(filepath.Join(t.TempDir(), "plain"))
	if _, err := Init(plain, cluster.DevDefaults(), true, time.Now()); err != nil {
		t.Fatal(err)
	}
	both := DataDir(filepath.Join(t.TempDir(), "both"))
	if err := os.MkdirAll(string(both), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{both.DataKey(), both.DataKeyTPM()} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		d    DataDir
		ks   KeySource
		want string
	}{
		{"sealed, TPM gone", sealed, KeySource{TPM: filepath.Join(t.TempDir(), "gone.sock")}, "--to-file"},
		{"plain, started with --tpm", plain, KeySource{TPM: sock}, "stratum tpm convert"},
		{"both forms", both, KeySource{}, "interrupted"},
		{"no key at all", DataDir(t.TempDir()), KeySource{}, "no data key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := dirState(t, string(tt.d))
			_, err := tt.d.LoadDataKey(tt.ks)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadDataKey = %v, want an error naming %q", err, tt.want)
			}
			assertUnchanged(t, string(tt.d), before)
		})
	}
}

// `serve --dev --tpm` on an empty directory seals the new key and shows
// the recovery key on the operator's output, not in the log.
func TestServeDevInitWithTPM(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	var out, logs strings.Builder
	var shown string
	// Registered first, so it runs after the founder has shut down.
	t.Cleanup(func() {
		if shown != "" && strings.Contains(logs.String(), shown) {
			t.Error("the recovery key reached the log")
		}
	})
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true, Serve: serveIn(func(o *Options) {
		o.Keys = KeySource{TPM: sock}
		o.Out = &out
		o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})})
	m := regexp.MustCompile(`recovery key:\s+(stratum-rk1-\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no recovery key in the output: %q", out.String())
	}
	shown = m[1][len("stratum-rk1-"):]
	if _, err := os.Stat(DataDir(f.Dir).DataKey()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("serve --dev --tpm wrote a plain data.key")
	}
}

// TestTrust16_10_ConvertChecksTheStore: a data.key that is not the
// store's (copied from another founder) is not sealed in place of the
// right one: convert refuses and leaves data.key and the directory as
// they were (second build: data.key removed, the store lost).
func TestTrust16_10_ConvertChecksTheStore(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	d := DataDir(filepath.Join(t.TempDir(), "data"))
	if _, err := Init(d, cluster.DevDefaults(), true, time.Now()); err != nil {
		t.Fatal(err)
	}
	other := DataDir(filepath.Join(t.TempDir(), "other"))
	if _, err := Init(other, cluster.DevDefaults(), true, time.Now()); err != nil {
		t.Fatal(err)
	}
	wrong, err := os.ReadFile(other.DataKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.DataKey(), wrong, 0o600); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, string(d))
	if _, err := d.ConvertToTPM(KeySource{TPM: sock}); err == nil || !strings.Contains(err.Error(), "does not open the store") {
		t.Fatalf("convert with another founder's data.key = %v", err)
	}
	assertUnchanged(t, string(d), before)
}
