package store

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// groupCommit runs concurrent Batch calls on bbolt in shared read-write
// transactions, one commit and one fsync for each group. A call that
// finds no commit running starts one at once; calls that arrive while a
// commit runs wait for it and share the next. bbolt's own DB.Batch waits
// up to MaxBatchDelay (10 ms) for a batch to fill: with 32 clients each
// waiting on its commit, that delay, not the CPU, bounded how many
// records a second the founder took.
//
// Under a storm (the commit just made was shared) the next commit waits
// up to lingerMax for lingerCalls calls before it starts: with 32 record
// clients, calls arriving during a commit made groups of two or three,
// and a commit's own CPU (bbolt rewrites the whole leaf a record lands
// in, with the records already there; two fsyncs, the meta page, the
// freelist) was spent for so few. A lone call
// and the first call after a quiet spell still commit at once, and no
// call waits longer than lingerMax more than it did.
//
// Failures keep DB.Batch's contract: a call whose fn fails (or panics) is
// taken out and run alone in its own transaction, in its own goroutine
// (so its error, or its panic, is its own), and the others are committed
// again without it.
type groupCommit struct {
	db *bolt.DB

	mu      sync.Mutex
	pending []*groupCall
	running bool
	// filled wakes a lingering commit when lingerCalls calls wait.
	filled chan struct{}
}

// How long, and for how many calls, a commit after a shared one waits.
var (
	lingerMax   = 2 * time.Millisecond
	lingerCalls = 16
)

// commitObserver, when set (by tests), is told each group's size.
var commitObserver func(calls int)

type groupCall struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// errRunAlone tells a call to run its fn in a transaction of its own.
var errRunAlone = errors.New("store: run the call alone")

func (g *groupCommit) do(fn func(*bolt.Tx) error) error {
	c := &groupCall{fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if !g.running {
		g.running = true
		go g.run()
	} else if len(g.pending) == lingerCalls {
		select {
		case g.filled <- struct{}{}:
		default:
		}
	}
	g.mu.Unlock()
	err := <-c.done
	if err == errRunAlone {
		return g.db.Update(fn)
	}
	return err
}

// run commits the pending calls, group after group, until none wait.
func (g *groupCommit) run() {
	shared := false
	for {
		// Let the goroutines runnable now go first: on a busy machine
		// some are requests on their way to a Batch call, and join this
		// group instead of making the next commit (registrations of 64
		// joiners at once: 8 a commit instead of 5, a third fewer fsyncs
		// and page writes a registration). With no one else to run this
		// returns at once.
		runtime.Gosched()
		if shared {
			g.linger()
		}
		g.mu.Lock()
		calls := g.pending
		g.pending = nil
		if len(calls) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.commit(calls)
		shared = len(calls) > 1
	}
}

// linger waits, at most lingerMax, until lingerCalls calls are pending,
// if any is: with none, the run ends and the next call starts one at once.
func (g *groupCommit) linger() {
	g.mu.Lock()
	select {
	case <-g.filled: // a signal from before: the count below decides
	default:
	}
	n := len(g.pending)
	g.mu.Unlock()
	if n == 0 || n >= lingerCalls {
		return // none to wait with (a call arriving now starts at once), or enough
	}
	t := time.NewTimer(lingerMax)
	defer t.Stop()
	select {
	case <-g.filled:
	case <-t.C:
	}
}

func (g *groupCommit) commit(calls []*groupCall) {
	if commitObserver != nil {
		commitObserver(len(calls))
	}
	for len(calls) > 0 {
		failed := -1
		err := g.db.Update(func(tx *bolt.Tx) error {
			for i, c := range calls {
				if err := safelyCall(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			calls[failed].done <- errRunAlone
			calls = append(calls[:failed:failed], calls[failed+1:]...)
			continue
		}
		for _, c := range calls {
			c.done <- err
		}
		return
	}
}

// safelyCall is fn(tx), a panic turned into an error (the call then runs
// alone, where the panic is its caller's).
func safelyCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: panic in a batched transaction: %v", p)
		}
	}()
	return fn(tx)
}
