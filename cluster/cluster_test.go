package cluster

import (
	"errors"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

const fullConfig = `
parentDomain: stratum.example.com
region: lab-1
clusterRelease: 0.6.0
adminEmail: admin@cloud.internal
dnsUpstreamServers: [192.0.2.53]
founder:
  nodeId: n-founder1
  mgmtIp: 192.0.2.10
  az: ""
  networks: {storage: {ip: 10.9.0.10, interface: vlan90}}
  labels: {topology.rack: r1}
vips: {api: 192.0.2.240, postgres: 192.0.2.241, openBao: 192.0.2.242}
secrets:
  postgresPassword: pg-secret
  openBaoToken: hvs.token
  openBaoUnsealKey: ""
  axdnsdEncryptionKey: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
`

func TestParseConfigFull(t *testing.T) {
	c, err := ParseConfig([]byte(fullConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.ParentDomain != "stratum.example.com" || c.Region != "lab-1" || c.ClusterRelease != "0.6.0" || c.AdminEmail != "admin@cloud.internal" {
		t.Errorf("top-level fields: %+v", c)
	}
	if c.DNSUpstreamServers == nil || !reflect.DeepEqual(*c.DNSUpstreamServers, []string{"192.0.2.53"}) {
		t.Errorf("dnsUpstreamServers = %v", c.DNSUpstreamServers)
	}
	if c.Founder.NodeID != "n-founder1" || c.Founder.MgmtIP != "192.0.2.10" || c.Founder.Networks["storage"] != (wire.Network{IP: "10.9.0.10", Interface: "vlan90"}) || c.Founder.Labels["topology.rack"] != "r1" {
		t.Errorf("founder: %+v", c.Founder)
	}
	if c.VIPs.API != "192.0.2.240" || c.VIPs.OpenBao != "192.0.2.242" || c.VIPs.Empty() {
		t.Errorf("vips: %+v", c.VIPs)
	}
	if c.Secrets.PostgresPassword != "pg-secret" || len(c.Secrets.AxdnsdEncryptionKey) != 64 {
		t.Errorf("secrets: %+v", c.Secrets)
	}
	if err := c.Validate(false); err != nil {
		t.Errorf("the spec's example file does not validate: %v", describeFields(err))
	}
}

func TestParseConfigDNSEmptyIsAValue(t *testing.T) {
	cases := map[string]*[]string{
		"dnsUpstreamServers: []\n": {},
		"region: r\n":              nil,
		"":                         nil,
	}
	for in, want := range cases {
		c, err := ParseConfig([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if (c.DNSUpstreamServers == nil) != (want == nil) {
			t.Errorf("%q: dnsUpstreamServers = %v, want nil=%v ([] is a value, absent is not)", in, c.DNSUpstreamServers, want == nil)
		}
	}
}

func TestParseConfigUnknownKeys(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"top level", "parentDomain: a.b\nbogusKey: 1\n", []string{"bogusKey"}},
		{"nested founder.foo", "founder:\n  nodeId: n-12345678\n  foo: 1\n", []string{"foo"}},
		{"misspelled secret", "secrets:\n  postgresPasword: x\n", []string{"postgresPasword"}},
		{"several at once", "zzz: 1\nfounder:\n  foo: 1\nvips:\n  bar: 192.0.2.1\n", []string{"zzz", "foo", "bar"}},
		{"case matters", "ParentDomain: a.b\n", []string{"ParentDomain"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil {
				t.Fatal("unknown key accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// An operator reads the key as a path in their file, founder.foo, not as a
// Go type name (cluster.FounderConfig).
func TestParseConfigUnknownKeyNamesItsPath(t *testing.T) {
	cases := map[string]string{
		"founder:\n  foo: 1\n":             "founder.foo",
		"vips:\n  bar: 192.0.2.1\n":        "vips.bar",
		"secrets:\n  postgresPasword: x\n": "secrets.postgresPasword",
	}
	for in, path := range cases {
		_, err := ParseConfig([]byte(in))
		if err == nil {
			t.Fatalf("%q accepted", in)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name the key's path %q", err, path)
		}
		if strings.Contains(err.Error(), "cluster.") {
			t.Errorf("error %q shows a Go type name to the operator", err)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "absent.yaml")); err == nil {
		t.Fatal("LoadConfig of a missing file succeeded")
	}
	if _, err := ParseConfig([]byte("region: [1, 2]\n")); err == nil {
		t.Fatal("a list for a string accepted")
	}
	if _, err := ParseConfig([]byte("region: lab-1\n  bad indentation: x\n")); err == nil {
		t.Fatal("malformed YAML accepted")
	}
}

func describeFields(err error) []string {
	e, ok := apierr.As(err)
	if !ok {
		return []string{err.Error()}
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field+": "+f.Message)
	}
	return out
}

func fieldNames(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	e, ok := apierr.As(err)
	if !ok || e.Code != apierr.InvalidInput {
		t.Fatalf("error %v is not INVALID_INPUT", err)
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field)
	}
	sort.Strings(out)
	return out
}

func TestValidateListsEveryProblem(t *testing.T) {
	dns := []string{"192.0.2.53", "not-an-ip"}
	cases := []struct {
		name string
		cfg  Config
		dev  bool
		want []string // field names, sorted
		msgs map[string]string
	}{
		{
			name: "three faults at once",
			cfg:  Config{ParentDomain: "Bad_Domain", Founder: FounderConfig{MgmtIP: "10.0.0.1/24"}},
			want: []string{"founder.mgmtIp", "parentDomain", "region"},
			msgs: map[string]string{"founder.mgmtIp": "not a CIDR", "region": "required", "parentDomain": "not a DNS name"},
		},
		{
			name: "dev needs neither domain nor region",
			cfg:  Config{},
			dev:  true,
		},
		{
			name: "dev still checks the values given",
			cfg:  Config{ParentDomain: "-x.example", ClusterRelease: "latest"},
			dev:  true,
			want: []string{"clusterRelease", "parentDomain"},
		},
		{
			name: "everything wrong",
			cfg: Config{
				ParentDomain: "ok.example", Region: "r", ClusterRelease: "1.2", AdminEmail: "admin", DNSUpstreamServers: &dns,
				Founder: FounderConfig{NodeID: "founder", MgmtIP: "nope", Networks: map[string]wire.Network{"storage": {IP: "10.9.0.10/24"}, "backup": {IP: "10.0.0.1"}}, Labels: map[string]string{"topology.az": "a"}},
				VIPs:    wire.VIPs{API: "192.0.2.1/32", Postgres: "x", OvnNb: "192.0.2.9"},
				Secrets: SecretsConfig{AxdnsdEncryptionKey: "xyz"},
			},
			want: []string{"adminEmail", "clusterRelease", "dnsUpstreamServers[1]", "founder.labels.topology.az", "founder.mgmtIp", "founder.networks.backup", "founder.networks.storage.ip", "founder.nodeId", "secrets.axdnsdEncryptionKey", "vips.api", "vips.postgres"},
		},
		{
			name: "dev defaults are valid outside dev too",
			cfg:  DevDefaults(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate(tc.dev)
			got := fieldNames(t, err)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("fields = %v, want %v (%v)", got, tc.want, err)
			}
			if e, ok := apierr.As(err); ok {
				for _, f := range e.Fields {
					if w, ok := tc.msgs[f.Field]; ok && !strings.Contains(f.Message, w) {
						t.Errorf("%s: message %q does not say %q", f.Field, f.Message, w)
					}
				}
			}
		})
	}
}

// The same file gives the same report every time (the CLI prints fields in
// order; golden tests compare them).
func TestValidateOrderIsStable(t *testing.T) {
	cfg := Config{ParentDomain: "a.example", Region: "r", VIPs: wire.VIPs{API: "x", Postgres: "y", OpenBao: "z", OvnNb: "w", Vmselect: "v"}}
	first := describeFields(cfg.Validate(false))
	if len(first) != 5 {
		t.Fatalf("fields = %v", first)
	}
	for i := 0; i < 50; i++ {
		if got := describeFields(cfg.Validate(false)); !reflect.DeepEqual(got, first) {
			t.Fatalf("run %d lists %v, the first run %v", i, got, first)
		}
	}
}

func TestValidateNetworksAndLabels(t *testing.T) {
	type want map[string]string // field -> message substring
	cases := []struct {
		name   string
		nets   map[string]wire.Network
		labels map[string]string
		want   want
	}{
		{name: "valid", nets: map[string]wire.Network{"storage": {IP: "10.9.0.12", Interface: "vlan90"}, "overlay": {IP: "fd00::12"}}, labels: map[string]string{"topology.rack": "r2", "topology.power": "pdu-a", "example.com/owner": "team-a", "ns/key": "v"}},
		{name: "CIDR given for an IP", nets: map[string]wire.Network{"storage": {IP: "10.9.0.12/24"}}, want: want{"n.storage.ip": "not a CIDR"}},
		{name: "not an IP", nets: map[string]wire.Network{"overlay": {IP: "ten.nine"}}, want: want{"n.overlay.ip": "not an IP address"}},
		{name: "missing IP", nets: map[string]wire.Network{"storage": {Interface: "eth1"}}, want: want{"n.storage.ip": "required"}},
		{name: "unknown class", nets: map[string]wire.Network{"management": {IP: "10.0.0.1"}}, want: want{"n.management": "unknown traffic class"}},
		{name: "bad interface", nets: map[string]wire.Network{"storage": {IP: "10.0.0.1", Interface: "a-very-long-interface-name"}}, want: want{"n.storage.interface": "interface"}},
		{name: "topology.az refused", labels: map[string]string{"topology.az": "az1"}, want: want{"l.topology.az": "az field"}},
		{name: "other topology key", labels: map[string]string{"topology.zone": "z"}, want: want{"l.topology.zone": "label key"}},
		{name: "bare key", labels: map[string]string{"owner": "x"}, want: want{"l.owner": "label key"}},
		{name: "two slashes", labels: map[string]string{"a/b/c": "x"}, want: want{"l.a/b/c": "label key"}},
		{name: "upper-case namespace", labels: map[string]string{"Example.com/k": "x"}, want: want{"l.Example.com/k": "label key"}},
		{name: "empty key part", labels: map[string]string{"ns/": "x"}, want: want{"l.ns/": "label key"}},
		{name: "value too long", labels: map[string]string{"topology.rack": strings.Repeat("r", 64)}, want: want{"l.topology.rack": "longer than 63"}},
		{
			name:   "all at once",
			nets:   map[string]wire.Network{"storage": {IP: "10.9.0.12/24"}, "bogus": {IP: "1.2.3.4"}},
			labels: map[string]string{"topology.az": "a", "ns/key": "ok", "plain": "x"},
			want:   want{"n.storage.ip": "not a CIDR", "n.bogus": "unknown traffic class", "l.topology.az": "az", "l.plain": "label key"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f apierr.Fields
			ValidateNetworks(&f, "n", tc.nets)
			ValidateLabels(&f, "l", tc.labels)
			got := map[string]string{}
			for _, fe := range f {
				if _, dup := got[fe.Field]; dup {
					t.Errorf("field %s reported twice", fe.Field)
				}
				got[fe.Field] = fe.Message
			}
			if len(got) != len(tc.want) {
				t.Fatalf("problems = %v, want %v", got, tc.want)
			}
			for field, sub := range tc.want {
				if !strings.Contains(got[field], sub) {
					t.Errorf("%s: %q, want it to say %q", field, got[field], sub)
				}
			}
		})
	}
}

func TestValidNodeIDAndIP(t *testing.T) {
	for id, ok := range map[string]bool{"n-abc12def": true, "n-00000000": true, "n-ABC12DEF": false, "n-abc12de": false, "n-abc12defg": false, "x-abc12def": false, "": false, "n-abc_2def": false} {
		if ValidNodeID(id) != ok {
			t.Errorf("ValidNodeID(%q) = %v", id, !ok)
		}
	}
	for s, want := range map[string]string{"192.0.2.1": "", "::1": "", "192.0.2.1/32": "not a CIDR", "fd00::/64": "not a CIDR", "": "not an IP", "host": "not an IP", "192.0.2.256": "not an IP"} {
		var f apierr.Fields
		ValidateIP(&f, "ip", s)
		if want == "" && len(f) != 0 || want != "" && (len(f) != 1 || !strings.Contains(f[0].Message, want)) {
			t.Errorf("ValidateIP(%q) = %v, want %q", s, f, want)
		}
	}
}

func openStore(t *testing.T) *store.DB {
	t.Helper()
	db, _ := storetest.Temp(t)
	return db
}

func TestInitAndMembers(t *testing.T) {
	db := openStore(t)
	now := time.Now()
	cfg, err := ParseConfig([]byte(fullConfig))
	if err != nil {
		t.Fatal(err)
	}
	var id Identity
	var sec Secrets
	err = db.Update(func(tx *store.Tx) error {
		var err error
		id, sec, _, err = Init(tx, cfg, false, now)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id.ClusterID, "cl-") || len(id.ClusterID) != 11 || id.FounderNodeID != "n-founder1" {
		t.Errorf("identity = %+v", id)
	}
	if sec.PostgresPassword != "pg-secret" || sec.OpenBaoUnsealKey != "" || len(sec.AdminPassword) != 24 {
		t.Errorf("secrets = %+v", sec)
	}
	err = db.View(func(tx *store.Tx) error {
		if tok, found, err := LoadOpenBaoToken(tx); err != nil || !found || tok != "hvs.token" {
			t.Errorf("the file's openBaoToken is the founder's OpenBao token: %q %v %v", tok, found, err)
		}
		if !Initialized(tx) {
			return errors.New("not initialized after Init")
		}
		got, err := LoadIdentity(tx)
		if err != nil || got.ClusterID != id.ClusterID || !reflect.DeepEqual(got.DNSUpstreamServers, []string{"192.0.2.53"}) {
			return errors.New("identity does not round-trip")
		}
		s, err := LoadSecrets(tx)
		if err != nil || s != sec {
			return errors.New("secrets do not round-trip")
		}
		ca, err := LoadCA(tx)
		if err != nil {
			return err
		}
		if ca.Cert.Subject.CommonName == "" || !strings.Contains(ca.Cert.Subject.CommonName, id.ClusterID) {
			return errors.New("CA does not name the cluster")
		}
		// Secrets are sealed in the file.
		if raw := bucketSecrets.Get(tx, "postgresPassword"); raw == nil || strings.Contains(string(raw), "pg-secret") {
			return errors.New("postgres password is not sealed")
		}
		ms, err := Members(tx)
		if err != nil || len(ms) != 1 || ms[0].NodeID != "n-founder1" || ms[0].State != MemberActive || ms[0].MgmtIP != "192.0.2.10" || ms[0].Order != 1 {
			return errors.New("founder member wrong")
		}
		if Generation(tx) != 1 {
			return errors.New("generation is not 1")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := db.AuditEvents(0, 10)
	if len(evs) != 1 || evs[0].Kind != "cluster.initialized" || evs[0].Subject != id.ClusterID {
		t.Errorf("audit after init = %+v", evs)
	}
	for _, ev := range evs {
		for _, v := range ev.Data {
			if v == sec.PostgresPassword || v == sec.AdminPassword {
				t.Error("audit event holds a secret")
			}
		}
	}

	// Init twice is a CONFLICT and changes nothing.
	err = db.Update(func(tx *store.Tx) error { _, _, _, err := Init(tx, cfg, false, now); return err })
	if apierr.CodeOf(err) != apierr.Conflict {
		t.Fatalf("second Init = %v, want CONFLICT", err)
	}

	// Admit and remove bump the generation; the founder applies at once.
	err = db.Update(func(tx *store.Tx) error {
		m, err := Admit(tx, Member{MemberView: wire.MemberView{NodeID: "n-abc12def", Role: "worker", MgmtIP: "192.0.2.12"}}, now)
		if err != nil {
			return err
		}
		if m.Generation != 2 || m.State != MemberJoining || m.Order != 2 {
			t.Errorf("admitted member = %+v", m)
		}
		ms, _ := Members(tx)
		if len(ms) != 2 || ms[0].AppliedGeneration != 2 || ms[1].NodeID != "n-abc12def" {
			t.Errorf("members after admit = %+v", ms)
		}
		if AllApplied(ms, 2) {
			t.Error("AllApplied true while the new member has not applied")
		}
		if err := Remove(tx, "n-abc12def"); err != nil {
			return err
		}
		ms, _ = Members(tx)
		if len(ms) != 1 || Generation(tx) != 3 || ms[0].AppliedGeneration != 3 || !AllApplied(ms, 3) {
			t.Errorf("after remove: generation %d members %+v", Generation(tx), ms)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInitRefusesInvalidConfig(t *testing.T) {
	db := openStore(t)
	err := db.Update(func(tx *store.Tx) error {
		_, _, _, err := Init(tx, Config{Founder: FounderConfig{MgmtIP: "10.0.0.1/8"}}, false, time.Now())
		return err
	})
	if got := fieldNames(t, err); !reflect.DeepEqual(got, []string{"founder.mgmtIp", "parentDomain", "region"}) {
		t.Fatalf("fields = %v", got)
	}
	_ = db.View(func(tx *store.Tx) error {
		if Initialized(tx) {
			t.Error("a refused Init left a cluster")
		}
		if _, err := LoadIdentity(tx); !errors.Is(err, ErrNotInitialized) {
			t.Errorf("LoadIdentity = %v, want ErrNotInitialized", err)
		}
		if _, err := LoadCA(tx); !errors.Is(err, ErrNotInitialized) {
			t.Errorf("LoadCA = %v, want ErrNotInitialized", err)
		}
		return nil
	})
	if !strings.Contains(ErrNotInitialized.Error(), "stratum init") {
		t.Errorf("ErrNotInitialized does not name stratum init: %v", ErrNotInitialized)
	}
}
