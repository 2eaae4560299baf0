package repo

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/release"
	"stratum/release/releasetest"
	"stratum/store"
	"stratum/store/storetest"
)

// releasesLeft lists what is in dataDir/releases: after a failed import
// it must hold nothing new.
func releasesLeft(t *testing.T, dataDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, "releases"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestImport(t *testing.T) {
	src, blob, pub := releasetest.SignedTree(t, 5*ChunkSize+123, "0.6.0")
	keys := releasetest.Keyring(t, 1, pub)
	db, dataDir := storetest.Temp(t)

	var calls int
	var lastDone, lastTotal int64
	start := time.Now()
	m, err := importTree(context.Background(), db, dataDir, src, keys, ImportOptions{Progress: func(done, total int64, file string) {
		calls++
		if done < lastDone || done > total {
			t.Errorf("progress %d of %d after %d", done, total, lastDone)
		}
		lastDone, lastTotal = done, total
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("import (%d bytes): %s", m.TotalSize(), time.Since(start))
	if calls < 5 || lastDone != lastTotal {
		t.Fatalf("progress: %d calls, %d of %d", calls, lastDone, lastTotal)
	}

	final := filepath.Join(dataDir, "releases", "0.6.0")
	if _, err := release.Verify(final, keys); err != nil {
		t.Fatalf("imported tree does not verify: %v", err)
	}
	filepath.WalkDir(final, func(p string, d fs.DirEntry, err error) error {
		st, _ := os.Lstat(p)
		want := os.FileMode(0o444)
		if d.IsDir() {
			want = 0o555
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
		return nil
	})
	if left := releasesLeft(t, dataDir); len(left) != 1 || left[0] != "0.6.0" {
		t.Fatalf("releases dir holds %v", left)
	}

	list, err := listReleases(db, nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v", list, err)
	}
	r := list[0]
	if !reflect.DeepEqual(r.SignerKeyIDs, keys.KeyIDs()) {
		t.Errorf("signer key ids %v, want the signing key %v", r.SignerKeyIDs, keys.KeyIDs())
	}
	if r.Release != "0.6.0" || r.Files != len(m.Files) || r.Bytes != m.TotalSize() || len(r.ManifestSHA256) != 64 || r.ImportID == "" {
		t.Fatalf("record %+v", r)
	}
	var fi *fileIndex
	db.View(func(tx *store.Tx) error {
		fi, err = storedIndex(tx, fileKey("0.6.0", blob))
		return err
	})
	if fi == nil || fi.Size != 5*ChunkSize+123 || len(fi.Chunks) != 6*32 {
		t.Fatalf("chunk index of %s: size %d, %d chunk bytes", blob, fi.Size, len(fi.Chunks))
	}
	if kinds := storetest.AuditKinds(t, db); strings.Join(kinds, ",") != "release.imported:0.6.0" {
		t.Fatalf("audit %v", kinds)
	}

	// A corrupt mark, then a re-import: the tree is replaced, the mark is
	// cleared in the same transaction, the old tree is gone.
	db.Update(func(tx *store.Tx) error {
		return bucketCorrupt.Put(tx, fileKey("0.6.0", blob), corruptMark{ImportID: r.ImportID})
	})
	if mirror := newMirror(mirrorConfig{DB: db, DataDir: dataDir, Concurrency: 1}); mirror.Offered("0.6.0") {
		t.Fatal("a release with a corrupt file is offered")
	}
	if _, err := importTree(context.Background(), db, dataDir, src, keys, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	r2, ok, err := getRelease(db, "0.6.0", nil)
	if err != nil || !ok || r2.ImportID == r.ImportID || len(r2.Corrupt) != 0 {
		t.Fatalf("after re-import: %+v %v %v", r2, ok, err)
	}
	if left := releasesLeft(t, dataDir); len(left) != 1 {
		t.Fatalf("releases dir holds %v after re-import", left)
	}
	if !newMirror(mirrorConfig{DB: db, DataDir: dataDir, Concurrency: 1}).Offered("0.6.0") {
		t.Fatal("re-imported release not offered")
	}
	var raw []byte
	db.View(func(tx *store.Tx) error {
		stored, _, err := bucketReleases.Get(tx, "0.6.0")
		raw, _ = json.Marshal(stored)
		return err
	})
	if strings.Contains(string(raw), "chunks") {
		t.Fatal("release record holds chunk hashes: they belong to the per-file entries")
	}
}

// TestImportFailureLeavesNothing: whatever fails, no directory and no
// store record remain, and the error names the file and why.
func TestImportFailureLeavesNothing(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, src, blob string)
		wants  []string
	}{
		{"flipped byte in the last chunk", func(t *testing.T, src, blob string) {
			releasetest.FlipByte(t, filepath.Join(src, blob), 3*ChunkSize+5)
		}, []string{"sha256", "manifest says"}},
		{"file truncated", func(t *testing.T, src, blob string) {
			os.Truncate(filepath.Join(src, "sysext/stratum-ovs_3.5.3-5.el10s.raw"), 10)
		}, []string{"sysext/stratum-ovs_3.5.3-5.el10s.raw", "size 10 bytes"}},
		{"extra file", func(t *testing.T, src, blob string) {
			releasetest.WriteFile(t, src, "os/zz-extra", []byte("x"))
		}, []string{"os/zz-extra", "not listed"}},
		{"symlink", func(t *testing.T, src, blob string) {
			os.Remove(filepath.Join(src, "os/index.json"))
			os.Symlink("/etc/passwd", filepath.Join(src, "os/index.json"))
		}, []string{"os/index.json", "symbolic link"}},
		{"missing file", func(t *testing.T, src, blob string) {
			os.Remove(filepath.Join(src, "os/index.json"))
		}, []string{"os/index.json", "missing"}},
		{"bad signature", func(t *testing.T, src, blob string) {
			k, _, _ := releasetest.Key(t, t.TempDir(), "other")
			os.Remove(filepath.Join(src, release.SignaturePath))
			if _, err := release.Sign(src, k, "0.6.0", []string{"0.5.0"}); err != nil {
				t.Fatal(err)
			}
		}, []string{release.SignaturePath, "untrusted key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, blob, pub := releasetest.SignedTree(t, 4*ChunkSize, "0.6.0")
			keys := releasetest.Keyring(t, 1, pub)
			db, dataDir := storetest.Temp(t)
			c.damage(t, src, blob)
			_, err := importTree(context.Background(), db, dataDir, src, keys, ImportOptions{})
			releasetest.MustContain(t, err, c.wants...)
			if left := releasesLeft(t, dataDir); len(left) != 0 {
				t.Fatalf("failed import left %v", left)
			}
			if list, _ := listReleases(db, nil); len(list) != 0 {
				t.Fatalf("failed import left records %v", list)
			}
			if kinds := storetest.AuditKinds(t, db); len(kinds) != 0 {
				t.Fatalf("failed import audited %v", kinds)
			}
		})
	}
}

// TestImportCommitFailure: when the store refuses the record, the new tree
// is removed and the previous import is put back untouched.
func TestImportCommitFailure(t *testing.T) {
	src, _, pub := releasetest.SignedTree(t, 2*ChunkSize, "0.6.0")
	keys := releasetest.Keyring(t, 1, pub)
	db, dataDir := storetest.Temp(t)
	if _, err := importTree(context.Background(), db, dataDir, src, keys, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := importTree(context.Background(), db, dataDir, src, keys, ImportOptions{}); err == nil {
		t.Fatal("import into a closed store succeeded")
	}
	if left := releasesLeft(t, dataDir); len(left) != 1 || left[0] != "0.6.0" {
		t.Fatalf("releases dir holds %v", left)
	}
	if _, err := release.Verify(filepath.Join(dataDir, "releases", "0.6.0"), keys); err != nil {
		t.Fatalf("previous import damaged: %v", err)
	}
}

// TestImportCleansStale: directories left by a killed import are settled
// by the store: a tree the store has no record of (0.5.0 here) was never
// committed and goes; the new import is in place.
func TestImportCleansStale(t *testing.T) {
	src, _, pub := releasetest.SignedTree(t, 1000, "0.6.0")
	keys := releasetest.Keyring(t, 1, pub)
	db, dataDir := storetest.Temp(t)
	rel := filepath.Join(dataDir, "releases")
	os.MkdirAll(filepath.Join(rel, ".import-0.6.0-123", "os"), 0o555)
	os.MkdirAll(filepath.Join(rel, ".old-0.5.0-abcdef0123456789", "os"), 0o755)
	os.MkdirAll(filepath.Join(rel, ".old-0.6.0-abcdef0123456789", "os"), 0o755)
	os.MkdirAll(filepath.Join(rel, "0.6.0"), 0o755)
	if _, err := importTree(context.Background(), db, dataDir, src, keys, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	left := strings.Join(releasesLeft(t, dataDir), ",")
	if left != "0.6.0" {
		t.Fatalf("releases dir holds %s", left)
	}
}

// TestImportOtherContentConflicts: the same version with another content
// is CONFLICT and changes nothing, unless Replace is given (then audited
// with what it replaced); the same content imports again freely.
func TestImportOtherContentConflicts(t *testing.T) {
	src, _, pub := releasetest.SignedTree(t, 2*ChunkSize, "0.6.0")
	keyring := releasetest.Keyring(t, 1, pub)
	db, dataDir := storetest.Temp(t)
	ctx := context.Background()
	if _, err := importTree(ctx, db, dataDir, src, keyring, ImportOptions{Actor: "user:a"}); err != nil {
		t.Fatal(err)
	}
	first, _, _ := getRelease(db, "0.6.0", nil)

	other, _ := releasetest.MakeTree(t, 2*ChunkSize+1)
	keyFile, otherPub, _ := releasetest.Key(t, t.TempDir(), "k2")
	if _, err := release.Sign(other, keyFile, "0.6.0", []string{"0.5.0"}); err != nil {
		t.Fatal(err)
	}
	keyring = releasetest.Keyring(t, 1, pub, otherPub)
	_, err := importTree(ctx, db, dataDir, other, keyring, ImportOptions{Actor: "user:a"})
	if apierr.CodeOf(err) != apierr.Conflict || !strings.Contains(err.Error(), "replace") {
		t.Fatalf("other content under 0.6.0: %v", err)
	}
	if now, _, _ := getRelease(db, "0.6.0", nil); now.ImportID != first.ImportID || now.ManifestSHA256 != first.ManifestSHA256 {
		t.Fatalf("a refused import changed the record: %+v", now)
	}
	if left := releasesLeft(t, dataDir); len(left) != 1 {
		t.Fatalf("a refused import left %v", left)
	}
	if kinds := storetest.AuditKinds(t, db); len(kinds) != 1 {
		t.Fatalf("a refused import was audited: %v", kinds)
	}

	if _, err := importTree(ctx, db, dataDir, src, keyring, ImportOptions{}); err != nil {
		t.Fatalf("the same content again: %v", err)
	}
	if _, err := importTree(ctx, db, dataDir, other, keyring, ImportOptions{Actor: "user:a", Replace: true}); err != nil {
		t.Fatalf("with Replace: %v", err)
	}
	now, _, _ := getRelease(db, "0.6.0", nil)
	if now.ManifestSHA256 == first.ManifestSHA256 {
		t.Fatal("Replace did not replace")
	}
	evs, _ := db.AuditEvents(0, 100)
	last := evs[len(evs)-1]
	if last.Kind != "release.imported" || last.Actor != "user:a" || last.Data["contentReplaced"] != "true" || last.Data["previousManifestSha256"] != first.ManifestSHA256 {
		t.Fatalf("the replace is not audited with what it replaced: %+v", last)
	}
}

// TestImportSourceNoOracle: before a signature is verified, whatever is
// wrong with the source (missing, a file, a FIFO, no payload, a payload
// that is a directory, a FIFO or a link out) gets one answer, at once.
func TestImportSourceNoOracle(t *testing.T) {
	db, dataDir := storetest.Temp(t)
	_, pubFile, _ := releasetest.Key(t, t.TempDir(), "k")
	keyring := releasetest.Keyring(t, 1, pubFile)
	sources := releasetest.UnreadableSources(t, t.TempDir())
	var first string
	for _, src := range sources {
		done := make(chan error, 1)
		go func() {
			_, err := importTree(context.Background(), db, dataDir, src, keyring, ImportOptions{})
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the import hangs", src)
		}
		var fe *release.FileError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: %v, want a FileError", src, err)
		}
		if first == "" {
			first = err.Error()
		}
		if err.Error() != first {
			t.Errorf("%s answers %q, another source %q: the answer tells them apart", src, err, first)
		}
	}
}
