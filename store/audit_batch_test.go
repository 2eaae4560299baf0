package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestAuditBatchedCallsChain: concurrent Batch calls share commits, each
// appending an event in a Tx of its own (the next one links to it from
// the remembered link, not by hashing it again); every third call fails
// after its event, so its group is committed again without it, and the
// link remembered from the discarded event must not be taken for the
// event that replaced it at the same sequence. The chain verifies, and
// holds exactly the events of the calls that succeeded.
func TestAuditBatchedCallsChain(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	errRefused := errors.New("refused after auditing")
	const calls = 60
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			err := db.Batch(func(tx *Tx) error {
				if err := tx.Audit("test.batched", "tester", fmt.Sprint(i), nil); err != nil {
					return err
				}
				if i%3 == 0 {
					return errRefused
				}
				return nil
			})
			if (i%3 == 0) != errors.Is(err, errRefused) {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	n, err := db.VerifyAudit()
	if err != nil || n != calls-calls/3 {
		t.Fatalf("VerifyAudit = %d, %v; want %d, nil", n, err, calls-calls/3)
	}
	evs, err := db.AuditEvents(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		seen[ev.Subject] = true
	}
	for i := range calls {
		if seen[fmt.Sprint(i)] == (i%3 == 0) {
			t.Errorf("call %d: event present %v", i, seen[fmt.Sprint(i)])
		}
	}
}
