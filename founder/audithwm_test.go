package founder

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"stratum/crypto"
	"stratum/store"
)

func TestAuditHWMFile(t *testing.T) {
	d := DataDir(t.TempDir())
	key, _ := crypto.GenerateDataKey()
	other, _ := crypto.GenerateDataKey()
	if _, found, err := d.readAuditHWM(key); found || err != nil {
		t.Fatalf("no mark yet: found=%v err=%v", found, err)
	}
	m := hwmRecord{AuditMark: store.AuditMark{Seq: 42, Head: "abc"}, Counter: 7}
	if err := d.writeAuditHWM(key, m); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(d.AuditHWM()); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	if got, found, err := d.readAuditHWM(key); !found || err != nil || got != m {
		t.Fatalf("read back %+v %v %v", got, found, err)
	}
	if _, _, err := d.readAuditHWM(other); err == nil {
		t.Fatal("a mark opened under another data key")
	}
}

func TestCheckAuditMark(t *testing.T) {
	mark := store.AuditMark{Seq: 10, Head: "h10"}
	for _, tc := range []struct {
		name   string
		have   store.AuditMark
		refuse bool
	}{
		{"same end", mark, false},
		{"advanced", store.AuditMark{Seq: 11, Head: "h11"}, false},
		{"below", store.AuditMark{Seq: 7, Head: "h7"}, true},
		{"same sequence, other head", store.AuditMark{Seq: 10, Head: "forged"}, true},
		{"empty store", store.AuditMark{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkAuditMark(tc.have, mark, "audit.hwm")
			var rb *AuditRollbackError
			if tc.refuse != errors.As(err, &rb) {
				t.Fatalf("checkAuditMark = %v, refuse=%v", err, tc.refuse)
			}
		})
	}
}

func TestCheckHWMCounter(t *testing.T) {
	rec := hwmRecord{AuditMark: store.AuditMark{Seq: 9}, Counter: 10}
	for _, tc := range []struct {
		name    string
		rec     hwmRecord
		found   bool
		count   uint64
		defined bool
		refuse  bool
	}{
		{"in step", rec, true, 10, true, false},
		{"a crash between file and counter", rec, true, 9, true, false},
		{"first start with a TPM", hwmRecord{}, false, 0, false, false},
		{"a mark kept before the TPM", hwmRecord{AuditMark: rec.AuditMark}, true, 0, false, false},
		{"an older copy of the file", rec, true, 12, true, true},
		{"the file removed", hwmRecord{}, false, 12, true, true},
		{"a new TPM (the key resealed)", rec, true, 0, false, false},
		{"a TPM behind the file", rec, true, 3, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkHWMCounter(tc.rec, tc.found, tc.count, tc.defined, "audit.hwm", 0x01810001)
			if (err != nil) != tc.refuse {
				t.Fatalf("checkHWMCounter = %v, refuse=%v", err, tc.refuse)
			}
		})
	}
}

// TestAuditHWMCatchesUp: a mark the file system refused (a full disk, here
// a missing directory) is written once it can be, with no further audit
// event to prompt it, and the file never holds less than it did.
func TestAuditHWMCatchesUp(t *testing.T) {
	defer func(d time.Duration) { hwmRetry = d }(hwmRetry)
	hwmRetry = 20 * time.Millisecond
	parent := t.TempDir()
	d := DataDir(filepath.Join(parent, "data"))
	key, _ := crypto.GenerateDataKey()
	k := &auditKeeper{d: d, key: key, log: slog.New(slog.DiscardHandler), kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	k.advance(store.AuditMark{Seq: 5, Head: "h5"})
	time.Sleep(3 * hwmRetry)
	if _, found, _ := d.readAuditHWM(key); found {
		t.Fatal("a mark written into a missing directory")
	}
	if err := os.Mkdir(string(d), 0o700); err != nil {
		t.Fatal(err)
	}
	var got hwmRecord
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(hwmRetry) {
		if m, found, err := d.readAuditHWM(key); found && err == nil {
			got = m
			break
		}
	}
	if got.Seq != 5 || got.Head != "h5" {
		t.Fatalf("the mark did not catch up once it could be written: %+v", got)
	}
	k.advance(store.AuditMark{Seq: 3, Head: "h3"}) // lower: ignored
	k.stop()
	if m, _, err := d.readAuditHWM(key); err != nil || m.Seq != 5 {
		t.Fatalf("the mark went back: %+v %v", m, err)
	}
}

// TestAuditHWMSpacesWrites: a burst of commits is one write per
// hwmSpacing, not one per commit, and stop still leaves the last mark.
func TestAuditHWMSpacesWrites(t *testing.T) {
	defer func(d time.Duration) { hwmSpacing = d }(hwmSpacing)
	hwmSpacing = 200 * time.Millisecond
	d := DataDir(t.TempDir())
	key, _ := crypto.GenerateDataKey()
	k := &auditKeeper{d: d, key: key, log: slog.New(slog.DiscardHandler), kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	const n = 40
	for i := uint64(1); i <= n; i++ {
		k.advance(store.AuditMark{Seq: i, Head: fmt.Sprint("h", i)})
		time.Sleep(5 * time.Millisecond)
	}
	k.stop()
	if k.writes > 4 {
		t.Errorf("%d writes of the mark for %d commits in %v, want at most 4 (one per %v and the last at stop)", k.writes, n, n*5*time.Millisecond, hwmSpacing)
	}
	if m, _, err := d.readAuditHWM(key); err != nil || m.Seq != n || m.Head != fmt.Sprint("h", n) {
		t.Fatalf("the mark after stop: %+v %v, want seq %d", m, err, n)
	}
}

// TestAuditHWMStopEndsThePause: stop, while the writer pauses after a
// write, does not wait the pause out, and still writes the last mark.
func TestAuditHWMStopEndsThePause(t *testing.T) {
	defer func(d time.Duration) { hwmSpacing = d }(hwmSpacing)
	hwmSpacing = time.Hour
	d := DataDir(t.TempDir())
	key, _ := crypto.GenerateDataKey()
	k := &auditKeeper{d: d, key: key, log: slog.New(slog.DiscardHandler), kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	k.advance(store.AuditMark{Seq: 1, Head: "h1"})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m, _, err := d.readAuditHWM(key); err == nil && m.Seq == 1 {
			break // written; the writer pauses now
		}
		if time.Now().After(deadline) {
			t.Fatal("the first mark was never written")
		}
	}
	k.advance(store.AuditMark{Seq: 2, Head: "h2"})
	start := time.Now()
	k.stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stop took %v in a pause between writes", took)
	}
	if m, _, err := d.readAuditHWM(key); err != nil || m.Seq != 2 || m.Head != "h2" {
		t.Fatalf("the mark after stop: %+v %v, want seq 2", m, err)
	}
}
