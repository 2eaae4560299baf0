package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL backend (SPEC section 13): several founder replicas share
// one database. Every bucket is rows of one table; the meaning of the Tx
// API is bbolt's:
//
//   - Write transactions run one at a time across every replica: each takes
//     the transaction-scoped advisory lock locks.writer first. That is what
//     makes "one join at a time" and "the audit chain appended in order"
//     hold cluster-wide without a rule of their own. Writers run in READ
//     COMMITTED, so after the lock they read every earlier commit (a
//     REPEATABLE READ snapshot would predate the lock wait).
//   - Read transactions are REPEATABLE READ READ ONLY: one snapshot, like a
//     bbolt View, and they never wait for the writer.
//   - A commit returns after PostgreSQL made it durable (synchronous_commit
//     is the server's to keep on); a failure before the commit leaves
//     nothing. Serialization failures and deadlocks are retried.
const (
	// bootstrapLock serializes creating the tables of an empty database,
	// before anything is stored; a database whose tables exist never takes
	// it. The writer and lease locks' ids are derived (see lockIDs).
	bootstrapLock int64 = 0x5354524154554d00 // "STRATUM\x00"
	// applicationName marks a founder's sessions in pg_stat_activity
	// unless the DSN names one of its own.
	applicationName = "stratum-founder"
	// notifyChannel carries Tx.Notify notes to the other replicas.
	notifyChannel = "stratum"
	// txTimeout bounds one transaction, so a hung database answers
	// UNAVAILABLE instead of holding requests forever.
	txTimeout = 60 * time.Second
	scanPage  = 256
	// defaultMaxConns is the pool size unless the DSN sets pool_max_conns.
	defaultMaxConns = 16
	// connectTimeout bounds reaching the database at start.
	connectTimeout = 10 * time.Second
)

const pgTables = `
CREATE TABLE IF NOT EXISTS stratum_kv (
	bucket text NOT NULL,
	key bytea NOT NULL,
	value bytea NOT NULL,
	PRIMARY KEY (bucket, key)
);
CREATE TABLE IF NOT EXISTS stratum_seq (
	bucket text PRIMARY KEY,
	value bigint NOT NULL
);`

type pgBackend struct {
	// locks are the advisory lock ids of this cluster; zero when the store
	// was opened without the data key (read-only), which never writes.
	locks   lockIDs
	pool    *pgxpool.Pool
	cfg     *pgxpool.Config
	host    string
	replica string // this process, so it skips its own notes
	holds   atomic.Bool
	stop    context.CancelFunc
	stopped chan struct{}
	// foreign is what the last check found holding this cluster's locks
	// that is not a founder session ([]ForeignHolder).
	foreign atomic.Value
}

// pgWhere names the database without user or password.
func pgWhere(cfg *pgconn.Config) string {
	return fmt.Sprintf("postgres://%s/%s", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), cfg.Database)
}

// scrub removes the password from a message, whatever pgx put in it.
func scrub(msg string, cfg *pgconn.Config) string {
	if cfg != nil && cfg.Password != "" {
		msg = strings.ReplaceAll(msg, cfg.Password, "xxxxx")
	}
	return msg
}

func openPostgres(dsn string, sealer Sealer) (*pgBackend, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx quotes the DSN it failed on; never echo a password.
		return nil, errors.New("store: the --store DSN does not parse (want postgres://USER:PASSWORD@HOST:PORT/DATABASE)")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// pgx's default (4 on this hardware) queues readers behind each
		// other; writers are serialized by the lock anyway.
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = applicationName
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	p := &pgBackend{cfg: cfg, host: pgWhere(&cfg.ConnConfig.Config), replica: hex.EncodeToString(id)}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("store: cannot reach PostgreSQL at %s: %s", p.host, scrub(err.Error(), &cfg.ConnConfig.Config))
	}
	p.pool = pool
	if err := p.createTables(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: create tables at %s: %s", p.host, scrub(err.Error(), &cfg.ConnConfig.Config))
	}
	if sealer != nil {
		if p.locks, err = deriveLockIDs(sealer); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return p, nil
}

// createTables makes the tables of an empty database under the bootstrap
// lock, so replicas starting together do not race on the catalog. A
// database that has them takes no lock: an id every build knows must not
// be one a neighbour can hold to stall a running cluster.
func (p *pgBackend) createTables(ctx context.Context) error {
	var have bool
	err := p.pool.QueryRow(ctx, "SELECT to_regclass('stratum_kv') IS NOT NULL AND to_regclass('stratum_seq') IS NOT NULL").Scan(&have)
	if err != nil || have {
		return err
	}
	return pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", bootstrapLock); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, pgTables)
		return err
	})
}

func (p *pgBackend) where() string { return p.host }

func (p *pgBackend) close() error {
	if p.stop != nil {
		p.stop()
		<-p.stopped
	}
	p.pool.Close()
	return nil
}

// retryable: the transaction lost a serialization race or a deadlock, or
// failed before anything reached the server.
func retryable(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40001" || pg.Code == "40P01"
	}
	return pgconn.SafeToRetry(err)
}

// classify turns a lost connection into ErrUnavailable; errors of the
// domain (returned by fn) pass through unchanged.
func (p *pgBackend) classify(err error) error {
	if err == nil {
		return nil
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		// 08: connection exception; 57P0x: the server shuts down or starts.
		if strings.HasPrefix(pg.Code, "08") || strings.HasPrefix(pg.Code, "57P") {
			return fmt.Errorf("%w: %s: %s", ErrUnavailable, p.host, scrub(pg.Message, &p.cfg.ConnConfig.Config))
		}
		return fmt.Errorf("store: %s: %s (SQLSTATE %s)", p.host, scrub(pg.Message, &p.cfg.ConnConfig.Config), pg.Code)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || isNetError(err) {
		return fmt.Errorf("%w: %s: %s", ErrUnavailable, p.host, scrub(err.Error(), &p.cfg.ConnConfig.Config))
	}
	return err
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF")
}

// pgFnError marks an error returned by fn itself, which is never retried
// or reclassified.
type pgFnError struct{ err error }

func (e pgFnError) Error() string { return e.err.Error() }
func (e pgFnError) Unwrap() error { return e.err }

func (p *pgBackend) update(fn func(kv) error) error {
	return p.run(pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, true, fn)
}

func (p *pgBackend) batch(fn func(kv) error) error { return p.update(fn) }

func (p *pgBackend) view(fn func(kv) error) error {
	return p.run(pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, false, fn)
}

func (p *pgBackend) run(opts pgx.TxOptions, write bool, fn func(kv) error) error {
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt*attempt) * 5 * time.Millisecond)
		}
		err = p.attempt(opts, write, fn)
		var fe pgFnError
		if errors.As(err, &fe) {
			if retryable(fe.err) {
				continue // a statement inside fn lost a serialization race
			}
			return p.classify(fe.err)
		}
		if err == nil || !retryable(err) {
			return p.classify(err)
		}
	}
	return p.classify(err)
}

func (p *pgBackend) attempt(opts pgx.TxOptions, write bool, fn func(kv) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	tx, err := p.pool.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if write {
		if p.locks.writer == 0 {
			return pgFnError{errNoSealer}
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", p.locks.writer); err != nil {
			return err
		}
	}
	if err := fn(pgTx{ctx: ctx, tx: tx, write: write, be: p}); err != nil {
		return pgFnError{err}
	}
	return tx.Commit(ctx)
}

type pgTx struct {
	ctx   context.Context
	tx    pgx.Tx
	write bool
	be    *pgBackend
}

func (t pgTx) writable() bool { return t.write }

// err wraps a statement failure: a lost connection reads as unavailable;
// a retryable failure is kept as it is for run to see.
func (t pgTx) err(err error) error {
	if err == nil || retryable(err) {
		return err
	}
	return t.be.classify(err)
}

func (t pgTx) createBucket(string) error {
	if !t.write {
		return ErrReadOnly
	}
	return nil // buckets are rows of one table
}

func (t pgTx) get(bucket string, key []byte) ([]byte, error) {
	var v []byte
	err := t.tx.QueryRow(t.ctx, "SELECT value FROM stratum_kv WHERE bucket = $1 AND key = $2", bucket, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, t.err(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

var errKeyRequired = errors.New("store: key required")

func (t pgTx) put(bucket string, key, value []byte) error {
	if !t.write {
		return ErrReadOnly
	}
	if len(key) == 0 {
		return errKeyRequired
	}
	if value == nil {
		value = []byte{}
	}
	_, err := t.tx.Exec(t.ctx, `INSERT INTO stratum_kv (bucket, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value`, bucket, key, value)
	return t.err(err)
}

func (t pgTx) del(bucket string, key []byte) error {
	if !t.write {
		return ErrReadOnly
	}
	_, err := t.tx.Exec(t.ctx, "DELETE FROM stratum_kv WHERE bucket = $1 AND key = $2", bucket, key)
	return t.err(err)
}

func (t pgTx) delPrefix(bucket string, prefix []byte) error {
	if !t.write {
		return ErrReadOnly
	}
	var err error
	if end := prefixEnd(prefix); end != nil {
		_, err = t.tx.Exec(t.ctx, "DELETE FROM stratum_kv WHERE bucket = $1 AND key >= $2 AND key < $3", bucket, prefix, end)
	} else {
		_, err = t.tx.Exec(t.ctx, "DELETE FROM stratum_kv WHERE bucket = $1 AND key >= $2", bucket, prefix)
	}
	return t.err(err)
}

// prefixEnd is the least key greater than every key starting with
// prefix, or nil when there is none (a prefix of 0xff bytes).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// scan reads a page at a time, so fn may run statements of its own (a
// pgx connection cannot while rows are open) and a large bucket never
// sits in memory whole.
func (t pgTx) scan(bucket string, from []byte, fn func(k, v []byte) (bool, error)) error {
	if from == nil {
		from = []byte{}
	}
	query := "SELECT key, value FROM stratum_kv WHERE bucket = $1 AND key >= $2 ORDER BY key LIMIT $3"
	for {
		rows, err := t.tx.Query(t.ctx, query, bucket, from, scanPage)
		if err != nil {
			return t.err(err)
		}
		type pair struct{ k, v []byte }
		var page []pair
		for rows.Next() {
			var kv pair
			if err := rows.Scan(&kv.k, &kv.v); err != nil {
				rows.Close()
				return t.err(err)
			}
			page = append(page, kv)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.err(err)
		}
		for _, kv := range page {
			more, err := fn(kv.k, kv.v)
			if err != nil || !more {
				return err
			}
		}
		if len(page) < scanPage {
			return nil
		}
		from = page[len(page)-1].k
		query = "SELECT key, value FROM stratum_kv WHERE bucket = $1 AND key > $2 ORDER BY key LIMIT $3"
	}
}

func (t pgTx) last(bucket string) ([]byte, []byte, error) {
	var k, v []byte
	err := t.tx.QueryRow(t.ctx, "SELECT key, value FROM stratum_kv WHERE bucket = $1 ORDER BY key DESC LIMIT 1", bucket).Scan(&k, &v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	return k, v, t.err(err)
}

func (t pgTx) nextSequence(bucket string) (uint64, error) {
	if !t.write {
		return 0, ErrReadOnly
	}
	var n int64
	err := t.tx.QueryRow(t.ctx, `INSERT INTO stratum_seq (bucket, value) VALUES ($1, 1)
		ON CONFLICT (bucket) DO UPDATE SET value = stratum_seq.value + 1 RETURNING value`, bucket).Scan(&n)
	return uint64(n), t.err(err)
}

func (t pgTx) sequence(bucket string) (uint64, error) {
	var n int64
	err := t.tx.QueryRow(t.ctx, "SELECT value FROM stratum_seq WHERE bucket = $1", bucket).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return uint64(n), t.err(err)
}

// announce queues one NOTIFY per note; PostgreSQL delivers them at commit
// and drops them on rollback.
func (t pgTx) announce(notes []note) error {
	for _, n := range notes {
		if _, err := t.tx.Exec(t.ctx, "SELECT pg_notify($1, $2)", notifyChannel, t.be.replica+"\n"+n.topic+"\n"+n.payload); err != nil {
			return t.err(err)
		}
	}
	return nil
}
