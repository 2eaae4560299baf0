package cluster

import (
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/store"
	"stratum/store/storetest"
)

// A restored store is isolated until TakeOver, which ends it for good;
// a store never restored is not isolated and has nothing to take over.
func TestRestoreMarkAndTakeOver(t *testing.T) {
	db := openStore(t)
	now := time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC)
	cfg, err := ParseConfig([]byte(fullConfig))
	if err != nil {
		t.Fatal(err)
	}
	isolated := func() Identity {
		t.Helper()
		var id Identity
		if err := db.View(func(tx *store.Tx) error { id, err = LoadIdentity(tx); return err }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	takeOver := func() (RestoreMark, error) {
		var m RestoreMark
		err := db.Update(func(tx *store.Tx) error {
			var err error
			m, err = TakeOver(tx, "control-socket", now.Add(time.Hour))
			return err
		})
		return m, err
	}
	if err := db.Update(func(tx *store.Tx) error { _, _, _, err := Init(tx, cfg, false, now); return err }); err != nil {
		t.Fatal(err)
	}
	if id := isolated(); id.Isolated() || id.Restored != nil {
		t.Fatalf("a founder never restored is isolated: %+v", id.Restored)
	}
	if _, err := takeOver(); apierr.CodeOf(err) != apierr.Conflict {
		t.Fatalf("take-over of a founder never restored = %v, want CONFLICT", err)
	}

	if err := db.Update(func(tx *store.Tx) error { return MarkRestored(tx, "drill.age", now) }); err != nil {
		t.Fatal(err)
	}
	id := isolated()
	if !id.Isolated() || id.Restored.Backup != "drill.age" || !id.Restored.RestoredAt.Equal(now) {
		t.Fatalf("after the restore: isolated %v, mark %+v", id.Isolated(), id.Restored)
	}
	m, err := takeOver()
	if err != nil {
		t.Fatal(err)
	}
	if m.TakenOverAt == nil || !m.TakenOverAt.Equal(now.Add(time.Hour)) || m.TakenOverBy != "control-socket" {
		t.Fatalf("take-over mark %+v", m)
	}
	if id := isolated(); id.Isolated() || id.Restored == nil || id.Restored.TakenOverAt == nil {
		t.Fatalf("after the take-over: isolated %v, mark %+v", id.Isolated(), id.Restored)
	}
	if _, err := takeOver(); apierr.CodeOf(err) != apierr.Conflict {
		t.Fatalf("a second take-over = %v, want CONFLICT", err)
	}
	// A backup of the taken-over founder, restored, is isolated again.
	if err := db.Update(func(tx *store.Tx) error { return MarkRestored(tx, "again.zst", now) }); err != nil {
		t.Fatal(err)
	}
	if id := isolated(); !id.Isolated() || id.Restored.Backup != "again.zst" {
		t.Fatalf("a restore of a taken-over store: %+v", id.Restored)
	}
	kinds := storetest.AuditKinds(t, db)
	want := map[string]int{"cluster.restored": 2, "cluster.taken-over": 1}
	got := map[string]int{}
	for _, k := range kinds {
		kind, _, _ := strings.Cut(k, ":")
		got[kind]++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d %s events, want %d (%v)", got[k], k, n, kinds)
		}
	}
}
