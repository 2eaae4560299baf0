package releaseset

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stratum/internal/pgtest"
	"stratum/wire"
)

// TestTrust16_7_ForgedNoteDoesNotFreezeReleaseSet: a role that may only
// connect to the cluster's database sends a note on the founders' channel
// naming the founder's record with the highest sequence there is. Before,
// every replica kept that record from then on and ignored every later
// one until restarted; a note is now a hint: the record is read again and
// later records (on either replica) are answered.
func TestTrust16_7_ForgedNoteDoesNotFreezeReleaseSet(t *testing.T) {
	a, b, _, _, founder, dsn := twoReplicas(t)
	if err := a.Record("test", founder, wire.RecordRequest{RunningRelease: "0.1.0"}); err != nil {
		t.Fatal(err)
	}
	running := func(s *Service) string {
		set, err := s.Describe()
		if err != nil {
			t.Fatal(err)
		}
		return set.Nodes[0].RunningRelease
	}
	waitFor := func(s *Service, name, want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); running(s) != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("replica %s answers runningRelease %s, the store holds %s", name, running(s), want)
			}
		}
	}
	waitFor(b, "B", "0.1.0")

	ctx := context.Background()
	n, err := pgx.Connect(ctx, pgtest.Shared(t).Neighbour(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	for _, payload := range []string{
		"forged\n" + topicRecords + "\n" + founder + " 18446744073709551615",
		"forged\n" + topicRecords + "\n" + founder + " 9223372036854775807",
	} {
		if _, err := n.Exec(ctx, "SELECT pg_notify('stratum', $1)", payload); err != nil {
			t.Fatalf("the neighbour's note: %v", err)
		}
	}
	time.Sleep(300 * time.Millisecond) // heard by both replicas

	if err := a.Record("test", founder, wire.RecordRequest{RunningRelease: "0.2.0"}); err != nil {
		t.Fatal(err)
	}
	waitFor(a, "A", "0.2.0")
	waitFor(b, "B", "0.2.0")
	if err := b.Record("test", founder, wire.RecordRequest{RunningRelease: "0.3.0"}); err != nil {
		t.Fatal(err)
	}
	waitFor(b, "B", "0.3.0")
	waitFor(a, "A", "0.3.0")

	// A note naming a node that has no record changes nothing either.
	if _, err := n.Exec(ctx, "SELECT pg_notify('stratum', $1)", "forged\n"+topicRecords+"\nno-such-node 1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	for name, s := range map[string]*Service{"A": a, "B": b} {
		s.mu.RLock()
		loaded := s.records != nil
		s.mu.RUnlock()
		if !loaded {
			t.Errorf("a note naming a node without a record dropped replica %s's whole cache", name)
		}
	}
	waitFor(a, "A", "0.3.0")
	waitFor(b, "B", "0.3.0")
}
