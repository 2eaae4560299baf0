package join

import (
	"slices"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/wire"
)

func TestApproveInvalidInput(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	bad := assignment(1)
	bad.NodeID = "node-1"
	bad.MgmtIP = "192.0.2.21/24"
	bad.Networks = map[string]wire.Network{"storge": {IP: "10.9.0.21"}}
	before := e.auditCount()
	_, err := e.svc.Approve(e.admin, v.JoinID, bad)
	wantCode(t, err, apierr.InvalidInput)
	if got, want := fieldNames(err), []string{"nodeId", "mgmtIp", "networks.storge"}; !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	if !strings.Contains(mustAPIErr(t, err).Fields[1].Message, "CIDR") {
		t.Errorf("a CIDR is not named as such: %v", mustAPIErr(t, err).Fields[1])
	}
	bad = assignment(1)
	bad.Labels = map[string]string{"topology.az": "a", "rack": "r1", "topology.rack": "r2"}
	_, err = e.svc.Approve(e.admin, v.JoinID, bad)
	if got, want := fieldNames(err), []string{"labels.rack", "labels.topology.az"}; !slices.Equal(got, want) {
		t.Errorf("label fields %v, want %v", got, want)
	}
	if e.auditCount() != before || e.view("a", v.JoinID).State != wire.StatePending {
		t.Error("a refused approval changed state")
	}
}

func TestDecodeAssignment(t *testing.T) {
	a, err := DecodeAssignment([]byte(`{"nodeId":"n-abc12def","az":"","mgmtIp":"192.0.2.12","networks":{"storage":{"ip":"10.9.0.12","interface":"vlan90"}},"labels":{"topology.rack":"r2"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.NodeID != "n-abc12def" || a.Networks["storage"].Interface != "vlan90" || a.Labels["topology.rack"] != "r2" {
		t.Errorf("decoded %+v", a)
	}
	if a, err := DecodeAssignment(nil); err != nil || a.NodeID != "" {
		t.Errorf("an empty body takes every default: %+v %v", a, err)
	}
	_, err = DecodeAssignment([]byte(`{"nodeID":"x","networks":{"storage":{"ip":"10.9.0.12","iface":"eth1"},"overlay":"10.0.0.1"},"labels":{"topology.rack":5}}`))
	wantCode(t, err, apierr.InvalidInput)
	got := fieldNames(err)
	for _, want := range []string{"nodeID", "networks.storage.iface", "networks.overlay", "labels.topology.rack"} {
		if !slices.Contains(got, want) {
			t.Errorf("fields %v lack %s", got, want)
		}
	}
}

func TestApproveRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env) (joinID string, a wire.Assignment)
		field string // "" for a refusal of the registration itself
		words string // the message must say why
	}{
		{"needs-upgrade", func(e *env) (string, wire.Assignment) {
			v, _, err := e.register("a", e.token("worker", 1), "0.5.0", true)
			if err != nil {
				e.t.Fatal(err)
			}
			return v.JoinID, assignment(1)
		}, "", "registers again on the cluster release"},
		{"already approved", func(e *env) (string, wire.Assignment) {
			v := e.pending("a")
			e.approve(v.JoinID, assignment(1))
			return v.JoinID, assignment(2)
		}, "", "already approved"},
		{"rejected", func(e *env) (string, wire.Assignment) {
			v := e.pending("a")
			if _, err := e.svc.Reject(e.admin, v.JoinID, "no"); err != nil {
				e.t.Fatal(err)
			}
			return v.JoinID, assignment(1)
		}, "", "rejected"},
		{"node id of a member", func(e *env) (string, wire.Assignment) {
			a := assignment(1)
			a.NodeID = "n-founder1"
			return e.pending("a").JoinID, a
		}, "nodeId", "member n-founder1"},
		{"mgmt ip of a member", func(e *env) (string, wire.Assignment) {
			a := assignment(1)
			a.MgmtIP = "192.0.2.10"
			return e.pending("a").JoinID, a
		}, "mgmtIp", "management address of member n-founder1"},
		{"network ip of a member", func(e *env) (string, wire.Assignment) {
			a := assignment(1)
			a.Networks = map[string]wire.Network{"storage": {IP: "10.9.0.10"}}
			return e.pending("a").JoinID, a
		}, "networks.storage.ip", "storage address of member n-founder1"},
		{"mgmt ip is a member's network ip", func(e *env) (string, wire.Assignment) {
			a := assignment(1)
			a.MgmtIP = "10.9.0.10"
			return e.pending("a").JoinID, a
		}, "mgmtIp", "storage address of member n-founder1"},
		{"address reserved by an approved join", func(e *env) (string, wire.Assignment) {
			first := e.pending("a")
			e.approve(first.JoinID, assignment(1)) // delivering
			second := e.pending("b")
			e.approve(second.JoinID, assignment(2)) // waits in the queue
			a := assignment(3)
			a.Networks = map[string]wire.Network{"storage": {IP: "10.9.0.22"}}
			return e.pending("c").JoinID, a
		}, "networks.storage.ip", "approved join"},
		{"node id reserved by an approved join", func(e *env) (string, wire.Assignment) {
			e.approve(e.pending("a").JoinID, assignment(1))
			b := assignment(2)
			b.NodeID = "n-second01"
			e.approve(e.pending("b").JoinID, b)
			c := assignment(3)
			c.NodeID = "n-second01"
			return e.pending("c").JoinID, c
		}, "nodeId", "approved join"},
		{"bound traffic class left out", func(e *env) (string, wire.Assignment) {
			a := assignment(1)
			a.Networks = nil
			return e.pending("a").JoinID, a
		}, "networks.storage", "management plane"},
		{"rack left out", func(e *env) (string, wire.Assignment) {
			a := assignment(1)
			a.Labels = map[string]string{"example.com/tier": "gold"}
			return e.pending("a").JoinID, a
		}, "labels.topology.rack", "half-declared"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			id, a := tc.setup(e)
			before, _ := e.svc.Get(id)
			audits := e.auditCount()
			_, err := e.svc.Approve(e.admin, id, a)
			ae := wantCode(t, err, apierr.JoinApprovalRefused)
			text := ae.Message
			if tc.field != "" {
				if len(ae.Fields) != 1 || ae.Fields[0].Field != tc.field {
					t.Fatalf("fields %+v, want one at %s", ae.Fields, tc.field)
				}
				text = ae.Fields[0].Message
			}
			if !strings.Contains(text, tc.words) {
				t.Errorf("%q does not say %q", text, tc.words)
			}
			after, _ := e.svc.Get(id)
			if after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) || e.auditCount() != audits {
				t.Error("a refused approval changed state")
			}
		})
	}
}

func TestApproveDefaults(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	a := assignment(1)
	a.MgmtIP = ""
	got := e.approve(v.JoinID, a)
	if got.Assignment.MgmtIP != "192.0.2.99" || !cluster.ValidNodeID(got.Assignment.NodeID) || got.ApprovedBy != "admin@cloud.internal" {
		t.Errorf("defaults %+v", got.Assignment)
	}
	if string(got.Facts) != `{"cpus":4}` || got.Hostname != "lab-a" {
		t.Errorf("operator view facts=%s hostname=%s", got.Facts, got.Hostname)
	}
}

func mustAPIErr(t *testing.T, err error) *apierr.Error {
	t.Helper()
	e, ok := apierr.As(err)
	if !ok {
		t.Fatalf("%v is not an API error", err)
	}
	return e
}
