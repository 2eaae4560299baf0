package founder

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"stratum/backup"
	"stratum/cluster"
	"stratum/internal/stratumtest"
	"stratum/store"
	"stratum/tpm/tpmtest"
)

// identityFile writes a new age identity and returns its file and public
// key.
func identityFile(t *testing.T) (string, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "identity.txt")
	if err := os.WriteFile(p, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, id.Recipient().String()
}

func TestBackupRestore(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	src := DataDir(filepath.Join(t.TempDir(), "src"))
	res, err := Init(src, cluster.DevDefaults(), true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	alice, aliceKey := identityFile(t)
	mallory, _ := identityFile(t)
	out := t.TempDir()
	snap := func(name string, req BackupRequest) string {
		t.Helper()
		p := filepath.Join(out, name)
		if _, err := BackupStopped(src, KeySource{}, req, p); err != nil {
			t.Fatalf("backup %s: %v", name, err)
		}
		return p
	}
	plain := snap("plain.zst", BackupRequest{})
	encrypted := snap("enc.age", BackupRequest{Recipients: []string{aliceKey}})
	withKey := snap("key.age", BackupRequest{Recipients: []string{aliceKey}, IncludeDataKey: true})
	raw, _ := os.ReadFile(withKey)
	tampered := filepath.Join(out, "tampered.age")
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)/2] ^= 0x20
	os.WriteFile(tampered, flipped, 0o600)
	truncated := filepath.Join(out, "truncated.age")
	os.WriteFile(truncated, raw[:len(raw)-40], 0o600)

	t.Run("data key without recipients refused", func(t *testing.T) {
		p := filepath.Join(out, "refused.zst")
		_, err := BackupStopped(src, KeySource{}, BackupRequest{IncludeDataKey: true}, p)
		if !errors.Is(err, backup.ErrDataKeyNeedsRecipients) {
			t.Fatalf("backup = %v", err)
		}
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatal("a refused backup wrote its file")
		}
	})

	refusals := []struct {
		name string
		req  RestoreRequest
		want error
	}{
		{"encrypted, no identity", RestoreRequest{In: encrypted}, backup.ErrNeedIdentity},
		{"encrypted, wrong identity", RestoreRequest{In: withKey, Identities: []string{mallory}}, backup.ErrWrongIdentity},
		{"plain, with an identity", RestoreRequest{In: plain, Identities: []string{alice}}, backup.ErrNotEncrypted},
		{"tampered", RestoreRequest{In: tampered, Identities: []string{alice}}, backup.ErrDamaged},
		{"truncated", RestoreRequest{In: truncated, Identities: []string{alice}}, backup.ErrDamaged},
		{"TPM socket missing", RestoreRequest{In: withKey, Identities: []string{alice}, CAPin: res.CAPin, Keys: KeySource{TPM: filepath.Join(out, "gone.sock")}}, nil},
		{"--tpm, but no key carried", RestoreRequest{In: encrypted, Identities: []string{alice}, Keys: KeySource{TPM: sock}}, nil},
		{"plain, no key in the directory", RestoreRequest{In: plain, CAPin: res.CAPin}, nil},
		{"no pin to compare with", RestoreRequest{In: withKey, Identities: []string{alice}}, nil},
		{"another cluster's pin", RestoreRequest{In: withKey, Identities: []string{alice}, CAPin: "sha256:" + strings.Repeat("ab", 32)}, nil},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			d := DataDir(filepath.Join(t.TempDir(), "fresh"))
			_, err := Restore(d, tt.req)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Restore = %v, want %v", err, tt.want)
			}
			if _, err := os.Stat(string(d)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatal("a refused restore created the directory")
			}
		})
	}

	t.Run("carried key refused over an existing key", func(t *testing.T) {
		d := DataDir(t.TempDir())
		os.WriteFile(d.DataKey(), []byte("another key"), 0o600)
		before := dirState(t, string(d))
		if _, err := Restore(d, RestoreRequest{In: withKey, Identities: []string{alice}}); err == nil || !strings.Contains(err.Error(), "data.key exists") {
			t.Fatalf("Restore = %v", err)
		}
		assertUnchanged(t, string(d), before)
	})

	restores := []struct {
		name    string
		req     RestoreRequest
		dataKey bool
		ks      KeySource // to open the result
	}{
		{"plain", RestoreRequest{In: plain, CAPin: res.CAPin}, false, KeySource{}},
		{"encrypted", RestoreRequest{In: encrypted, Identities: []string{mallory, alice}, CAPin: res.CAPin}, false, KeySource{}},
		{"with the data key", RestoreRequest{In: withKey, Identities: []string{alice}, NewCluster: true}, true, KeySource{}},
		{"with the data key, sealed", RestoreRequest{In: withKey, Identities: []string{alice}, CAPin: res.CAPin, Keys: KeySource{TPM: sock}}, true, KeySource{TPM: sock}},
	}
	for _, tt := range restores {
		t.Run(tt.name, func(t *testing.T) {
			d := DataDir(filepath.Join(t.TempDir(), "fresh"))
			if !tt.dataKey {
				// The operator brings the original key first: it checks
				// the backup's MAC.
				os.MkdirAll(string(d), 0o700)
				b, _ := os.ReadFile(src.DataKey())
				os.WriteFile(d.DataKey(), b, 0o600)
			}
			got, err := Restore(d, tt.req)
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if got.DataKey != tt.dataKey {
				t.Fatalf("DataKey = %v", got.DataKey)
			}
			if got.CAPin != res.CAPin || got.ClusterID != res.Identity.ClusterID {
				t.Fatalf("restored CA pin %s, want %s", got.CAPin, res.CAPin)
			}
			if (got.RecoveryKey != nil) != (tt.ks.TPM != "") {
				t.Fatalf("recovery key %v with TPM %q", got.RecoveryKey, tt.ks.TPM)
			}
			if pin := caPinOf(t, d, tt.ks); pin != res.CAPin {
				t.Fatalf("CA pin %s, want %s", pin, res.CAPin)
			}
			if m := restoreMarkOf(t, d, tt.ks); m == nil || m.TakenOverAt != nil || m.Backup != filepath.Base(tt.req.In) {
				t.Fatalf("the restored store's mark is %+v: its founder would not start isolated", m)
			}
			if _, err := Restore(d, tt.req); err == nil || !strings.Contains(err.Error(), "exists") {
				t.Fatalf("a second restore into the same directory = %v", err)
			}
		})
	}
}

// The control socket takes the same request as the CLI, strictly: a
// request that would leak the key or that it does not understand gets a
// 400 and no snapshot.
func TestControlBackupRequests(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	_, aliceKey := identityFile(t)
	sock := DataDir(f.Dir).ControlSocket()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	tests := []struct {
		name, body string
		status     int
		prefix     string // of a 200 answer
	}{
		{"plain", `{}`, 200, "stratum-backup v2\n"},
		{"encrypted with the key", `{"recipients":["` + aliceKey + `"],"includeDataKey":true}`, 200, "age-encryption.org/v1\n"},
		{"key without recipients", `{"includeDataKey":true}`, 400, ""},
		{"bad recipient", `{"recipients":["age1nope"]}`, 400, ""},
		{"unknown field", `{"recipient":"` + aliceKey + `"}`, 400, ""},
		{"empty body", ``, 400, ""},
		{"GET", "", 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if tt.name == "GET" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, "http://founder/backup", strings.NewReader(tt.body))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.status == 200 && (!strings.HasPrefix(string(body), tt.prefix) || resp.Trailer.Get("X-Backup-Error") != "") {
				t.Fatalf("answer starts %q, trailer %q", body[:min(len(body), 24)], resp.Trailer.Get("X-Backup-Error"))
			}
			if tt.status != 200 && len(body) > 1024 {
				t.Fatalf("a refusal streamed %d bytes", len(body))
			}
		})
	}
}

// restoreMarkOf is the restore mark of d's store (nil: never restored).
func restoreMarkOf(t *testing.T, d DataDir, ks KeySource) *cluster.RestoreMark {
	t.Helper()
	db, err := d.OpenStore(ks)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer db.Close()
	var id cluster.Identity
	if err := db.View(func(tx *store.Tx) error { id, err = cluster.LoadIdentity(tx); return err }); err != nil {
		t.Fatal(err)
	}
	return id.Restored
}
