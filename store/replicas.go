package store

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// What replicas sharing a PostgreSQL database need of each other: the
// notes of every commit (LISTEN/NOTIFY) and one holder of the background
// lease. On bbolt there is one process: it hears its own notes and always
// holds the lease.

// reconnectEvery paces the listener and lease connections after a loss.
const reconnectEvery = 500 * time.Millisecond

// start runs the replica goroutines of a shared database.
func (db *DB) start() {
	p, ok := db.be.(*pgBackend)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.stopped = make(chan struct{})
	listening := make(chan struct{})
	go func() {
		defer close(p.stopped)
		lease := make(chan struct{})
		go func() { defer close(lease); p.holdLease(ctx) }()
		p.listen(ctx, &db.bus, listening)
		<-lease
	}()
	// Serving before LISTEN is up would miss the first notes.
	select {
	case <-listening:
	case <-time.After(connectTimeout):
	}
}

func (p *pgBackend) connect(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return pgx.ConnectConfig(cctx, p.cfg.ConnConfig.Copy())
}

// listen delivers the notes of other replicas' commits to b. After a lost
// connection every subscriber is told to re-read (notes may have passed
// while nobody listened), and again once listening resumes.
func (p *pgBackend) listen(ctx context.Context, b *bus, ready chan struct{}) {
	once := func() { close(ready) }
	for ctx.Err() == nil {
		conn, err := p.connect(ctx)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+notifyChannel)
		}
		if err == nil {
			if once != nil {
				once()
				once = nil
			} else {
				b.deliverEverything()
			}
			for {
				n, werr := conn.WaitForNotification(ctx)
				if werr != nil {
					break
				}
				if ctx.Err() != nil {
					break
				}
				replica, rest, _ := strings.Cut(n.Payload, "\n")
				if replica == p.replica {
					continue // delivered locally at commit
				}
				topic, payload, _ := strings.Cut(rest, "\n")
				b.deliver([]note{{topic, payload}})
			}
			if ctx.Err() == nil {
				b.deliverEverything()
			}
		}
		if conn != nil {
			conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
		case <-time.After(reconnectEvery):
		}
	}
	if once != nil {
		once()
	}
}

// holdLease keeps trying the session advisory lock on its own connection;
// holding it, it checks the connection every interval and lets go (the
// server releases the lock with the session) when the check fails. Every
// foreignEvery it also looks for sessions that are not founders holding
// the cluster's locks.
func (p *pgBackend) holdLease(ctx context.Context) {
	defer p.holds.Store(false)
	var checked time.Time
	for ctx.Err() == nil {
		conn, err := p.connect(ctx)
		for err == nil && ctx.Err() == nil {
			var got bool
			qctx, cancel := context.WithTimeout(ctx, reconnectEvery*2)
			if p.holds.Load() {
				_, err = conn.Exec(qctx, "SELECT 1")
			} else {
				err = conn.QueryRow(qctx, "SELECT pg_try_advisory_lock($1)", p.locks.lease).Scan(&got)
				if got {
					p.holds.Store(true)
				}
			}
			cancel()
			if err == nil && time.Since(checked) >= foreignEvery {
				// On this connection, not the pool's: writers stalled
				// behind a foreign lock holder may hold every pooled one.
				// A slow check costs the lease only when it cost the
				// connection.
				fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
				if ferr := p.checkForeign(fctx, conn); ferr != nil && conn.IsClosed() {
					err = ferr
				}
				fcancel()
				checked = time.Now()
			}
			if err == nil {
				select {
				case <-ctx.Done():
				case <-time.After(reconnectEvery):
				}
			}
		}
		p.holds.Store(false)
		if conn != nil {
			conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
		case <-time.After(reconnectEvery):
		}
	}
}
