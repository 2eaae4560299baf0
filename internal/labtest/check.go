package labtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"stratum/wire"
)

// What a test checks of a rack on the founder: the members, the joins,
// the release set, the audit log.

// Members is the founder's members list, by node id.
func (l *Lab) Members(t testing.TB) map[string]wire.MemberView {
	t.Helper()
	var out struct{ Members []wire.MemberView }
	l.Founder().Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, http.StatusOK, &out)
	m := map[string]wire.MemberView{}
	for _, v := range out.Members {
		m[v.NodeID] = v
	}
	return m
}

// Registrations are the founder's joins, by key fingerprint (the last
// registration of each key).
func (l *Lab) Registrations(t testing.TB) map[string]wire.OperatorView {
	t.Helper()
	var out struct{ Registrations []wire.OperatorView }
	l.Founder().Operator(t).Must(t, "GET", "/v1/admin/join/registrations", nil, http.StatusOK, &out)
	m := map[string]wire.OperatorView{}
	for _, v := range out.Registrations {
		m[v.KeyFingerprint] = v
	}
	return m
}

// CheckJoined fails the test unless every host is an active member with
// its node id and address, and its join is joined.
func (l *Lab) CheckJoined(t testing.TB, hosts []*Host) {
	t.Helper()
	members, regs := l.Members(t), l.Registrations(t)
	for _, h := range hosts {
		m, ok := members[h.NodeID]
		if !ok || m.State != "active" || m.MgmtIP != h.IP.String() {
			t.Errorf("%s: member %s is %+v (present %v), want active at %s", h.Name, h.NodeID, m, ok, h.IP)
		}
		if r := regs[h.KeyFingerprint]; r.State != "joined" || r.Hostname != h.Name {
			t.Errorf("%s: its join is %q (%s), want joined", h.Name, r.State, r.Reason)
		}
	}
}

// WaitRecorded waits until every host's agent has recorded its release in
// the founder's release set (GET /v1/admin/upgrades/release), within
// limit, and answers when.
func (l *Lab) WaitRecorded(t testing.TB, hosts []*Host, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		missing := l.unrecorded(t, hosts)
		if len(missing) == 0 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("labtest: not recorded in the release set after %v: %s", limit, strings.Join(missing, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (l *Lab) unrecorded(t testing.TB, hosts []*Host) []string {
	var set struct {
		Nodes []struct {
			NodeID   string
			Recorded bool
		}
	}
	l.Founder().Operator(t).Must(t, "GET", "/v1/admin/upgrades/release", nil, http.StatusOK, &set)
	recorded := map[string]bool{}
	for _, n := range set.Nodes {
		recorded[n.NodeID] = n.Recorded
	}
	var missing []string
	for _, h := range hosts {
		if !recorded[h.NodeID] {
			missing = append(missing, h.Name+" ("+h.NodeID+")")
		}
	}
	return missing
}

// Audit is every event of the founder's audit log, oldest first.
func (l *Lab) Audit(t testing.TB) []wire.AuditEvent {
	t.Helper()
	var all []wire.AuditEvent
	for after := uint64(0); ; {
		var page struct{ Events []wire.AuditEvent }
		l.Founder().Operator(t).Must(t, "GET", fmt.Sprintf("/v1/admin/audit?after=%d&limit=1000", after), nil, http.StatusOK, &page)
		if len(page.Events) == 0 {
			return all
		}
		all = append(all, page.Events...)
		after = page.Events[len(page.Events)-1].Seq
	}
}

// AuditCount counts the events of kind about each subject (a join id).
func AuditCount(events []wire.AuditEvent, kind string) map[string]int {
	n := map[string]int{}
	for _, e := range events {
		if e.Kind == kind {
			n[e.Subject]++
		}
	}
	return n
}

// CheckZeroTouch fails the test unless every host's join was approved by
// the founder's inventory alone: one join.approved by actor inventory,
// matched by the host's EK certificate (ekCertSha256, its hash, the chain
// to the lab's manufacturer verified), after one join.attestation.verified
// of its TPM; and unless nothing at all was approved by anyone else (a
// person, or a harness acting as one).
func (l *Lab) CheckZeroTouch(t testing.TB, hosts []*Host, events []wire.AuditEvent) {
	t.Helper()
	approved := map[string][]wire.AuditEvent{}
	for _, e := range events {
		if e.Kind != "join.approved" {
			continue
		}
		approved[e.Subject] = append(approved[e.Subject], e)
		if e.Actor != "inventory" {
			t.Errorf("join %s was approved by %s, not by the inventory: %v", e.Subject, e.Actor, e.Data)
		}
	}
	verified := AuditCount(events, "join.attestation.verified")
	regs := l.Registrations(t)
	for _, h := range hosts {
		id := regs[h.KeyFingerprint].JoinID
		if id == "" {
			t.Errorf("%s: no join", h.Name)
			continue
		}
		if verified[id] != 1 {
			t.Errorf("%s: join %s has %d join.attestation.verified events, want 1", h.Name, id, verified[id])
		}
		a := approved[id]
		if len(a) != 1 {
			t.Errorf("%s: join %s was approved %d times, want once", h.Name, id, len(a))
			continue
		}
		d := a[0].Data
		if d["match"] != "ekCertSha256" || d["matchHash"] != h.EKCertSHA256 || d["inventoryNodeId"] != h.NodeID || d["ekChain"] != "verified" {
			t.Errorf("%s: join %s approved with the evidence %v, want its EK certificate (%s, chain verified) matching entry %s", h.Name, id, d, h.EKCertSHA256, h.NodeID)
		}
	}
}
