package founder

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"sync"
	"syscall"
	"time"

	"stratum/crypto"
	"stratum/store"
	"stratum/tpm"
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

// hwmRecord is the sealed content of audit.hwm.
type hwmRecord struct {
	store.AuditMark
	// Counter is the TPM NV counter's value once this record was written
	// (with --tpm): an older copy of the file has a lower one.
	Counter uint64 `json:"counter,omitempty"`
	// Schema is the store's schema level this founder ran at: a store
	// found below it was set back, and is refused before any migration
	// runs (see store.SchemaFloor).
	Schema int `json:"schema,omitempty"`
}

// schemaFloor is the Open option that refuses a store set back below the
// level the mark records (none without a readable mark, or when the
// operator accepts a rollback: guardAuditRollback judges those). Every
// command that opens (and so migrates) a founder's store passes it.
func (d DataDir) schemaFloor(key *crypto.DataKey, accept bool) []store.OpenOption {
	rec, found, err := d.readAuditHWM(key)
	if accept || err != nil || !found {
		return nil
	}
	return []store.OpenOption{store.SchemaFloor(rec.Schema)}
}

// readAuditHWM returns the mark, or found=false when there is none yet.
func (d DataDir) readAuditHWM(key *crypto.DataKey) (m hwmRecord, found bool, err error) {
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

func (d DataDir) writeAuditHWM(key *crypto.DataKey, m hwmRecord) error {
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
// (audit verify of a stopped founder); with tpmPath, also with the TPM's
// counter of the cluster.
func (d DataDir) CheckAuditHWM(key *crypto.DataKey, have store.AuditMark, tpmPath, clusterID string) error {
	mark, found, err := d.readAuditHWM(key)
	if err != nil {
		return err
	}
	if tpmPath != "" {
		c := tpm.NewCounter(tpmPath, hwmCounterIndex(clusterID))
		count, defined, err := c.Read()
		if err != nil {
			return fmt.Errorf("the audit high-water mark's TPM counter: %w", err)
		}
		if err := checkHWMCounter(mark, found, count, defined, d.AuditHWM(), c.Index()); err != nil {
			return err
		}
	}
	if !found {
		return nil
	}
	return checkAuditMark(have, mark.AuditMark, d.AuditHWM())
}

// auditKeeper holds the mark while the founder serves: the store tells it
// of each committed advance, and it rewrites the file behind the writes.
type auditKeeper struct {
	d   DataDir
	key *crypto.DataKey
	log *slog.Logger

	// counter, with --tpm, counts the file's writes in the TPM; count is
	// its value.
	counter *tpm.Counter
	count   uint64

	mu      sync.Mutex
	mark    store.AuditMark // the highest seen
	written uint64          // the sequence on disk
	stopped bool
	kick    chan struct{}
	quit    chan struct{} // closed by stop: a pause between writes ends
	done    chan struct{}

	// failing: the last write failed (a full disk); the writer retries
	// every hwmRetry until one succeeds, and logs only the changes.
	failing bool
	// writes counts the file's replacements.
	writes int
}

// hwmRetry is how soon a failed write of the mark is tried again.
var hwmRetry = 5 * time.Second

// hwmSpacing is the least time between two writes of the mark while the
// chain advances: the mark may trail the store by that much (a trailing
// mark is accepted at start; only a store below it is refused), and stop
// writes the last one. A second, not less: a rack joining commits every
// few milliseconds for minutes, every member's report of each join
// included, and each write of the mark costs the founder an fsync of a
// new file and its directory (and, with --tpm, a count in the TPM's NV
// memory, which wears).
var hwmSpacing = time.Second

// noSpace is a write the file system refused for want of space: a full
// disk the operator will free, not a broken founder.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
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
	rec, found, err := d.readAuditHWM(key)
	if err != nil && !accept {
		return err
	}
	var counter *tpm.Counter
	var count uint64
	if f.opts.Keys.TPM != "" {
		c := tpm.NewCounter(f.opts.Keys.TPM, hwmCounterIndex(f.id.ClusterID))
		counter = &c
		var defined bool
		if count, defined, err = c.Read(); err != nil {
			return fmt.Errorf("the audit high-water mark's TPM counter: %w", err)
		}
		if found && rec.Counter != 0 && !defined {
			// The key was resealed to a new TPM (tpm recover): its counter
			// starts now.
			f.log.Warn("this TPM has no audit high-water mark counter yet, though the mark was counted before (a new TPM?); starting one",
				"file", d.AuditHWM(), "index", fmt.Sprintf("0x%08x", c.Index()), "markCounter", rec.Counter)
		}
		if cerr := checkHWMCounter(rec, found, count, defined, d.AuditHWM(), c.Index()); cerr != nil {
			if !accept {
				return cerr
			}
			f.log.Warn("audit high-water mark does not match the TPM counter; accepted", "err", cerr)
			if err := f.db.Update(func(tx *store.Tx) error {
				return tx.Audit("audit.rollback.accepted", "operator (--accept-audit-rollback)", "audit", map[string]string{
					"storeSeq": strconv.FormatUint(have.Seq, 10), "markSeq": strconv.FormatUint(rec.Seq, 10),
					"markCounter": strconv.FormatUint(rec.Counter, 10), "tpmCounter": strconv.FormatUint(count, 10),
				})
			}); err != nil {
				return err
			}
			if have, err = f.db.AuditMark(); err != nil {
				return err
			}
			found = false // the store and the TPM set the mark anew
		}
	}
	mark := rec.AuditMark
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
	k := &auditKeeper{d: d, key: key, log: f.log, mark: have, counter: counter, count: count, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	switch {
	case found && err == nil && rec.AuditMark == have && (counter == nil || rec.Counter == count):
		// The file already holds the store's end: nothing to write (a
		// founder restarted on a full disk starts).
		k.written = have.Seq
	default:
		werr := k.write(have)
		if werr == nil {
			break
		}
		if !noSpace(werr) {
			return fmt.Errorf("write the audit high-water mark: %w", werr)
		}
		// A full disk: the file keeps the mark checked above (never
		// lower than it was), and the writer catches up once space
		// returns. The store refuses its own writes meanwhile.
		k.failing = true
		f.log.Error("the disk is full: the audit high-water mark stays as it is on disk until space returns, then catches up",
			"file", d.AuditHWM(), "storeSeq", have.Seq, "err", werr)
	}
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
	var retry <-chan time.Time
	if k.failing {
		retry = time.After(hwmRetry)
	}
	for {
		select {
		case _, open := <-k.kick:
			if !open {
				k.flush()
				return
			}
		case <-retry:
		}
		retry = nil
		before := k.written
		if !k.flush() {
			retry = time.After(hwmRetry)
			continue
		}
		if k.written != before {
			// Commits in the next hwmSpacing share one write: a burst of
			// registrations commits dozens of times a second, and each
			// write replaces and fsyncs the file (and, with --tpm,
			// increments the TPM's counter). A kick meanwhile waits in
			// the channel; stop ends the pause (quit) and its close of
			// the channel is seen next.
			pause := time.NewTimer(hwmSpacing)
			select {
			case <-pause.C:
			case <-k.quit:
				pause.Stop()
			}
		}
	}
}

// flush writes the highest mark seen if the file is behind it, and says
// whether the file is now up to date.
func (k *auditKeeper) flush() bool {
	m := k.current()
	if m.Seq <= k.written && !k.failing {
		return true
	}
	if err := k.write(m); err != nil {
		if !k.failing {
			k.log.Error("writing the audit high-water mark failed; retrying", "file", k.d.AuditHWM(), "seq", m.Seq, "err", err)
		}
		k.failing = true
		return false
	}
	if k.failing {
		k.log.Info("the audit high-water mark is written again", "file", k.d.AuditHWM(), "seq", m.Seq)
	}
	k.failing = false
	return true
}

// write replaces the file with m and, with a TPM, counts the write: the
// file names the counter's next value before the counter moves, so a
// crash between the two leaves a file one ahead (accepted at start), and
// any older copy of the file is behind the counter.
func (k *auditKeeper) write(m store.AuditMark) error {
	rec := hwmRecord{AuditMark: m, Schema: store.SchemaVersion()}
	if k.counter != nil {
		rec.Counter = k.count + 1
	}
	if err := k.d.writeAuditHWM(k.key, rec); err != nil {
		return err
	}
	if k.counter != nil {
		v, err := k.counter.Increment()
		if err != nil {
			return err
		}
		if v != rec.Counter {
			// A new index starts where the TPM's counters left off.
			rec.Counter = v
			if err := k.d.writeAuditHWM(k.key, rec); err != nil {
				return err
			}
		}
		k.count = v
	}
	k.written = m.Seq
	k.writes++
	return nil
}

// hwmCounterIndex is the NV index of a cluster's counter, in the owner
// range: fixed by the cluster, so a removed mark file is noticed.
func hwmCounterIndex(clusterID string) uint32 {
	sum := sha256.Sum256([]byte("stratum audit.hwm " + clusterID))
	return 0x01810000 | uint32(binary.BigEndian.Uint16(sum[:2]))
}

// checkHWMCounter compares the mark file with the TPM's counter.
func checkHWMCounter(rec hwmRecord, found bool, count uint64, defined bool, file string, index uint32) error {
	hint := "; if you restored an older data directory on purpose, start once with --accept-audit-rollback"
	switch {
	case !found && defined:
		return fmt.Errorf("%s is missing, yet the TPM's counter 0x%08x for this cluster is at %d: the mark was removed%s", file, index, count, hint)
	case found && defined && rec.Counter < count:
		return fmt.Errorf("%s was written at TPM counter %d, but the TPM's counter 0x%08x is at %d: the file is an older copy (events %d and later may have been removed from the store with it)%s", file, rec.Counter, index, count, rec.Seq+1, hint)
	case found && defined && rec.Counter > count+1:
		return fmt.Errorf("%s was written at TPM counter %d, ahead of the TPM's counter 0x%08x at %d: another TPM%s", file, rec.Counter, index, count, hint)
	}
	return nil
}

// stop writes the last mark and ends the writer.
func (k *auditKeeper) stop() {
	k.mu.Lock()
	if !k.stopped {
		k.stopped = true
		close(k.kick)
		close(k.quit)
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
