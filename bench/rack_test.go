package bench

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"stratum/internal/labtest"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// The rack benchmarks (SPEC 21 targets of issue 33) run on the lab of
// internal/labtest: LAB_HOSTS hosts (default 50), each a network
// namespace on a bridge with its own address and software TPM, a real
// `stratum join` and then a real `stratum agent`; the founder in its own
// namespace. They need root and iproute2 and skip without them. The joins
// are zero-touch: the founder holds the inventory of the rack (each host
// by its EK certificate's hash, labtest.Enroll) and trusts the lab's TPM
// manufacturer (--ek-ca); each joiner proves its TPM (credential
// activation and a quote binding its key) and the founder approves it by
// itself.

// rackHosts is LAB_HOSTS, else 50.
func rackHosts(b *testing.B) int {
	n := 50
	if s := os.Getenv("LAB_HOSTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > labtest.MaxHosts {
			b.Fatalf("LAB_HOSTS=%q: want 1 to %d", s, labtest.MaxHosts)
		}
		n = v
	}
	return n
}

// BenchmarkRackJoin: N joiners start at once; the figure is the time from
// their start to every one joined and recorded in the release set
// (target rack-join-N, want <= 60 s for 50), and the founder's CPU
// (utime+stime from /proc/PID/stat) over that run per join, less its idle
// CPU over as long (target rack-approve-cpu-ms): registration, the TPM
// attestation (the claim's EK chain checked, a credential challenge made,
// the proof verified), the inventory's approval, delivery (leaf issued),
// progress, every member's agent applying each
// new generation, the release records.
//
//	LAB_HOSTS=8 go test -run '^$' -bench RackJoin -benchtime 1x ./bench/
//
// RACK_PROFILE=FILE has the founder write its CPU profile there (start to
// stop, lab setup included: go tool pprof -top FILE).
func BenchmarkRackJoin(b *testing.B) {
	n := rackHosts(b)
	lab := labtest.New(b, labtest.Options{Hosts: n})
	o := stratumtest.FounderOptions{Dev: true, LogFile: filepath.Join(lab.Dir, "founder.log")}
	if p := os.Getenv("RACK_PROFILE"); p != "" {
		// The founder's own CPU profile, written when it stops.
		abs, err := filepath.Abs(p)
		if err != nil {
			b.Fatal(err)
		}
		o.Args, o.StopWithin = []string{"--cpu-profile", abs}, 20*time.Second
	}
	f := lab.StartFounder(b, o)
	f.Operator(b) // logged in before the measure
	idle0 := f.CPU()
	time.Sleep(3 * time.Second)
	idleRate := float64(f.CPU()-idle0) / float64(3*time.Second)

	var took, joined time.Duration
	var cpu time.Duration
	for b.Loop() {
		cpu0 := f.CPU()
		rack := lab.Rack(b, labtest.RackOptions{})
		joined = rack.WaitJoined(b, 5*time.Minute)
		took = lab.WaitRecorded(b, lab.Hosts, 2*time.Minute).Sub(rack.Started)
		cpu = f.CPU() - cpu0
		lab.CheckJoined(b, lab.Hosts)
		lab.CheckZeroTouch(b, lab.Hosts, lab.Audit(b))
		rack.AgentsRunning(b)
	}
	idle := time.Duration(idleRate * float64(took))
	perJoin := float64((cpu - idle).Microseconds()) / 1000 / float64(n)
	fmt.Printf("rack-join hosts=%d joined=%v recorded=%v founder_cpu=%v idle_share=%v per_join=%.1fms (gross %.1fms) load1=%s\n",
		n, joined.Round(time.Millisecond), took.Round(time.Millisecond), cpu, idle.Round(10*time.Millisecond), perJoin,
		float64(cpu.Microseconds())/1000/float64(n), loadAvg())
	printTarget(b, fmt.Sprintf("rack-join-%d", n), took.Seconds(), "<=", 60, "s")
	printTarget(b, "rack-approve-cpu-ms", perJoin, "<=", rackApproveCPULimit, "ms")
	b.ReportMetric(took.Seconds(), "s/rack")
	b.ReportMetric(perJoin, "founder-cpu-ms/join")
}

// rackApproveCPULimit is the founder's CPU a join may cost, everything
// about it included: 20 ms, 1 s of founder CPU for a rack of 50.
const rackApproveCPULimit = 20

// rackRelease is the release the rack upgrades to: 64 MiB in all (the
// blob, a 3 MiB sysext image and small files).
const rackRelease = 64 << 20

// BenchmarkRackUpgrade: N joiners on 0.1.0 start at once and upgrade
// themselves to the founder-served, signed 0.2.0 (64 MiB) before they
// join. The founder's link is shaped (RACK_UPGRADE_RATE, default 1gbit,
// tc tbf; "0" leaves it unshaped), so the bound is the network's: the
// bandwidth is measured first, four downloads at once of the release's
// blob from the same founder (its four release slots), and the bound is
// N x 64 MiB over it. Targets: rack-upgrade-N, the makespan (start to the
// last joiner's upgrade hook, run once every file is verified) over the
// bound, want <= 1.3x; rack-upgrade-N-slowest, the slowest joiner's
// time over the median's, want <= 2x (no joiner starves).
//
//	LAB_HOSTS=8 go test -run '^$' -bench RackUpgrade -benchtime 1x ./bench/
func BenchmarkRackUpgrade(b *testing.B) {
	n := rackHosts(b)
	rate := os.Getenv("RACK_UPGRADE_RATE")
	if rate == "" {
		rate = "1gbit"
	}
	lab := labtest.New(b, labtest.Options{Hosts: n})
	f := lab.StartFounder(b, stratumtest.FounderOptions{Dev: true, LogFile: filepath.Join(lab.Dir, "founder.log")})
	if rate != "0" {
		lab.FounderHost.Slow(b, rate, 1<<20, 50*time.Millisecond)
	}
	tree := stratumtest.SignedReleaseTree(b, "0.2.0", []string{"0.1.0"}, rackRelease-(3<<20+17)-100)
	tree.TrustOn(b, f)
	op := f.Operator(b)
	op.Must(b, "POST", "/v1/admin/releases", map[string]string{"path": tree.Dir}, http.StatusCreated, nil)
	op.Must(b, "PUT", "/v1/admin/cluster/release", map[string]any{"release": "0.2.0"}, http.StatusOK, nil)
	total := treeBytes(b, tree.Dir)
	keys := filepath.Join(lab.Dir, "release-keys")
	if err := os.MkdirAll(keys, 0o755); err != nil {
		b.Fatal(err)
	}
	pub, err := os.ReadFile(tree.PubFile)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "release.pub"), pub, 0o644); err != nil {
		b.Fatal(err)
	}
	bw := rackBandwidth(b, lab, f, tree.Blob)
	bound := time.Duration(float64(n) * float64(total) / bw * float64(time.Second))

	// Each host's hook notes when it ran: the upgrade downloaded and
	// every file verified.
	hook := func(h *labtest.Host) string {
		p := filepath.Join(h.Dir, "hook.sh")
		script := "#!/bin/sh\ndate +%s.%N > " + filepath.Join(h.Dir, "upgraded.tmp") + " && echo \"$2\" >> " + filepath.Join(h.Dir, "upgraded.tmp") +
			" && mv " + filepath.Join(h.Dir, "upgraded.tmp") + " " + filepath.Join(h.Dir, "upgraded") + "\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			b.Fatal(err)
		}
		return p
	}
	var times []time.Duration
	var makespan time.Duration
	for b.Loop() {
		rack := lab.Rack(b, labtest.RackOptions{SelfUpgrade: true, UpgradeHook: hook, ReleaseKeys: keys})
		times = waitUpgraded(b, rack, 10*time.Minute+20*bound)
		rack.WaitJoined(b, 10*time.Minute+20*bound)
		lab.CheckZeroTouch(b, lab.Hosts, lab.Audit(b))
		if dir := os.Getenv("RACK_OUTPUT"); dir != "" {
			// Each joiner's output, to read what it waited for.
			for _, j := range rack.Joins {
				_ = os.WriteFile(filepath.Join(dir, j.Host.Name+".out"), []byte(j.Output()), 0o644)
			}
		}
	}
	makespan = slices.Max(times)
	med := times[len(times)/2]
	ratio := float64(makespan) / float64(bound)
	slowest := float64(makespan) / float64(med)
	fmt.Printf("rack-upgrade hosts=%d release=%.1fMiB link=%s bandwidth=%.1fMiB/s bound=%v makespan=%v first=%v median=%v slowest=%v ratio=%.2f load1=%s\n",
		n, float64(total)/(1<<20), rate, bw/(1<<20), bound.Round(time.Millisecond), makespan.Round(time.Millisecond),
		times[0].Round(time.Millisecond), med.Round(time.Millisecond), makespan.Round(time.Millisecond), ratio, loadAvg())
	printTarget(b, fmt.Sprintf("rack-upgrade-%d", n), ratio, "<=", 1.3, "x")
	printTarget(b, fmt.Sprintf("rack-upgrade-%d-slowest", n), slowest, "<=", 2, "x")
	b.ReportMetric(ratio, "makespan/bound")
}

// treeBytes is the size of every file of a release tree but its payload
// (manifest and signature): what a joiner downloads.
func treeBytes(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && !strings.HasPrefix(p, filepath.Join(dir, "payload")) {
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

// rackBandwidth is what the founder's link carries, in bytes a second:
// four registrations (on 0.1.0, so offered the upgrade) each download
// the release's blob at once, from this process over the lab's bridge.
func rackBandwidth(b *testing.B, lab *labtest.Lab, f *stratumtest.Founder, blob string) float64 {
	const readers = 4
	token := f.Operator(b).JoinTokenUses(b, "worker", readers)
	var clients []*stratumtest.Client
	var ids []string
	for i := range readers {
		// The join listener's certificate names the founder's management
		// address and localhost, not the lab address it listens on:
		// joiners check the CA pin and the founder's URI SAN, not the
		// address.
		key := stratumtest.NewJoinerKey(b)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.Pool, Certificates: []tls.Certificate{key.Cert}, ServerName: "localhost"}}
		b.Cleanup(tr.CloseIdleConnections)
		c := &stratumtest.Client{HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Minute}, Base: "https://" + f.Join}
		v := c.Register(b, wire.RegisterRequest{Token: token, Release: "0.1.0", SelfUpgrade: true, Hostname: fmt.Sprintf("calibrate-%d", i), MgmtIP: lab.Gateway.String()}, http.StatusCreated)
		if v.State != "needs-upgrade" {
			b.Fatalf("calibration registration: %+v", v)
		}
		clients, ids = append(clients, c), append(ids, v.JoinID)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got int64
	var errs []error
	start := time.Now()
	for i := range readers {
		wg.Go(func() {
			resp, err := clients[i].HTTP.Get(clients[i].Base + "/v1/join/registrations/" + ids[i] + "/release/" + blob)
			if err == nil {
				var n int64
				n, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("calibration download: %s", resp.Status)
				}
				mu.Lock()
				got += n
				mu.Unlock()
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	bw := float64(got) / took.Seconds()
	fmt.Printf("rack-upgrade calibration: %d downloads at once, %.1f MiB in %v: %.1f MiB/s\n", readers, float64(got)/(1<<20), took.Round(time.Millisecond), bw/(1<<20))
	return bw
}

// waitUpgraded waits until every host's hook has run and answers each
// host's time from the rack's start, sorted.
func waitUpgraded(b *testing.B, rack *labtest.Rack, limit time.Duration) []time.Duration {
	deadline := time.Now().Add(limit)
	var times []time.Duration
	for _, j := range rack.Joins {
		for {
			raw, err := os.ReadFile(filepath.Join(j.Host.Dir, "upgraded"))
			if err == nil {
				lines := strings.Fields(string(raw))
				sec, perr := strconv.ParseFloat(lines[0], 64)
				if perr != nil || len(lines) < 2 || lines[1] != "0.2.0" {
					b.Fatalf("%s's hook wrote %q", j.Host.Name, raw)
				}
				at := time.Unix(0, int64(sec*float64(time.Second)))
				times = append(times, at.Sub(rack.Started))
				break
			}
			select {
			case <-j.Done():
				if j.Code() != 0 {
					b.Fatalf("%s's joiner exited %d before its upgrade:\n%s", j.Host.Name, j.Code(), j.Output())
				}
			default:
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s has not upgraded after %v:\n%s", j.Host.Name, limit, j.Output())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	slices.Sort(times)
	return times
}
