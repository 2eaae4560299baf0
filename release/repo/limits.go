package repo

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ReadLimits keep release reads fair (SPEC 10.8): one registration cannot
// hold every slot, and a reader that stalls or crawls gives its slot back.
// Zero fields take the defaults; tests shorten them.
type ReadLimits struct {
	PerHolder int           // reads one registration holds at once (2)
	MinRate   int64         // bytes per second a read must keep up (256 KiB)
	Window    time.Duration // over any window this long (30 s)
	MaxRead   time.Duration // and no read lasts longer (15 min)
}

// Defaults of ReadLimits.
const (
	DefaultPerHolder = 2
	DefaultMinRate   = 256 << 10
	DefaultWindow    = 30 * time.Second
	DefaultMaxRead   = 15 * time.Minute
)

func (l ReadLimits) withDefaults() ReadLimits {
	if l.PerHolder <= 0 {
		l.PerHolder = DefaultPerHolder
	}
	if l.MinRate <= 0 {
		l.MinRate = DefaultMinRate
	}
	if l.Window <= 0 {
		l.Window = DefaultWindow
	}
	if l.MaxRead <= 0 {
		l.MaxRead = DefaultMaxRead
	}
	return l
}

// samplesPerWindow is how finely the window slides: progress is sampled
// this many times per window, and each sample is compared with the one a
// whole window before it.
const samplesPerWindow = 6

var (
	errTooSlow  = errors.New("slower than the minimum rate")
	errTooLong  = errors.New("longer than the longest read")
	errShutdown = errors.New("the founder is shutting down")
)

// watch cuts the read when it falls under the minimum rate over a window
// or outlives the longest read; the founder's shutdown cancels the
// mirror's context, of which the read's is a child. Timers do it, not a
// goroutine per read (which was a share of a small range's cost): the
// sampling timer re-arms itself and so never runs twice at once, and
// neither acts once the read is closed.
func (rd *Reader) watch(start time.Time) {
	l := rd.m.limits
	every := l.Window / samplesPerWindow
	var (
		mu      sync.Mutex                  // each firing is its own goroutine
		samples [samplesPerWindow + 1]int64 // a ring of bytes sent
		n       int
		tick    atomic.Pointer[time.Timer]
	)
	sample := func() {
		if rd.isClosed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		sent := rd.sent.Load()
		oldest := samples[(n+1)%len(samples)]
		samples[n%len(samples)] = sent
		n++
		if n > samplesPerWindow && sent-oldest < l.MinRate*int64(l.Window)/int64(time.Second) {
			rd.cut(fmt.Errorf("%w: %d bytes in %s, at least %d bytes/s needed", errTooSlow, sent-oldest, l.Window, l.MinRate))
			return
		}
		if t := tick.Load(); t != nil {
			t.Reset(every)
		}
	}
	tick.Store(time.AfterFunc(every, sample))
	longest := time.AfterFunc(time.Until(start.Add(l.MaxRead)), func() {
		if !rd.isClosed() {
			rd.cut(fmt.Errorf("%w (%s)", errTooLong, l.MaxRead))
		}
	})
	rd.stopWatch = func() {
		if t := tick.Load(); t != nil {
			t.Stop()
		}
		longest.Stop()
	}
}

func (rd *Reader) isClosed() bool { return rd.closed.Load() }

// cut ends the read, once: the reason is kept (its next unit is refused
// with it) and the OnCut hook is called, which the HTTP layer uses to set
// an immediate write deadline. A cut for a limit is counted and logged.
func (rd *Reader) cut(reason error) {
	rd.cutMu.Lock()
	first := rd.cause == nil
	if first {
		rd.cause = reason
	}
	hook := rd.onCut
	rd.cutMu.Unlock()
	if !first {
		return
	}
	if !errors.Is(reason, errShutdown) {
		rd.m.cuts.Add(1)
		rd.m.log.Warn("release read cut", "holder", rd.holder, "release", rd.fi.Release, "path", rd.fi.Path, "sent", rd.sent.Load(), "reason", reason)
	}
	if hook != nil {
		hook()
	}
}

// cutCause is why the read was cut: too slow, too long, or the founder
// shutting down; nil while it was not.
func (rd *Reader) cutCause() error {
	rd.cutMu.Lock()
	defer rd.cutMu.Unlock()
	return rd.cause
}

// OnCut has f called when the read is cut (at once if it already was),
// instead of any f given before; OnCut(nil) removes it. It costs a read
// nothing (a context and its AfterFunc per read were a few percent of a
// 64 KiB range).
func (rd *Reader) OnCut(f func()) {
	rd.cutMu.Lock()
	cut := rd.cause != nil
	rd.onCut = f
	rd.cutMu.Unlock()
	if cut && f != nil {
		f()
	}
}

// Deadline is when the read ends at the latest.
func (rd *Reader) Deadline() time.Time { return rd.deadline }
