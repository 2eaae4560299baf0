package repo

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/release"
	"stratum/release/releasetest"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

// signedBy writes a release tree rel signed with a new key and returns
// the tree and the key's public key file.
func signedBy(t *testing.T, rel string) (tree, pubFile string) {
	t.Helper()
	tree, _ = releasetest.MakeTree(t, 1000)
	keyFile, pubFile, _ := releasetest.Key(t, t.TempDir(), "release")
	if _, err := release.Sign(tree, keyFile, rel, nil); err != nil {
		t.Fatal(err)
	}
	return tree, pubFile
}

// dropKey copies pubFile into the keys directory as name, behind the
// repository's back.
func dropKey(t *testing.T, keysDir, pubFile, name string) string {
	t.Helper()
	b, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(keysDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(keysDir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// adoptedRepo is a repository over a new store whose keys directory held
// pubs (as k1.pub, k2.pub, ...) when it adopted its keys.
func adoptedRepo(t *testing.T, pubs ...string) (s *Service, db *store.DB, dataDir, keysDir string) {
	t.Helper()
	db, dataDir = storetest.Temp(t)
	keysDir = filepath.Join(dataDir, "release-keys")
	for i, pub := range pubs {
		dropKey(t, keysDir, pub, "k"+strconv.Itoa(i+1)+".pub")
	}
	s, err := New(Config{DB: db, DataDir: dataDir, CacheBytes: -1, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AdoptKeys(); err != nil {
		t.Fatal(err)
	}
	return s, db, dataDir, keysDir
}

// TestKeysAdoptedOnce: the files present at adoption are trusted; a file
// dropped after it is not, and the import it would verify is refused
// with a message naming the file and the command that trusts it; after
// TrustKey it imports. Adoption runs once: a second one adopts nothing.
func TestKeysAdoptedOnce(t *testing.T) {
	tree1, pub1 := signedBy(t, "0.6.0")
	tree2, pub2 := signedBy(t, "0.7.0")
	s, db, dataDir, keysDir := adoptedRepo(t, pub1)
	if got := storetest.AuditEventsOf(t, db, "release.keys.adopted"); len(got) != 1 || !strings.Contains(got[0].Data["files"], "k1.pub") {
		t.Fatalf("release.keys.adopted events = %+v", got)
	}
	_, err := s.Import(context.Background(), tree1, ImportOptions{})
	if err != nil {
		t.Fatalf("a release signed by the adopted key: %v", err)
	}

	k2 := dropKey(t, keysDir, pub2, "k2.pub")
	if err := s.AdoptKeys(); err != nil { // a restart: adoption is done
		t.Fatal(err)
	}
	if got := storetest.AuditEventsOf(t, db, "release.keys.adopted"); len(got) != 1 {
		t.Fatalf("adoption ran again: %+v", got)
	}
	for range 2 {
		_, err = s.Import(context.Background(), tree2, ImportOptions{})
		if _, reason, ok := release.BadFile(err); !ok || !strings.Contains(reason, k2) || !strings.Contains(reason, "stratum release trust-key "+k2) {
			t.Fatalf("import signed by a dropped key: %v, want a verification failure naming %s and how to trust it", err, k2)
		}
	}
	if left := releasesLeft(t, dataDir); len(left) != 1 || left[0] != "0.6.0" {
		t.Fatalf("releases after the refused import: %v", left)
	}
	if got := storetest.AuditEventsOf(t, db, "release.key.untrusted"); len(got) != 1 || got[0].Data["file"] != "k2.pub" {
		t.Fatalf("release.key.untrusted events = %+v, want one (once per key)", got)
	}
	keys, err := s.ListKeys()
	if err != nil || len(keys) != 2 || !keys[0].Trusted || keys[1].Trusted || keys[1].File != "k2.pub" {
		t.Fatalf("ListKeys = %+v, %v", keys, err)
	}

	pem, err := os.ReadFile(pub2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrustKey("k1.pub", pem, "user:admin"); !isCode(err, apierr.Conflict) {
		t.Fatalf("trusting another key under k1.pub: %v, want CONFLICT", err)
	}
	if _, err := s.TrustKey("../k.pub", pem, "user:admin"); !isCode(err, apierr.InvalidInput) {
		t.Fatalf("trusting under ../k.pub: %v, want INVALID_INPUT", err)
	}
	if _, err := s.TrustKey("k3.pub", []byte("not a key"), "user:admin"); !isCode(err, apierr.InvalidInput) {
		t.Fatalf("trusting a non-key: %v, want INVALID_INPUT", err)
	}
	k, err := s.TrustKey("k2.pub", pem, "user:admin")
	if err != nil || !k.Trusted || k.File != "k2.pub" {
		t.Fatalf("TrustKey = %+v, %v", k, err)
	}
	if got := storetest.AuditEventsOf(t, db, "release.key.trusted"); len(got) != 1 || got[0].Actor != "user:admin" {
		t.Fatalf("release.key.trusted events = %+v", got)
	}
	if _, err := s.Import(context.Background(), tree2, ImportOptions{}); err != nil {
		t.Fatalf("a release signed by the key trusted: %v", err)
	}
}

// TestKeysNoneTrusted: with only untrusted files, the import fails saying
// no key is trusted and naming the file; with none, as before.
func TestKeysNoneTrusted(t *testing.T) {
	tree, pub := signedBy(t, "0.6.0")
	s, _, _, keysDir := adoptedRepo(t) // nothing to adopt yet
	if err := os.MkdirAll(keysDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(context.Background(), tree, ImportOptions{}); !isCode(err, apierr.Conflict) || !strings.Contains(err.Error(), "no *.pub file") {
		t.Fatalf("import with no key file: %v", err)
	}
	p := dropKey(t, keysDir, pub, "late.pub")
	_, err := s.Import(context.Background(), tree, ImportOptions{})
	if !isCode(err, apierr.Conflict) || !strings.Contains(err.Error(), "no trusted key") || !strings.Contains(err.Error(), "stratum release trust-key "+p) {
		t.Fatalf("import with only an untrusted key file: %v", err)
	}
}

func isCode(err error, code apierr.Code) bool {
	e, ok := apierr.As(err)
	return ok && e.Code == code
}

// TestKeysEmptiedBucketAdoptsNothing: the intruder who can edit the store
// deletes the adoption mark and every key record, drops a key file and
// waits for a restart. The audit records the adoption: nothing is adopted
// again, the dropped file is not trusted, nor is the adopted one. Nor when
// the intruder deletes the adoption's audit event too: the chain no longer
// verifies, so it proves no absence (before the fix the dropped file was
// adopted).
func TestKeysEmptiedBucketAdoptsNothing(t *testing.T) {
	for _, tc := range []struct {
		name        string
		deleteEvent bool
		adoptions   int // release.keys.adopted events left
	}{
		{"bucket emptied", false, 1},
		{"bucket emptied and the adoption's audit event deleted", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, pub1 := signedBy(t, "0.6.0")
			tree2, pub2 := signedBy(t, "0.7.0")
			s, db, _, keysDir := adoptedRepo(t, pub1)
			err := db.Update(func(tx *store.Tx) error {
				var keys []string
				if err := bucketKeys.Keys(tx, func(k string) error { keys = append(keys, k); return nil }); err != nil {
					return err
				}
				for _, k := range keys {
					if err := bucketKeys.Delete(tx, k); err != nil {
						return err
					}
				}
				if !tc.deleteEvent {
					return nil
				}
				var adoption []string
				if err := store.AuditBucket.ForEach(tx, func(k string, ev wire.AuditEvent) error {
					if ev.Kind == adoptedEvent {
						adoption = append(adoption, k)
					}
					return nil
				}); err != nil {
					return err
				}
				for _, k := range adoption {
					if err := store.AuditBucket.Delete(tx, k); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *store.Tx) error { return tx.Audit("later", "test", "", nil) }); err != nil {
				t.Fatal(err) // the adoption's event is not the newest
			}
			dropped := dropKey(t, keysDir, pub2, "k2.pub")
			if err := s.AdoptKeys(); err != nil {
				t.Fatal(err)
			}
			if got := storetest.AuditEventsOf(t, db, adoptedEvent); len(got) != tc.adoptions {
				t.Fatalf("adoption ran again: %+v", got)
			}
			if _, err := s.Import(context.Background(), tree2, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "stratum release trust-key "+dropped) {
				t.Fatalf("a release signed by a key dropped while the bucket was emptied: %v", err)
			}
			keys, err := s.ListKeys()
			if err != nil || len(keys) != 2 || keys[0].Trusted || keys[1].Trusted {
				t.Fatalf("ListKeys = %+v, %v, want k1.pub and k2.pub, neither trusted", keys, err)
			}
		})
	}
}
