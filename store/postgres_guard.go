package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL as a shared neighbour (SPEC 16.7): other roles of the same
// server can connect to the cluster's database when PUBLIC may, send notes
// on its channel and take advisory locks by number. The notes are hints
// only (their readers re-read the store); the lock ids are this cluster's
// own; a lock held by a session that is not a founder is reported.

// lockIDs are the advisory lock ids of one cluster.
type lockIDs struct {
	writer int64 // transaction-scoped, taken by every write transaction
	lease  int64 // session-scoped, held by the replica doing background work
}

// deriveLockIDs derives the cluster's lock ids from its data key (every
// replica holds the same key; no other role of the server does). Ids a
// neighbour cannot compute cannot be taken ahead of the founders; one it
// reads from pg_locks while held is reported (checkForeign).
func deriveLockIDs(sealer Sealer) (lockIDs, error) {
	d, ok := sealer.(keyDeriver)
	if !ok {
		return lockIDs{}, errors.New("store: a shared database needs the data key to derive its lock ids")
	}
	key, err := d.DeriveKey("postgres advisory locks v1")
	if err != nil {
		return lockIDs{}, err
	}
	id := func(name string) int64 {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(name))
		v := int64(binary.BigEndian.Uint64(m.Sum(nil)))
		if v == 0 || v == bootstrapLock {
			v = 1 // never the "none" value, never the public bootstrap id
		}
		return v
	}
	return lockIDs{writer: id("writer"), lease: id("lease")}, nil
}

// PublicConnect reports whether PUBLIC holds CONNECT on the store's
// database (PostgreSQL grants it on every new database), with the
// statement that takes it away. On bbolt there is no neighbour: false.
func (db *DB) PublicConnect() (bool, string, error) {
	p, ok := db.be.(*pgBackend)
	if !ok {
		return false, "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	var name string
	var public bool
	err := p.pool.QueryRow(ctx, `SELECT d.datname, EXISTS (
		SELECT 1 FROM aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
		WHERE a.grantee = 0 AND a.privilege_type = 'CONNECT')
		FROM pg_database d WHERE d.datname = current_database()`).Scan(&name, &public)
	if err != nil {
		return false, "", p.classify(err)
	}
	return public, fmt.Sprintf("REVOKE CONNECT ON DATABASE %s FROM PUBLIC;", pgx.Identifier{name}.Sanitize()), nil
}

// ForeignHolder is a database session that is not a founder's holding one
// of the cluster's advisory locks: write transactions wait behind it (the
// writer lock) or background work stops (the lease).
type ForeignHolder struct {
	Lock        string    `json:"lock"` // "writer" or "lease"
	PID         int       `json:"pid"`
	User        string    `json:"user"`
	Application string    `json:"application"`
	Since       time.Time `json:"since"`
}

// ForeignHolders is what the last check (every couple of seconds, on each
// replica) found; empty on bbolt and when all is well.
func (db *DB) ForeignHolders() []ForeignHolder {
	if p, ok := db.be.(*pgBackend); ok {
		if v, _ := p.foreign.Load().([]ForeignHolder); v != nil {
			return v
		}
	}
	return nil
}

// foreignEvery paces the check for foreign lock holders.
const foreignEvery = 2 * time.Second

// checkForeign lists the sessions holding this cluster's lock ids whose
// role is not this replica's or whose application name is not a
// founder's. A session of the founders' own role with their application
// name is one of them: whoever holds that role's password is beyond what
// a lock check can see. A holder that stays keeps its first-seen time.
func (p *pgBackend) checkForeign(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT l.classid::bigint, l.objid::bigint, l.pid,
		coalesce(a.usename::text, ''), coalesce(a.application_name, ''), current_user::text
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		return err
	}
	defer rows.Close()
	app := p.cfg.ConnConfig.RuntimeParams["application_name"]
	var now []ForeignHolder
	for rows.Next() {
		var hi, lo int64
		var h ForeignHolder
		var me string
		if err := rows.Scan(&hi, &lo, &h.PID, &h.User, &h.Application, &me); err != nil {
			return err
		}
		id := int64(uint64(hi)<<32 | uint64(lo))
		switch id {
		case p.locks.writer:
			h.Lock = "writer"
		case p.locks.lease:
			h.Lock = "lease"
		default:
			continue
		}
		if h.User == me && h.Application == app {
			continue
		}
		now = append(now, h)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	before, _ := p.foreign.Load().([]ForeignHolder)
	for i, h := range now {
		now[i].Since = time.Now()
		for _, b := range before {
			if b.PID == h.PID && b.Lock == h.Lock {
				now[i].Since = b.Since
			}
		}
	}
	p.foreign.Store(now)
	return nil
}
