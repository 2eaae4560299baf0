package join

import (
	"errors"
	"testing"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// TestMgmtAddrRule: every address SPEC 10.5 names is refused at
// registration with fields[mgmtIp], the token stays unspent, and --dev
// allows loopback only.
func TestMgmtAddrRule(t *testing.T) {
	cases := []struct {
		ip      string
		refused bool
		devOK   bool
	}{
		{"192.0.2.77", false, true},
		{"2001:db8::77", false, true},
		{"127.0.0.1", true, true},
		{"127.8.9.1", true, true},
		{"::1", true, true},
		{"::ffff:127.0.0.1", true, true},
		{"0.0.0.0", true, false},
		{"::", true, false},
		{"224.0.0.251", true, false},
		{"ff02::1", true, false},
		{"169.254.1.1", true, false},
		{"fe80::1", true, false},
		{"255.255.255.255", true, false},
		{"192.0.2.240", true, false},  // the API VIP
		{"192.0.2.241", true, false},  // the Postgres VIP
		{"192.0.2.10", true, false},   // the founder's mgmt address
		{"198.51.100.9", true, false}, // one of the founder host's addresses
	}
	for _, dev := range []bool{false, true} {
		e := newEnv(t, func(c *Config) { c.Dev = dev; c.FounderAddrs = []string{"198.51.100.9"} })
		token := e.token("worker", 1)
		for _, tc := range cases {
			_, _, err := e.svc.Register(keyPin(tc.ip), wire.RegisterRequest{Token: token, Release: clusterRelease, Hostname: "lab", MgmtIP: tc.ip})
			want := tc.refused && !(dev && tc.devOK)
			var ae *apierr.Error
			if got := errors.As(err, &ae); got != want {
				t.Errorf("dev=%v %s: err %v, refused want %v", dev, tc.ip, err, want)
				continue
			}
			if want && (ae.Code != apierr.InvalidInput || len(ae.Fields) != 1 || ae.Fields[0].Field != "mgmtIp") {
				t.Errorf("dev=%v %s: %+v, want INVALID_INPUT with fields[mgmtIp]", dev, tc.ip, ae)
			}
			if !want {
				token = e.token("worker", 1)
			}
		}
	}
}

// TestMgmtAddrFollowsTheFounder: the service keeps the founder's record
// it decoded (cluster.Decoded), yet a registration is judged by the
// founder's address as stored now: once the founder's member record
// moves to another address, that one is refused and the old one is free.
func TestMgmtAddrFollowsTheFounder(t *testing.T) {
	e := newEnv(t)
	register := func(ip string) error {
		_, _, err := e.svc.Register(keyPin("k-"+ip+"-"+e.token("worker", 1)), wire.RegisterRequest{Token: e.token("worker", 1), Release: clusterRelease, Hostname: "lab", MgmtIP: ip})
		return err
	}
	if err := register("192.0.2.10"); err == nil {
		t.Fatal("the founder's address was accepted")
	}
	if err := register("192.0.2.77"); err != nil {
		t.Fatalf("192.0.2.77 before the move: %v", err)
	}
	if err := e.db.Update(func(tx *store.Tx) error {
		f, _, err := cluster.GetMember(tx, e.id.FounderNodeID)
		if err != nil {
			return err
		}
		f.MgmtIP = "192.0.2.78"
		return cluster.PutMember(tx, f)
	}); err != nil {
		t.Fatal(err)
	}
	var ae *apierr.Error
	if err := register("192.0.2.78"); !errors.As(err, &ae) || ae.Code != apierr.InvalidInput {
		t.Errorf("the founder's new address: %v, want INVALID_INPUT", err)
	}
	if err := register("192.0.2.10"); err != nil {
		t.Errorf("the founder's old address after the move: %v", err)
	}
}

// TestMgmtAddrAtApproval: an operator-set VIP is 409 with fields[mgmtIp];
// the view says who chose the address.
func TestMgmtAddrAtApproval(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	a := assignment(1)
	a.MgmtIP = "192.0.2.242"
	_, err := e.svc.Approve(e.admin, v.JoinID, a)
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code != apierr.JoinApprovalRefused || len(ae.Fields) != 1 || ae.Fields[0].Field != "mgmtIp" {
		t.Fatalf("approval with the OpenBao VIP: %v", err)
	}
	op, err := e.svc.Get(v.JoinID)
	if err != nil || op.MgmtIPSource != wire.MgmtIPFromJoiner || op.State != wire.StatePending {
		t.Fatalf("after a refused approval: %+v %v", op, err)
	}
	a.MgmtIP = ""
	if op, err = e.svc.Approve(e.admin, v.JoinID, a); err != nil || op.MgmtIPSource != wire.MgmtIPFromJoiner {
		t.Fatalf("approval keeping the joiner's address: %+v %v", op, err)
	}
	w := e.pending("b")
	b := assignment(2)
	if op, err = e.svc.Approve(e.admin, w.JoinID, b); err != nil || op.MgmtIPSource != wire.MgmtIPFromOperator {
		t.Fatalf("approval with the operator's address: %+v %v", op, err)
	}
}
