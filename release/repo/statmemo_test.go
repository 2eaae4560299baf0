package repo

import (
	"testing"
	"time"

	"stratum/apierr"
	"stratum/store"
)

// longStatTTL makes the notes the only thing that ends a remembered
// answer for the rest of the test.
func longStatTTL(t *testing.T) {
	old := statTTL
	statTTL = time.Hour
	t.Cleanup(func() { statTTL = old })
}

// silentMark marks the file corrupt in the store without the note every
// writer of the mirror's records sends.
func silentMark(t *testing.T, db *store.DB, rel, path, importID string) {
	t.Helper()
	if err := db.Update(func(tx *store.Tx) error {
		return bucketCorrupt.Put(tx, fileKey(rel, path), corruptMark{ImportID: importID, At: time.Now().UTC(), Reason: "test"})
	}); err != nil {
		t.Fatal(err)
	}
}

// TestStatMemo: Stat answers a file it answered before without the store
// (a mark written with no note is not seen), and every change announced
// on the mirror's topic is seen by the next Stat: a file marked corrupt, a
// re-import, the note a replica hears when it may have missed others; an
// answer read while a note came is not kept.
func TestStatMemo(t *testing.T) {
	longStatTTL(t)
	m, blob, _, reimport := importedMirror(t, ChunkSize+5, 4, -1)
	fi, err := m.Stat("0.6.0", blob)
	if err != nil {
		t.Fatal(err)
	}
	silentMark(t, m.db, "0.6.0", blob, fi.index.ImportID)
	if again, err := m.Stat("0.6.0", blob); err != nil || again != fi {
		t.Fatalf("Stat again: %v, %v; want the remembered answer", again, err)
	}
	m.stats.forget() // what Everything does
	if _, err := m.Stat("0.6.0", blob); apierr.CodeOf(err) != apierr.ReleaseCorrupt {
		t.Fatalf("Stat after the memo was emptied: %v, want RELEASE_CORRUPT", err)
	}

	reimport() // clears the marks, with its note
	fi, err = m.Stat("0.6.0", blob)
	if err != nil {
		t.Fatalf("Stat after a re-import: %v", err)
	}
	reimport()
	if fi2, err := m.Stat("0.6.0", blob); err != nil || fi2.index.ImportID == fi.index.ImportID {
		t.Fatalf("Stat after a second re-import: %v; import %s, the one before %s", err, fi2.index.ImportID, fi.index.ImportID)
	}
	fi, _ = m.Stat("0.6.0", blob)
	if marked, err := markCorrupt(m.db, "0.6.0", blob, fi.index.ImportID, "test"); !marked || err != nil {
		t.Fatalf("markCorrupt: %v %v", marked, err)
	}
	if _, err := m.Stat("0.6.0", blob); apierr.CodeOf(err) != apierr.ReleaseCorrupt {
		t.Fatalf("Stat after a file was marked corrupt: %v, want RELEASE_CORRUPT", err)
	}

	var s statMemo
	k := statKey{"0.6.0", blob}
	_, gen := s.get(k, time.Now())
	s.forget() // a note while the answer was read
	s.put(k, fi, gen, time.Now())
	if got, _ := s.get(k, time.Now()); got != nil {
		t.Fatal("an answer read while a note came was kept")
	}
}

// TestStatMemoHearsOtherReplicas: on a shared store, a file marked
// corrupt by another replica is answered RELEASE_CORRUPT by this one as
// soon as the note travels (NOTIFY), its remembered answer gone.
func TestStatMemoHearsOtherReplicas(t *testing.T) {
	longStatTTL(t)
	s := importedOnA(t)
	mB := newMirror(mirrorConfig{DB: s.dbB, DataDir: s.dirB})
	t.Cleanup(mB.Close)
	fi, err := mB.Stat("0.6.0", s.blob)
	if err != nil {
		t.Fatal(err)
	}
	if marked, err := markCorrupt(s.dbA, "0.6.0", s.blob, fi.index.ImportID, "test"); !marked || err != nil {
		t.Fatalf("markCorrupt on A: %v %v", marked, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := mB.Stat("0.6.0", s.blob)
		if apierr.CodeOf(err) == apierr.ReleaseCorrupt {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B still answers %v 20 s after A marked the file corrupt", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
