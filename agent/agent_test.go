package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/buildinfo"
	"stratum/crypto"
	"stratum/internal/stratumtest/fakefounder"
	"stratum/internal/syncbuf"
)

const (
	testCluster = "cl-agent001"
	testNode    = "n-agent001"
)

// node writes a joined node's files under a temp root: node.yaml, its
// leaf and the CA, as the joiner does.
func node(t *testing.T, ca *crypto.CA, nodeID string) string {
	t.Helper()
	root := t.TempDir()
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: nodeID, DNSNames: []string{nodeID}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Client: true, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "etc/stratum/secrets"), 0o700)
	write := func(rel string, b []byte) {
		if err := os.WriteFile(filepath.Join(root, rel), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(nodeYAMLPath, []byte("nodeId: "+nodeID+"\nclusterId: "+testCluster+"\nmgmt:\n  address: 127.0.0.1\n"))
	write(nodeCertPath, leaf.CertPEM)
	write(nodeKeyPath, leaf.KeyPEM)
	write(caPath, ca.CertPEM())
	write(releasePath, []byte("0.2.0\n"))
	osr, _ := os.ReadFile("../hostrecord/testdata/root/etc/os-release")
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	write("etc/os-release", osr)
	return root
}

// startAgent runs the agent on root against api until the test ends.
func startAgent(t *testing.T, root, api string, interval time.Duration, logs *syncbuf.Buffer, mods ...func(*Config)) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	cfg := Config{API: api, Root: root, Interval: interval, Listen: "127.0.0.1:0",
		LeafRenewBefore: time.Minute, // the test leaves live an hour: not renewed
		checkEvery:      200 * time.Millisecond, Build: buildOf("4298b2fe"), Log: slog.New(slog.NewTextHandler(logs, nil)), Ready: func(a string) { ready <- a }}
	for _, m := range mods {
		m(&cfg)
	}
	go func() { done <- Run(ctx, cfg) }()
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("agent: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not start")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("agent did not stop")
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAgent: records at start and again when the host changes, applies
// each new generation (members.json, then applied), serves /startupz
// over mTLS only, and survives a founder that fails for a while.
func TestAgent(t *testing.T) {
	ca, _ := crypto.NewCA(testCluster, time.Now())
	f := fakefounder.New(t, fakefounder.Options{CA: ca, ClusterID: testCluster})
	root := node(t, ca, testNode)
	var logs syncbuf.Buffer
	addr, _ := startAgent(t, root, f.URL(), time.Hour, &logs)

	waitFor(t, "a first record and generation 3 applied", func() bool {
		recs, applied := f.Sent()
		return len(recs) >= 1 && len(applied) >= 1
	})
	recs, applied := f.Sent()
	r := recs[0]
	if r.RunningRelease != "0.2.0" || r.Release.OS == nil || r.Release.OS.ID != "debian" || r.Release.OS.Kernel == "" || r.Release.HostReportedAt == nil {
		t.Fatalf("first record: %+v", r)
	}
	if r.Release.HostBinaries == nil || r.Release.HostBinaries.Commit != "4298b2fe" {
		t.Fatalf("hostBinaries: %+v", r.Release.HostBinaries)
	}
	if applied[0] != 3 {
		t.Fatalf("applied %v", applied)
	}
	var members struct{ Generation uint64 }
	raw, err := os.ReadFile(filepath.Join(root, membersPath))
	if err != nil || json.Unmarshal(raw, &members) != nil || members.Generation != 3 {
		t.Fatalf("members.json: %s %v", raw, err)
	}

	// /startupz: ready, over mTLS with a leaf of the cluster CA only.
	probe := func(cert *tls.Certificate) (map[string]any, error) {
		cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: testNode}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Get("https://" + addr + "/startupz")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var v map[string]any
		return v, json.NewDecoder(resp.Body).Decode(&v)
	}
	pl, _ := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder prober", URIs: []*url.URL{crypto.FounderURI(testCluster)}, Client: true, Validity: time.Hour}, time.Now())
	prober, _ := tls.X509KeyPair(pl.CertPEM, pl.KeyPEM)
	waitFor(t, "ready", func() bool { v, err := probe(&prober); return err == nil && v["state"] == "ready" })
	v, _ := probe(&prober)
	if v["phase"] != "serving" || v["bootMs"] == nil || v["phaseMs"] == nil {
		t.Fatalf("startupz: %v", v)
	}
	if _, err := probe(nil); err == nil {
		t.Fatal("/startupz answered a client without a certificate")
	}
	// SPEC 16.10: a node leaf of this CA (a cancelled join's, say) is
	// not the founder's prober.
	nl, _ := ca.Issue(crypto.LeafRequest{CommonName: "n-cancel01", Client: true, Server: true, Validity: time.Hour}, time.Now())
	nc, _ := tls.X509KeyPair(nl.CertPEM, nl.KeyPEM)
	if _, err := probe(&nc); err == nil {
		t.Fatal("/startupz answered a node leaf")
	}
	other, _ := crypto.NewCA("cl-other001", time.Now())
	ol, _ := other.Issue(crypto.LeafRequest{CommonName: "x", Client: true, Validity: time.Hour}, time.Now())
	oc, _ := tls.X509KeyPair(ol.CertPEM, ol.KeyPEM)
	if _, err := probe(&oc); err == nil {
		t.Fatal("/startupz answered a leaf of another CA")
	}

	// Nothing changed: the host is read again, but not recorded again
	// before the interval.
	before, _ := f.Sent()
	time.Sleep(time.Second)
	if after, _ := f.Sent(); len(after) != len(before) {
		t.Fatalf("an unchanged record was sent %d more times within a second (interval 1h)", len(after)-len(before))
	}

	// A change of the host is recorded without waiting for the interval.
	os.WriteFile(filepath.Join(root, releasePath), []byte("0.3.0\n"), 0o644)
	waitFor(t, "the changed release recorded", func() bool {
		recs, _ := f.Sent()
		return recs[len(recs)-1].RunningRelease == "0.3.0"
	})

	// A founder failing for a while: the agent keeps going and catches up.
	f.SetFailing(true)
	f.Bump()
	time.Sleep(1500 * time.Millisecond)
	f.SetFailing(false)
	waitFor(t, "generation 4 applied after the outage", func() bool {
		_, applied := f.Sent()
		return applied[len(applied)-1] == 4
	})
	if !strings.Contains(logs.String(), "UNAVAILABLE") {
		t.Errorf("the outage was not logged:\n%s", logs.String())
	}
}

// TestAgentTrustsOnlyTheFounder: a server with a leaf of the cluster CA
// but without the founder SAN (a member pretending) gets no record.
func TestAgentTrustsOnlyTheFounder(t *testing.T) {
	ca, _ := crypto.NewCA(testCluster, time.Now())
	for name, o := range map[string]fakefounder.Options{
		"member leaf":           {CA: ca, ClusterID: testCluster, MemberLeaf: true},
		"another cluster's SAN": {CA: ca, ClusterID: testCluster, ServerURIs: []*url.URL{crypto.FounderURI("cl-other001")}},
	} {
		t.Run(name, func(t *testing.T) {
			f := fakefounder.New(t, o)
			var logs syncbuf.Buffer
			startAgent(t, node(t, ca, testNode), f.URL(), time.Hour, &logs)
			waitFor(t, "the refusal logged", func() bool { return strings.Contains(logs.String(), "trust=true") })
			if recs, applied := f.Sent(); len(recs)+len(applied) != 0 {
				t.Fatalf("the agent talked to an impostor: %d records, %v applied", len(recs), applied)
			}
		})
	}
}

func TestIdentityProblems(t *testing.T) {
	ca, _ := crypto.NewCA(testCluster, time.Now())
	for name, spoil := range map[string]func(root string){
		"no node.yaml": func(root string) { os.Remove(filepath.Join(root, nodeYAMLPath)) },
		"another node": func(root string) {
			os.WriteFile(filepath.Join(root, nodeYAMLPath), []byte("nodeId: n-other001\nclusterId: cl-x\n"), 0o644)
		},
		"no key": func(root string) { os.Remove(filepath.Join(root, nodeKeyPath)) },
		"another CA": func(root string) {
			o, _ := crypto.NewCA("cl-o", time.Now())
			os.WriteFile(filepath.Join(root, caPath), o.CertPEM(), 0o644)
		},
		"yaml garbage": func(root string) { os.WriteFile(filepath.Join(root, nodeYAMLPath), []byte("{{{"), 0o644) },
		"no cluster id": func(root string) {
			os.WriteFile(filepath.Join(root, nodeYAMLPath), []byte("nodeId: "+testNode+"\n"), 0o644)
		},
		"CA not a cert": func(root string) { os.WriteFile(filepath.Join(root, caPath), []byte("x"), 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			root := node(t, ca, testNode)
			spoil(root)
			err := Run(context.Background(), Config{API: "https://127.0.0.1:1", Root: root, Listen: "127.0.0.1:0"})
			if err == nil {
				t.Fatal("the agent ran without a sound identity")
			}
		})
	}
	if err := Run(context.Background(), Config{API: "http://127.0.0.1:1", Root: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("plain http api: %v", err)
	}
}

func TestJitter(t *testing.T) {
	for range 1000 {
		if d := jitter(time.Minute); d < 54*time.Second || d > 66*time.Second {
			t.Fatalf("jitter(1m) = %v", d)
		}
	}
}

func buildOf(commit string) buildinfo.Info {
	return buildinfo.Info{Version: "v0.0.0-" + commit, Commit: commit}
}

// TestMalformedPinsFile: a pins file that is not one leaves pins unread,
// is said once however often the host is read, and is said again when it
// changes; the record still goes out.
func TestMalformedPinsFile(t *testing.T) {
	ca, _ := crypto.NewCA(testCluster, time.Now())
	f := fakefounder.New(t, fakefounder.Options{CA: ca, ClusterID: testCluster})
	root := node(t, ca, testNode)
	pins := filepath.Join(root, "pins.json")
	os.WriteFile(pins, []byte(`{"pins":[{"name":"ovn"`), 0o644)
	var logs syncbuf.Buffer
	startAgent(t, root, f.URL(), time.Hour, &logs, func(c *Config) { c.PinsFile = pins })
	waitFor(t, "a record", func() bool { recs, _ := f.Sent(); return len(recs) > 0 })
	time.Sleep(time.Second) // about five more reads of the host
	if n := strings.Count(logs.String(), "field=pins"); n != 1 {
		t.Fatalf("the bad pins file was logged %d times:\n%s", n, logs.String())
	}
	if recs, _ := f.Sent(); recs[0].Release.Pins != nil {
		t.Fatalf("pins from a bad file: %+v", recs[0].Release.Pins)
	}
	os.WriteFile(pins, []byte(`{"pins":[{"name":"ovn","repository":"r"}]}`), 0o644)
	waitFor(t, "the new problem logged", func() bool { return strings.Count(logs.String(), "field=pins") == 2 })
}
