package labtest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// Enrollment is how the founder comes to approve the rack's machines.
//
// Today it is a stand-in: the harness itself approves, through the admin
// API, every pending registration whose key fingerprint is an enrolled
// host's, with that host's assignment (Inventory's entry), as an
// operator approving the rack from the joins list would. Once the founder
// approves expected machines by itself (SPEC: zero-touch enrollment),
// Enroll and Let become `PUT /v1/admin/inventory` (stratum inventory apply)
// of Inventory's entries and nothing here approves: every caller is
// already written against that shape (enroll the hosts before their
// joiners start; Let a held host in later). Each host's key fingerprint is
// known before its joiner starts (Rack makes the key in its state dir);
// its EK certificate's hash too.
type Enrollment struct {
	lab  *Lab
	role string

	mu       sync.Mutex
	allowed  map[string]*Host // by key fingerprint
	approved map[string]string
	errs     []string
	stop     context.CancelFunc
	done     chan struct{}
}

// Inventory is hosts as the inventory of expected machines the founder
// will take (wire.Inventory), each recognised by its registration key's
// fingerprint, with its full assignment.
func (l *Lab) Inventory(role string, hosts ...*Host) wire.Inventory {
	var inv wire.Inventory
	for _, h := range hosts {
		inv.Machines = append(inv.Machines, wire.InventoryEntry{
			Match:  wire.InventoryMatch{KeyFingerprint: h.KeyFingerprint},
			NodeID: h.NodeID, Role: role, Hostname: h.Name, MgmtIP: h.IP.String(),
			Networks: map[string]wire.Network{}, Labels: map[string]string{},
		})
	}
	return inv
}

// assignment is a host's inventory entry as an approval's body.
func assignment(e wire.InventoryEntry) wire.Assignment {
	return wire.Assignment{NodeID: e.NodeID, AZ: e.AZ, MgmtIP: e.MgmtIP, Networks: e.Networks, Labels: e.Labels}
}

// Enroll makes the lab's founder (the current one, across restarts)
// expect hosts with role: their joins are approved as they register.
// held hosts are known but wait until Let. Every host needs its
// KeyFingerprint (Rack sets it). It stops when the test ends.
func (l *Lab) Enroll(t testing.TB, role string, hosts, held []*Host) *Enrollment {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &Enrollment{lab: l, role: role, allowed: map[string]*Host{}, approved: map[string]string{}, stop: cancel, done: make(chan struct{})}
	for _, h := range hosts {
		if h.KeyFingerprint == "" {
			t.Fatalf("labtest: %s has no key fingerprint yet", h.Name)
		}
		e.allowed[h.KeyFingerprint] = h
	}
	for _, h := range held {
		delete(e.allowed, h.KeyFingerprint)
	}
	// The operator's session, logged in once (a login hashes the
	// password: not a cost of the joins).
	go e.approveLoop(ctx, l.Founder().Operator(t).Token)
	t.Cleanup(func() {
		e.Stop()
		for _, msg := range e.Errors() {
			t.Logf("labtest enrollment: %s", msg)
		}
	})
	return e
}

// Let lets a held host in: its pending join is approved now, or when it
// registers.
func (e *Enrollment) Let(t testing.TB, h *Host) {
	t.Helper()
	e.mu.Lock()
	e.allowed[h.KeyFingerprint] = h
	e.mu.Unlock()
	c, err := operator(e.lab.Founder())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.approvePending(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// JoinID is the join the enrollment approved for h ("" when none yet).
func (e *Enrollment) JoinID(h *Host) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.approved[h.KeyFingerprint]
}

// Stop ends the approvals and waits for the loop to return.
func (e *Enrollment) Stop() {
	e.stop()
	<-e.done
}

// Errors are the approvals the founder refused (they are retried).
func (e *Enrollment) Errors() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.errs...)
}

// approveLoop long-polls the pending joins of the current founder and
// approves the enrolled ones; a founder that is down (killed, restarting)
// is waited for.
func (e *Enrollment) approveLoop(ctx context.Context, token string) {
	defer close(e.done)
	var index string
	var last *stratumtest.Founder
	var c *stratumtest.Client
	for ctx.Err() == nil {
		f := e.lab.Founder()
		switch {
		case f != last && token != "":
			// A restarted founder keeps its sessions in its store.
			c, last, index = f.AdminClient().As(token), f, ""
		case c == nil:
			var err error
			if c, err = operator(f); err != nil {
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			last, index = f, ""
		}
		var list struct {
			Registrations []wire.OperatorView
			Index         string
		}
		status, _, err := c.DoContext(ctx, "GET", "/v1/admin/join/registrations?state=pending&wait=20&index="+url.QueryEscape(index), nil, &list)
		if err != nil || status != http.StatusOK {
			sleep(ctx, 200*time.Millisecond)
			if status == http.StatusUnauthorized {
				c, token = nil, ""
			}
			continue
		}
		index = list.Index
		for _, r := range list.Registrations {
			e.approve(ctx, c, r)
		}
	}
}

// approvePending approves every enrolled pending join now.
func (e *Enrollment) approvePending(ctx context.Context, c *stratumtest.Client) error {
	var list struct{ Registrations []wire.OperatorView }
	if _, _, err := c.DoContext(ctx, "GET", "/v1/admin/join/registrations?state=pending", nil, &list); err != nil {
		return err
	}
	for _, r := range list.Registrations {
		e.approve(ctx, c, r)
	}
	return nil
}

// approve approves r with its host's assignment when r's key is an
// enrolled host's. A join another approval got to first is left alone.
func (e *Enrollment) approve(ctx context.Context, c *stratumtest.Client, r wire.OperatorView) {
	e.mu.Lock()
	h := e.allowed[r.KeyFingerprint]
	e.mu.Unlock()
	if h == nil || r.State != "pending" {
		return
	}
	entry := e.lab.Inventory(e.role, h).Machines[0]
	status, apiErr, err := c.DoContext(ctx, "POST", "/v1/admin/join/registrations/"+url.PathEscape(r.JoinID)+"/approve", assignment(entry), nil)
	if ctx.Err() != nil {
		return // stopped
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case err == nil && status == http.StatusOK:
		e.approved[h.KeyFingerprint] = r.JoinID
	case apiErr != nil && apiErr.Code == apierr.JoinApprovalRefused && e.approved[h.KeyFingerprint] == r.JoinID:
	case err != nil:
		e.errs = append(e.errs, h.Name+": "+err.Error())
	case apiErr != nil:
		e.errs = append(e.errs, h.Name+": "+apiErr.Error())
	}
}

// operator logs the bootstrap admin in to f without a *testing.T (the
// approvals run beside the test).
func operator(f *stratumtest.Founder) (*stratumtest.Client, error) {
	email, password, err := stratumtest.ReadCredentials(f.Dir)
	if err != nil {
		return nil, err
	}
	c := f.AdminClient()
	var out wire.LoginResponse
	status, apiErr, err := c.Do("POST", "/v1/auth/login", wire.LoginRequest{Email: email, Password: password}, &out)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("login: %d %v", status, apiErr)
	}
	return c.As(out.Token), nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
