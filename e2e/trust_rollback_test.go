package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"

	"stratum/internal/pgtest"
	"stratum/internal/stratumtest"
	"stratum/tpm/tpmtest"
)

// auditRollback is where an attacker with write access to the store
// keeps and puts back an older sealed audit head.
type auditRollback interface {
	// head returns the sealed head's stored bytes and the chain's last
	// sequence.
	head(t *testing.T) ([]byte, uint64)
	// rollBack deletes every event after seq and puts head back (and on
	// PostgreSQL sets the sequence back).
	rollBack(t *testing.T, head []byte, seq uint64)
}

type boltRollback struct{ dir string }

func (b boltRollback) head(t *testing.T) (raw []byte, last uint64) {
	boltEdit(t, b.dir, func(tx *bolt.Tx) error {
		raw = append([]byte(nil), tx.Bucket([]byte("meta")).Get([]byte("auditHead"))...)
		k, _ := tx.Bucket([]byte("audit")).Cursor().Last()
		last = binary.BigEndian.Uint64(k)
		return nil
	})
	return raw, last
}

func (b boltRollback) rollBack(t *testing.T, head []byte, seq uint64) {
	boltEdit(t, b.dir, func(tx *bolt.Tx) error {
		a := tx.Bucket([]byte("audit"))
		var newer [][]byte
		_ = a.ForEach(func(k, _ []byte) error {
			if binary.BigEndian.Uint64(k) > seq {
				newer = append(newer, append([]byte(nil), k...))
			}
			return nil
		})
		for _, k := range newer {
			if err := a.Delete(k); err != nil {
				return err
			}
		}
		if err := a.SetSequence(seq); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("auditHead"), head)
	})
}

type pgRollback struct{ dsn string }

func (p pgRollback) conn(t *testing.T) (*pgx.Conn, context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, ctx
}

func (p pgRollback) head(t *testing.T) (raw []byte, last uint64) {
	c, ctx := p.conn(t)
	if err := c.QueryRow(ctx, `SELECT value FROM stratum_kv WHERE bucket = 'meta' AND key = 'auditHead'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var k []byte
	if err := c.QueryRow(ctx, `SELECT key FROM stratum_kv WHERE bucket = 'audit' ORDER BY key DESC LIMIT 1`).Scan(&k); err != nil {
		t.Fatal(err)
	}
	return raw, binary.BigEndian.Uint64(k)
}

func (p pgRollback) rollBack(t *testing.T, head []byte, seq uint64) {
	c, ctx := p.conn(t)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM stratum_kv WHERE bucket = 'audit' AND key > $1`, []any{seqKey(seq)}},
		{`UPDATE stratum_kv SET value = $1 WHERE bucket = 'meta' AND key = 'auditHead'`, []any{head}},
		{`UPDATE stratum_seq SET value = $1 WHERE bucket = 'audit'`, []any{int64(seq)}},
	} {
		if _, err := c.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
}

func seqKey(n uint64) []byte { return seq(n) }

// Issue 20 item 3: an older sealed audit head replayed after the newer
// events were deleted (and on PostgreSQL the sequence set back) passed
// `audit verify`, and new events continued from the old number. The
// founder's high-water mark outside the store refuses it, at start and
// in verify, naming both sequences; --accept-audit-rollback lets an
// operator through once, audited.
func TestTrust16_3_ReplayedAuditHeadRefused(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"bbolt", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			var extra []string
			var store auditRollback = boltRollback{dir}
			if backend == "postgres" {
				dsn := pgtest.DSN(t)
				extra = []string{"--store", dsn}
				store = pgRollback{dsn}
			}
			stoppedWithTokens(t, dir, 2, extra...)
			oldHead, oldSeq := store.head(t)
			stoppedWithTokens(t, dir, 3, extra...)
			_, newSeq := store.head(t)
			if newSeq <= oldSeq {
				t.Fatalf("the chain did not advance: %d then %d", oldSeq, newSeq)
			}
			store.rollBack(t, oldHead, oldSeq)
			names := func(out string) bool {
				return strings.Contains(out, fmt.Sprintf("event %d", oldSeq)) && strings.Contains(out, fmt.Sprintf("event %d", newSeq))
			}

			// The chain itself is consistent again: only the mark sees it.
			r := stratum(t, append([]string{"audit", "verify", "--data", dir}, extra...)...)
			if r.code == 0 || !names(r.stderr) {
				t.Fatalf("audit verify of the rolled-back store = %d %q %q, want a refusal naming events %d and %d", r.code, r.stdout, r.stderr, oldSeq, newSeq)
			}
			r = refusedServe(t, dir, extra...)
			if !names(r.stderr) || !strings.Contains(r.stderr, "--accept-audit-rollback") {
				t.Fatalf("serve of the rolled-back store: %q, want both sequences and the flag", r.stderr)
			}

			// The operator who restored it on purpose passes once.
			f := stratumtest.ServeDev(t, dir, append(extra, "--accept-audit-rollback")...)
			email, password := credentials(t, dir)
			accepted := 0
			for _, ev := range auditEvents(t, f, f.Login(t, email, password).Token) {
				if ev.Kind == "audit.rollback.accepted" {
					accepted++
					if ev.Data["storeSeq"] != fmt.Sprint(oldSeq) || ev.Data["markSeq"] != fmt.Sprint(newSeq) {
						t.Errorf("rollback event %+v", ev)
					}
				}
			}
			if accepted != 1 {
				t.Fatalf("%d audit.rollback.accepted events, want 1", accepted)
			}
			stopOK(t, f)
			f = stratumtest.ServeDev(t, dir, extra...)
			stopOK(t, f)
			if r := stratum(t, append([]string{"audit", "verify", "--data", dir}, extra...)...); r.code != 0 {
				t.Fatalf("audit verify after the accepted rollback = %d %q", r.code, r.stderr)
			}
		})
	}
}

// With --tpm the mark is counted in a TPM NV counter: an attacker who
// puts back an older copy of the whole data directory (store and mark
// file together, which agree) is still refused, since the older file
// names a lower counter value than the TPM holds.
func TestTrust16_3_OlderDirectoryRefusedByTPMCounter(t *testing.T) {
	t.Parallel()
	sock := tpmtest.StartSwtpm(t)
	tmp := t.TempDir()
	dir, old := filepath.Join(tmp, "data"), filepath.Join(tmp, "old")
	stoppedWithTokens(t, dir, 2, "--tpm", sock)
	copyDir(t, dir, old)
	stoppedWithTokens(t, dir, 3, "--tpm", sock)
	for _, name := range []string{"stratum.db", "audit.hwm"} {
		copyFile(t, filepath.Join(old, name), filepath.Join(dir, name))
	}
	if r := stratum(t, "audit", "verify", "--data", dir, "--tpm", sock); r.code == 0 || !strings.Contains(r.stderr, "older copy") {
		t.Fatalf("audit verify of the older directory = %d %q %q, want the TPM counter's refusal", r.code, r.stdout, r.stderr)
	}
	r := refusedServe(t, dir, "--tpm", sock)
	if !strings.Contains(r.stderr, "older copy") || !strings.Contains(r.stderr, "--accept-audit-rollback") {
		t.Fatalf("serve of the older directory: %q, want the TPM counter's refusal", r.stderr)
	}
	f := stratumtest.ServeDev(t, dir, "--tpm", sock, "--accept-audit-rollback")
	email, password := credentials(t, dir)
	accepted := 0
	for _, ev := range auditEvents(t, f, f.Login(t, email, password).Token) {
		if ev.Kind == "audit.rollback.accepted" && ev.Data["tpmCounter"] != "" {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("%d audited acceptances of the TPM counter's refusal, want 1", accepted)
	}
	stopOK(t, f)
	f = stratumtest.ServeDev(t, dir, "--tpm", sock)
	stopOK(t, f)
}
