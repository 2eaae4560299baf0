package founder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"sync"

	"stratum/crypto"
	"stratum/store"
)

// The audit high-water mark (SPEC 16.3): the highest audit sequence and
// head this founder has seen, kept outside the store in DIR/audit.hwm
// (sealed under the data key, replaced atomically as the chain advances).
// A store whose chain ends below it was rolled back: an older head
// replayed after newer events were deleted, or an older backup restored.
// Everything about the mark is in this file.

// AuditHWM is the sealed high-water mark of the audit chain.
func (d DataDir) AuditHWM() string { return d.path("audit.hwm") }

// hwmAD binds the sealed mark to its purpose.
var hwmAD = []byte("stratum audit.hwm v1")

// readAuditHWM returns the mark, or found=false when there is none yet.
func (d DataDir) readAuditHWM(key *crypto.DataKey) (m store.AuditMark, found bool, err error) {
	ct, err := crypto.ReadFileLimit(d.AuditHWM(), 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	pt, err := key.Open(ct, hwmAD)
	if err != nil {
		return m, true, fmt.Errorf("%s does not open under this founder's data key: it was replaced or damaged (remove it only if you know why)", d.AuditHWM())
	}
	if err := json.Unmarshal(pt, &m); err != nil {
		return m, true, fmt.Errorf("%s: %w", d.AuditHWM(), err)
	}
	return m, true, nil
}

func (d DataDir) writeAuditHWM(key *crypto.DataKey, m store.AuditMark) error {
	pt, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ct, err := key.Seal(pt, hwmAD)
	if err != nil {
		return err
	}
	return crypto.WriteFileAtomic(d.AuditHWM(), ct, 0o600)
}

// AuditRollbackError says the store's chain ends below the mark.
type AuditRollbackError struct {
	Store, Mark store.AuditMark
	Where       string
}

func (e *AuditRollbackError) Error() string {
	if e.Store.Seq == e.Mark.Seq {
		return fmt.Sprintf("the store's audit chain ends at event %d, but its head differs from the one this founder saw at event %d (%s): the chain was rewritten or an older store replayed; if you restored an older backup on purpose, start once with --accept-audit-rollback",
			e.Store.Seq, e.Mark.Seq, e.Where)
	}
	return fmt.Sprintf("the store's audit chain ends at event %d, below event %d that this founder has already seen (%s): the store was rolled back (newer events removed, or an older backup restored); if you restored an older backup on purpose, start once with --accept-audit-rollback",
		e.Store.Seq, e.Mark.Seq, e.Where)
}

// checkAuditMark refuses a store end below the mark (or equal in
// sequence with another head).
func checkAuditMark(have, mark store.AuditMark, where string) error {
	if have.Seq < mark.Seq || (have.Seq == mark.Seq && have.Head != mark.Head) {
		return &AuditRollbackError{Store: have, Mark: mark, Where: where}
	}
	return nil
}

// CheckAuditHWM compares a store's chain end with the directory's mark
// (audit verify of a stopped founder).
func (d DataDir) CheckAuditHWM(key *crypto.DataKey, have store.AuditMark) error {
	mark, found, err := d.readAuditHWM(key)
	if err != nil || !found {
		return err
	}
	return checkAuditMark(have, mark, d.AuditHWM())
}

// auditKeeper holds the mark while the founder serves: the store tells it
// of each committed advance, and it rewrites the file behind the writes.
type auditKeeper struct {
	d   DataDir
	key *crypto.DataKey
	log *slog.Logger

	mu      sync.Mutex
	mark    store.AuditMark // the highest seen
	written uint64          // the sequence on disk
	stopped bool
	kick    chan struct{}
	done    chan struct{}
}

// guardAuditRollback runs at start, before anything is served: it
// refuses a store below the mark unless accept is set, in which case the
// rollback is audited and the mark follows the store. It then keeps the
// mark as the chain advances.
func (f *Founder) guardAuditRollback(accept bool) error {
	d, key := f.opts.Data, f.dataKey
	have, err := f.db.AuditMark()
	if err != nil {
		return err
	}
	mark, found, err := d.readAuditHWM(key)
	if err != nil && !accept {
		return err
	}
	if found && err == nil {
		if rerr := checkAuditMark(have, mark, d.AuditHWM()); rerr != nil {
			if !accept {
				return rerr
			}
			if err := f.db.Update(func(tx *store.Tx) error {
				return tx.Audit("audit.rollback.accepted", "operator (--accept-audit-rollback)", "audit", map[string]string{
					"storeSeq": strconv.FormatUint(have.Seq, 10), "markSeq": strconv.FormatUint(mark.Seq, 10),
				})
			}); err != nil {
				return err
			}
			f.log.Warn("audit rollback accepted: the store's chain ended below this founder's high-water mark",
				"storeSeq", have.Seq, "markSeq", mark.Seq)
			if have, err = f.db.AuditMark(); err != nil {
				return err
			}
		}
	} else if !found && have.Seq > 0 {
		f.log.Info("no audit high-water mark yet; starting one", "file", d.AuditHWM(), "seq", have.Seq)
	}
	k := &auditKeeper{d: d, key: key, log: f.log, mark: have, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if err := d.writeAuditHWM(key, have); err != nil {
		return fmt.Errorf("write the audit high-water mark: %w", err)
	}
	k.written = have.Seq
	f.db.OnAudit(k.advance)
	go k.run()
	f.closers = append(f.closers, k.stop)
	f.auditMark = k
	return nil
}

func (k *auditKeeper) advance(m store.AuditMark) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m.Seq > k.mark.Seq {
		k.mark = m
	}
	if k.stopped {
		return
	}
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// current is the highest mark seen.
func (k *auditKeeper) current() store.AuditMark {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.mark
}

func (k *auditKeeper) run() {
	defer close(k.done)
	for range k.kick {
		k.flush()
	}
	k.flush()
}

func (k *auditKeeper) flush() {
	m := k.current()
	if m.Seq <= k.written {
		return
	}
	if err := k.d.writeAuditHWM(k.key, m); err != nil {
		k.log.Error("writing the audit high-water mark failed", "file", k.d.AuditHWM(), "err", err)
		return
	}
	k.written = m.Seq
}

// stop writes the last mark and ends the writer.
func (k *auditKeeper) stop() {
	k.mu.Lock()
	if !k.stopped {
		k.stopped = true
		close(k.kick)
	}
	k.mu.Unlock()
	<-k.done
}

// checkAuditMarkLive compares the serving store's end with the mark held
// in memory (audit verify through the control socket).
func (f *Founder) checkAuditMarkLive() error {
	if f.auditMark == nil {
		return nil
	}
	have, err := f.db.AuditMark()
	if err != nil {
		return err
	}
	return checkAuditMark(have, f.auditMark.current(), f.opts.Data.AuditHWM())
}
