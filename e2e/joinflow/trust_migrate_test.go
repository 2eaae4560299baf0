package joinflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"stratum/internal/stratumtest"
	"stratum/store"
)

// asPreviousBuild rewrites a stopped founder's store as the build before
// the trust rules left it: schema 1, members without a recorded leaf
// serial or installed mark, and no admission release stored.
func asPreviousBuild(t *testing.T, dir string) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "stratum.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		if err := stratumtest.StripRecordMACs(tx); err != nil {
			return err
		}
		members := tx.Bucket([]byte("members"))
		type kv struct{ k, v []byte }
		var rewritten []kv
		if err := members.ForEach(func(k, v []byte) error {
			var m map[string]any
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			delete(m, "leafSerial")
			delete(m, "installed")
			raw, err := json.Marshal(m)
			rewritten = append(rewritten, kv{append([]byte{}, k...), raw})
			return err
		}); err != nil {
			return err
		}
		for _, e := range rewritten {
			if err := members.Put(e.k, e.v); err != nil {
				return err
			}
		}
		// The previous build's store schema was 1, its audit chain plain
		// SHA-256 links with no sealed head.
		if err := tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte{0, 0, 0, 0, 0, 0, 0, 1}); err != nil {
			return err
		}
		if err := stratumtest.RelinkAuditPlain(tx, nil); err != nil {
			return err
		}
		return tx.Bucket([]byte("cluster")).Delete([]byte("admission-release"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTrust_MigratesPreviousDataDir: a data directory of the previous
// build (members without serials, no admission release) keeps working:
// the joined member's leaf still records, a member still delivering is
// still refused until it is installing, the admission release starts at
// the configured clusterRelease, and the migration is audited once.
func TestTrust_MigratesPreviousDataDir(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	a := joined(t, f, "0.2.0", "192.0.2.81")
	b, reg := register(t, f, joinToken(t, f, 1), "0.2.0", "192.0.2.82")
	reg.want(t, 201, "")
	b.deliver(t)
	f.Stop(os.Interrupt, 20*time.Second)
	asPreviousBuild(t, f.Dir)
	if err := stratumtest.ForgetAuditHWM(f.Dir); err != nil {
		t.Fatal(err)
	}

	g := stratumtest.Serve(t, f.Dir)
	a.f, b.f = g, g
	a.record(t, "0.2.0").want(t, 204, "")
	b.record(t, "0.2.0").want(t, 403, "FORBIDDEN")
	b.progress(t, "installing")
	b.record(t, "0.2.0").want(t, 204, "")
	if v := versionView(t, g, g.Operator(t).Token); v["admissionRelease"] != "0.2.0" {
		t.Fatalf("admission release after migration: %v", v)
	}
	_, reg = register(t, g, joinToken(t, g, 1), "0.2.0", "192.0.2.83")
	reg.want(t, 201, "")

	// A second start finds nothing left to migrate.
	g.Stop(os.Interrupt, 20*time.Second)
	h := stratumtest.Serve(t, f.Dir)
	n := 0
	for _, k := range auditKinds(t, h) {
		if k == "cluster.release.migrated" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the admission release migration is audited %d times, want once", n)
	}
	if kinds := auditKinds(t, h); !slices.Contains(kinds, "join.installing") {
		t.Fatalf("audit lost events across the migration: %v", kinds)
	}

	// The members got back the serials their deliveries were audited
	// with: only those leaves count for them from now on.
	h.Stop(os.Interrupt, 20*time.Second)
	for _, m := range []*member{a, b} {
		if got := storedLeafSerial(t, f.Dir, m.nodeID); got != m.cert.SerialNumber.Text(16) {
			t.Errorf("member %s: leaf serial %q after migration, want %s", m.nodeID, got, m.cert.SerialNumber.Text(16))
		}
	}
}

func storedLeafSerial(t *testing.T, dir, nodeID string) string {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "stratum.db"), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var m struct{ LeafSerial string }
	err = db.View(func(tx *bolt.Tx) error {
		raw, _ := store.RecordPayload(tx.Bucket([]byte("members")).Get([]byte(nodeID)))
		return json.Unmarshal(raw, &m)
	})
	if err != nil {
		t.Fatal(err)
	}
	return m.LeafSerial
}
