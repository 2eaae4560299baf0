package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	bolt "go.etcd.io/bbolt"

	"stratum/backup"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/internal/stratumtest"
	"stratum/store"
)

// forgedBackup writes a backup file of the store file at storePath as
// anyone with the format can: MACs under macKey, carrying carry (if any),
// encrypted to recipient (when set) and naming the cluster and pin given.
func forgedBackup(t *testing.T, out, storePath string, macKey, carry *crypto.DataKey, recipient, clusterID, pin string) {
	t.Helper()
	db, err := os.ReadFile(storePath)
	if err != nil {
		t.Fatal(err)
	}
	o := backup.Options{MACKey: macKey, DataKey: carry}
	if recipient != "" {
		r, err := age.ParseX25519Recipient(recipient)
		if err != nil {
			t.Fatal(err)
		}
		o.Recipients = []age.Recipient{r}
	}
	var buf bytes.Buffer
	m := backup.Meta{ClusterID: clusterID, CAPin: pin, StoreBytes: int64(len(db)), Bytes: int64(len(db)), Files: 1}
	if _, err := backup.Write(&buf, o, m, func(a *backup.Archive) error {
		return a.Add(backup.StoreEntry, int64(len(db)), func(w io.Writer) error { _, err := w.Write(db); return err })
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// bombBackup writes an encrypted backup whose authentic header (MAC'd
// under the key it carries) announces a 64 KiB store, and whose body is
// a zstd stream that expands to 2 GiB.
func bombBackup(t *testing.T, out string, key *crypto.DataKey, identityFile, recipient string) {
	t.Helper()
	small := filepath.Join(t.TempDir(), "small.db")
	os.WriteFile(small, make([]byte, 64<<10), 0o600)
	legit := filepath.Join(t.TempDir(), "legit.age")
	forgedBackup(t, legit, small, key, key, recipient, "cl-bomb", "sha256:"+strings.Repeat("0", 64))
	ids, err := backup.LoadIdentities([]string{identityFile})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(legit)
	plain, err := age.Decrypt(bytes.NewReader(raw), ids...)
	if err != nil {
		t.Fatal(err)
	}
	pt, _ := io.ReadAll(plain)
	hdr := pt[:bytes.Index(pt, []byte("\n\n"))+2]

	// A tar entry for the store of 2 GiB of zeros, as one zstd frame: the
	// tar header in a raw block, then 16384 RLE blocks of 128 KiB.
	var th bytes.Buffer
	tw := tar.NewWriter(&th)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: backup.StoreEntry, Size: 2 << 30, Mode: 0o600})
	tw.Flush()
	block := func(typ, size uint32, last bool) []byte {
		v := size<<3 | typ<<1
		if last {
			v |= 1
		}
		return []byte{byte(v), byte(v >> 8), byte(v >> 16)}
	}
	var bomb bytes.Buffer
	bomb.Write([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38}) // magic, no content size, 128 KiB window
	bomb.Write(block(0, uint32(th.Len()), false))
	bomb.Write(th.Bytes())
	for i := range 16384 {
		bomb.Write(block(1, 128<<10, i == 16383))
		bomb.WriteByte(0)
	}
	if bomb.Len() > 256<<10 {
		t.Fatalf("the bomb is %d bytes", bomb.Len())
	}
	macKey, _ := key.DeriveKey("backup v2")
	mac := hmac.New(sha256.New, macKey)
	mac.Write(hdr)
	var body bytes.Buffer
	body.Write(hdr)
	for b := bomb.Bytes(); len(b) > 0; {
		n := min(len(b), 64<<10)
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(n))
		body.Write(l[:])
		body.Write(b[:n])
		mac.Write(b[:n])
		b = b[n:]
	}
	body.Write([]byte{0, 0, 0, 0})
	body.Write(mac.Sum(nil))

	r, _ := age.ParseX25519Recipient(recipient)
	var enc bytes.Buffer
	aw, _ := age.Encrypt(&enc, r)
	aw.Write(body.Bytes())
	aw.Close()
	os.WriteFile(out, enc.Bytes(), 0o600)
}

// corruptBucketRoot overwrites the page header of bucket's root page in a
// copy of a stopped founder's store: the file opens, the cluster's own
// pages are intact, the bucket's are not.
func corruptBucketRoot(t *testing.T, path, bucket string) {
	t.Helper()
	var root uint64
	var pageSize int
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	pageSize = db.Info().PageSize
	_ = db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte(bucket)).Root())
		return nil
	})
	db.Close()
	if root == 0 {
		t.Fatalf("bucket %s is inline: nothing to corrupt", bucket)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// flags and count of the page header: an unknown page type with a
	// count that runs off the page.
	if _, err := f.WriteAt([]byte{0x7f, 0x00, 0xff, 0xff}, int64(root)*int64(pageSize)+8); err != nil {
		t.Fatal(err)
	}
}

// Issue 20 items 2 and 7 (SPEC 16.4): a forged row in a plain snapshot,
// re-encrypted with age to the operator's public key, restored without
// complaint; a 64 KB zstd bomb wrote 2 GB before it was refused; a
// snapshot with corrupt pages restored and then panicked serve; another
// cluster's backup restored silently. Each is refused now on the real
// binary, and a refused restore leaves nothing behind.
func TestTrust16_4_BackupsCannotBeForged(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dirA, dirC := filepath.Join(tmp, "a"), filepath.Join(tmp, "c")
	stoppedWithTokens(t, dirA, 1)
	stoppedWithTokens(t, dirC, 1)
	pinA, pinC := caPin(t, filepath.Join(dirA, "ca.pem")), caPin(t, filepath.Join(dirC, "ca.pem"))
	operator, operatorKey := ageIdentity(t)
	keyA, err := crypto.LoadOrCreateDataKey(filepath.Join(dirA, "data.key"), false)
	if err != nil {
		t.Fatal(err)
	}
	var clusterA string
	boltEdit(t, dirA, func(tx *bolt.Tx) error {
		var id struct {
			ClusterID string `json:"clusterId"`
		}
		raw, _ := store.RecordPayload(tx.Bucket([]byte("cluster")).Get([]byte("identity")))
		_ = json.Unmarshal(raw, &id)
		clusterA = id.ClusterID
		return nil
	})
	if clusterA == "" {
		t.Fatal("no cluster id in A's store")
	}

	// The attacker's copy of A's store with an admin token row of its own.
	forgedStore := filepath.Join(tmp, "forged.db")
	copyFile(t, filepath.Join(dirA, "stratum.db"), forgedStore)
	boltEditFile(t, forgedStore, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("iam-tokens")).Put([]byte("t-forged"), []byte(`{"tokenId":"t-forged","name":"x","hash":"`+crypto.HashToken("stolen")+`","policy":{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"]}]}}`))
	})
	attackerKey, _ := crypto.GenerateDataKey()
	forged := filepath.Join(tmp, "forged.age")
	forgedBackup(t, forged, forgedStore, attackerKey, nil, operatorKey, clusterA, pinA)
	forgedWithKey := filepath.Join(tmp, "forged-with-key.age")
	forgedBackup(t, forgedWithKey, forgedStore, attackerKey, attackerKey, operatorKey, clusterA, pinA)

	bomb := filepath.Join(tmp, "bomb.age")
	bombBackup(t, bomb, attackerKey, operator, operatorKey)
	if st, _ := os.Stat(bomb); st.Size() > 256<<10 {
		t.Fatalf("the bomb file is %d bytes", st.Size())
	}

	corruptStore := filepath.Join(tmp, "corrupt.db")
	copyFile(t, filepath.Join(dirA, "stratum.db"), corruptStore)
	corruptBucketRoot(t, corruptStore, "audit")
	corrupt := filepath.Join(tmp, "corrupt.age")
	forgedBackup(t, corrupt, corruptStore, keyA, keyA, operatorKey, clusterA, pinA)

	otherCluster := filepath.Join(tmp, "c.age")
	if r := stratum(t, "backup", "--data", dirC, "--out", otherCluster, "--recipient", operatorKey, "--include-data-key"); r.code != 0 {
		t.Fatalf("backup of C = %d %q", r.code, r.stderr)
	}
	otherPlain := filepath.Join(tmp, "c.bak")
	if r := stratum(t, "backup", "--data", dirC, "--out", otherPlain); r.code != 0 {
		t.Fatalf("plain backup of C = %d %q", r.code, r.stderr)
	}

	// withA is a directory holding A's key and ca.pem but no store: the
	// operator restoring A's lost store on A's machine.
	withA := func(t *testing.T) string {
		d := filepath.Join(t.TempDir(), "a")
		os.MkdirAll(d, 0o700)
		copyFile(t, filepath.Join(dirA, "data.key"), filepath.Join(d, "data.key"))
		copyFile(t, filepath.Join(dirA, "ca.pem"), filepath.Join(d, "ca.pem"))
		return d
	}
	fresh := func(t *testing.T) string { return filepath.Join(t.TempDir(), "fresh") }
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		args []string
		want string
	}{
		{"forged row, re-encrypted to the operator", withA, []string{"--in", forged, "--identity", operator}, "MAC does not verify"},
		{"forged row carrying the forger's key, A's pin", fresh, []string{"--in", forgedWithKey, "--identity", operator, "--ca-pin", pinA}, "does not open the restored store"},
		{"zstd bomb", fresh, []string{"--in", bomb, "--identity", operator, "--new-cluster"}, "more than its header announces"},
		{"corrupt pages", fresh, []string{"--in", corrupt, "--identity", operator, "--ca-pin", pinA}, "consistency check"},
		{"another cluster, A's pin given", fresh, []string{"--in", otherCluster, "--identity", operator, "--ca-pin", pinA}, pinC},
		{"another cluster, into A's directory", withA, []string{"--in", otherCluster, "--identity", operator}, "data.key exists"},
		{"another cluster's plain backup, A's key", withA, []string{"--in", otherPlain}, "MAC does not verify"},
		{"another cluster, no pin", fresh, []string{"--in", otherCluster, "--identity", operator}, "--new-cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			_, existed := os.Stat(dir)
			before := ""
			if existed == nil {
				before = dirDigest(t, dir)
			}
			r := stratum(t, append([]string{"restore", "--data", dir}, tc.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("restore = %d %q %q, want a refusal naming %q", r.code, r.stdout, r.stderr, tc.want)
			}
			if existed == nil {
				if after := dirDigest(t, dir); after != before {
					t.Fatalf("a refused restore changed %s:\n%s\nwas\n%s", dir, after, before)
				}
			} else if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused restore left %s behind", dir)
			}
		})
	}

	// The real backup of A, by contrast, restores into A's directory.
	good := filepath.Join(tmp, "a.age")
	if r := stratum(t, "backup", "--data", dirA, "--out", good, "--recipient", operatorKey); r.code != 0 {
		t.Fatalf("backup of A = %d %q", r.code, r.stderr)
	}
	d := withA(t)
	if r := stratum(t, "restore", "--data", d, "--in", good, "--identity", operator); r.code != 0 || !strings.Contains(r.stdout, pinA) || !strings.Contains(r.stdout, clusterA) {
		t.Fatalf("restore of A's own backup = %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func boltEditFile(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// TestTrust16_4_CAKeyMustMatchThePin: the forger builds a store of its
// own (its own data key and CA key) whose CA certificate is A's, public
// in A's ca.pem, and frames it as a backup carrying its data key and A's
// pin. The pin check and the store check compare the certificate only,
// so before the fix the restore passed `--ca-pin <A's pin>` and wrote a
// founder of the forger's making under A's certificate. The CA key must
// match the certificate: refused, nothing written.
func TestTrust16_4_CAKeyMustMatchThePin(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dirA, dirC := filepath.Join(tmp, "a"), filepath.Join(tmp, "c")
	stoppedWithTokens(t, dirA, 1)
	stoppedWithTokens(t, dirC, 1)
	pinA := caPin(t, filepath.Join(dirA, "ca.pem"))
	certA, err := os.ReadFile(filepath.Join(dirA, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	keyC, err := crypto.LoadOrCreateDataKey(filepath.Join(dirC, "data.key"), false)
	if err != nil {
		t.Fatal(err)
	}

	// The forger's own store, A's certificate put in, then signed with
	// the forger's own key (it has it: a store of its own at an earlier
	// level has the migration give every record its MAC).
	forgedStore := filepath.Join(tmp, "forged.db")
	copyFile(t, filepath.Join(dirC, "stratum.db"), forgedStore)
	var clusterC string
	boltEditFile(t, forgedStore, func(tx *bolt.Tx) error {
		if err := stratumtest.StripRecordMACs(tx); err != nil {
			return err
		}
		var id struct {
			ClusterID string `json:"clusterId"`
		}
		_ = json.Unmarshal(tx.Bucket([]byte("cluster")).Get([]byte("identity")), &id)
		clusterC = id.ClusterID
		if err := tx.Bucket([]byte("cluster")).Put([]byte("ca-cert"), certA); err != nil {
			return err
		}
		var level [8]byte
		binary.BigEndian.PutUint64(level[:], uint64(migrationBefore(t, "authenticated records")))
		return tx.Bucket([]byte("meta")).Put([]byte("schema"), level[:])
	})
	db, err := store.Open(forgedStore, keyC)
	if err != nil {
		t.Fatal(err)
	}
	var certPin string
	if err := db.View(func(tx *store.Tx) error {
		ca, err := cluster.LoadCA(tx)
		if err == nil {
			certPin = ca.Pin()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if clusterC == "" {
		t.Fatal("no cluster id in the forger's store")
	}

	operator, operatorKey := ageIdentity(t)
	forged := filepath.Join(tmp, "forged.age")
	forgedBackup(t, forged, forgedStore, keyC, keyC, operatorKey, clusterC, pinA)
	dir := filepath.Join(t.TempDir(), "fresh")
	r := stratum(t, "restore", "--data", dir, "--in", forged, "--identity", operator, "--ca-pin", pinA)
	if r.code == 0 {
		t.Fatalf("a backup holding A's certificate (pin %s, store cert pin %s) with the forger's CA key restored under --ca-pin %s: %q", pinA, certPin, pinA, r.stdout)
	}
	if !strings.Contains(r.stderr, "does not match") {
		t.Errorf("restore refused with %q, want the CA key named as not matching", r.stderr)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused restore left %s behind", dir)
	}
}
