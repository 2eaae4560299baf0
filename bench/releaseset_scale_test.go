package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"stratum/cluster"
	"stratum/founder"
	"stratum/httpapi"
	"stratum/internal/selfcpu"
	"stratum/releaseset"
	"stratum/store"
	"stratum/wire"
)

// BenchmarkReleaseSetScale is SPEC section 21's release set at 100,000
// nodes (RELEASESET_SCALE_NODES to change it), the founder in this process:
//
//		go test -run '^$' -bench ReleaseSetScale -benchtime 1x -timeout 30m ./bench/
//
//	  - record rate: every node's record sent by PUT /v1/cluster/nodes/{id}/release
//	    (bearer token, TLS, keep-alive) from recordLoad's clients;
//	    records of releasesettest (4 extensions, 30 packages, 36 pins, ~11 KB),
//	    one node in twenty on the older build, one in twenty with drift;
//	  - memory: the process's anonymous resident memory (RssAnon: heap,
//	    stacks; not the store file's mapped pages, which are page cache) after
//	    the records and the first summary, minus what it held before the
//	    founder opened its store;
//	  - summary: GET ?view=summary of the unchanged set, p99 of summaryGets;
//	  - page: GET ?limit=500&after=ID walking nodes[] from the start, p99 of
//	    pageGets distinct pages (none answered before: each is encoded).
//
// GETs ask for zstd as `stratum release-set` and the console do; the
// identity figures are printed beside them.
func BenchmarkReleaseSetScale(b *testing.B) {
	nodes := 100000
	if v, err := strconv.Atoi(os.Getenv("RELEASESET_SCALE_NODES")); err == nil && v > 0 {
		nodes = v
	}
	for b.Loop() {
		benchReleaseSetScale(b, nodes)
	}
}

const (
	summaryGets = 30
	// pageGets: 100 pages, so that the nearest-rank p99 is the second
	// slowest page and not the slowest (with fewer than 101 samples it
	// is the maximum: one stall of the shared machine was the figure).
	// 100 pages of 500 are half of 100,000 nodes; the identity pages
	// read the other half.
	pageGets  = 100
	pageLimit = 500
)

func benchReleaseSetScale(b *testing.B, nodes int) {
	runtime.GC()
	debug.FreeOSMemory()
	anon0 := procStatus(os.Getpid(), "RssAnon")

	dir := founder.DataDir(b.TempDir())
	res, err := founder.Init(dir, cluster.DevDefaults(), true, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	db, err := dir.OpenStore(founder.KeySource{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	token := login(b, db, dir.Credentials())
	ids := []string{res.Identity.FounderNodeID}
	for i := 1; i < nodes; i++ {
		ids = append(ids, fmt.Sprintf("n-%08d", i))
	}
	start := time.Now()
	for lo := 1; lo < len(ids); lo += admitBatch {
		hi := min(lo+admitBatch, len(ids))
		if err := db.Update(func(tx *store.Tx) error {
			for i := lo; i < hi; i++ {
				m := cluster.Member{MemberView: wire.MemberView{NodeID: ids[i], Role: roleOf(i), MgmtIP: fmt.Sprintf("10.%d.%d.%d", 16+i/65536, i/256%256, i%256)}}
				if _, err := cluster.Admit(tx, m, time.Now()); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("admitted %d members in %v", nodes, time.Since(start).Round(time.Millisecond))

	cp := wire.ControlPlane{Version: "v0.2.0", Commit: "4298b2fe"}
	svc, err := releaseset.New(releaseset.Config{DB: db, Now: time.Now, Node: ids[0], ControlPlane: cp})
	if err != nil {
		b.Fatal(err)
	}
	api := httpapi.New(httpapi.Deps{Identity: mustIAM(b, db), ReleaseSet: svc})
	srv := newTLSServer(b, api.AdminHandler())
	client := srv.Client()
	tr := client.Transport.(*http.Transport)
	tr.DisableCompression = true
	recordClients := defaultRecordClients
	if v, err := strconv.Atoi(os.Getenv("RELEASESET_RECORD_CLIENTS")); err == nil && v > 0 {
		recordClients = v
	}

	// The bodies repeat every 60 nodes (releasesettest varies by i mod 60).
	bodies := make([][]byte, 60)
	for i := range bodies {
		if bodies[i], err = json.Marshal(syntheticRequest(i)); err != nil {
			b.Fatal(err)
		}
	}
	load := recordLoad{host: srv.Listener.Addr().String(), tls: tr.TLSClientConfig, token: token, ids: ids, bodies: bodies, clients: recordClients}
	// recordAll sends every node's record and returns the wall time and
	// this process's CPU it took.
	recordAll := func() (time.Duration, time.Duration) {
		cpu0 := selfcpu.Total()
		t0 := time.Now()
		if err := load.run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0), selfcpu.Total() - cpu0
	}
	// The rate is taken on a machine done with what ran before it
	// (settle_test.go).
	settle(b)
	stopProfile := startCPUProfile(b, os.Getenv("RELEASESET_RECORD_CPUPROFILE"))
	recordTook, recordCPU := recordAll()
	stopProfile()
	rate := float64(nodes) / recordTook.Seconds()
	b.Logf("recorded %d nodes in %v from %d clients: %.3f ms of this process's CPU a record (founder and clients), %.2f cores busy, load average %s",
		nodes, recordTook.Round(time.Millisecond), recordClients, float64(recordCPU)/1e6/float64(nodes), recordCPU.Seconds()/recordTook.Seconds(), loadAvg())
	// The rate depends on what else the machine runs; the CPU a record
	// costs (this process's: the founder and its clients, which share it)
	// does much less, so a change to the record path shows in it even on
	// a busy machine.
	cpuLine := fmt.Sprintf("cpu per record: %.0f µs (founder and clients in this process, %d records, load average %s)", float64(recordCPU)/1e3/float64(nodes), nodes, loadAvg())
	b.Log(cpuLine)
	fmt.Println(cpuLine)
	// Then every node records the same release again, as an agent does
	// periodically: the steady state (not audited; the previous record
	// is read first).
	againTook, againCPU := recordAll()
	againLine := fmt.Sprintf("records again: %.0f/s, cpu per record: %.0f µs (%d records, load average %s)",
		float64(nodes)/againTook.Seconds(), float64(againCPU)/1e3/float64(nodes), nodes, loadAvg())
	b.Log(againLine)
	fmt.Println(againLine)

	// read holds each answer, valid until the next get: a client's
	// garbage (a page is 2.6 MB, read 100 times) is its own process's,
	// and here it would set off the collector over the founder's heap in
	// the middle of the timed GETs.
	var read bytes.Buffer
	get := func(query, enc string) (time.Duration, []byte, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+releasePath+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept-Encoding", enc)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		read.Reset()
		_, err = read.ReadFrom(resp.Body)
		body := read.Bytes()
		resp.Body.Close()
		took := time.Since(t0)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s %v %.200s", query, resp.Status, err, body)
		}
		return took, body, resp.Header.Get("ETag")
	}
	// The first summary after the records builds the set's view.
	first, body, _ := get("?view=summary", "identity")
	var sum struct {
		Members int `json:"members"`
		Summary struct {
			Recent int               `json:"recent"`
			Skew   []json.RawMessage `json:"skew"`
			Drift  []json.RawMessage `json:"drift"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(body, &sum); err != nil {
		b.Fatal(err)
	}
	if sum.Members != nodes || sum.Summary.Recent != nodes {
		b.Fatalf("summary: %d members, %d recent; want %d", sum.Members, sum.Summary.Recent, nodes)
	}
	b.Logf("summary: %d bytes identity (%d skew fields, %d drift entries), first GET after the records %v",
		len(body), len(sum.Summary.Skew), len(sum.Summary.Drift), first.Round(time.Microsecond))
	summaryBytes := len(body)
	// The client's copy of that answer (49 MB) is not the founder's
	// memory, measured next.
	body, read = nil, bytes.Buffer{}

	runtime.GC()
	debug.FreeOSMemory()
	anon := procStatus(os.Getpid(), "RssAnon") - anon0
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("memory: RssAnon %d MiB above the start, Go heap in use %d MiB, RssFile %d MiB (the store's mapped file)",
		anon>>20, ms.HeapInuse>>20, procStatus(os.Getpid(), "RssFile")>>20)
	if path := os.Getenv("RELEASESET_SCALE_HEAPPROFILE"); path != "" {
		if err := writeHeapProfile(path); err != nil {
			b.Fatal(err)
		}
	}

	lat := map[string][]time.Duration{}
	var zbytes int
	for _, enc := range []string{"zstd", "identity"} {
		get("?view=summary", enc) // derive the coding once
		// Each timed phase starts from a collected heap: the bodies this
		// process read as a client in the phase before (49 MB each for
		// the identity summary) are garbage a real client leaves in its
		// own process, not in the founder's.
		runtime.GC()
		for range summaryGets {
			d, body, _ := get("?view=summary", enc)
			lat["summary-"+enc] = append(lat["summary-"+enc], d)
			if enc == "zstd" {
				zbytes = len(body)
			}
		}
	}
	var pageBytes int
	pages := max(1, min(pageGets, nodes/(2*pageLimit)))
	for _, enc := range []string{"zstd", "identity"} {
		runtime.GC()
		after := ""
		if enc == "identity" {
			after = ids[pages*pageLimit] // pages not asked for yet
		}
		for range pages {
			q := "?limit=" + strconv.Itoa(pageLimit)
			if after != "" {
				q += "&after=" + after
			}
			d, body, _ := get(q, enc)
			lat["page-"+enc] = append(lat["page-"+enc], d)
			var page struct {
				Next string `json:"next"`
			}
			if enc == "identity" {
				pageBytes = len(body)
				if err := json.Unmarshal(body, &page); err != nil {
					b.Fatal(err)
				}
				after = page.Next
			} else {
				// The next page starts after the last node of this one.
				i := 0
				if after != "" {
					i = indexOf(ids, after) + 1
				}
				after = ids[i+pageLimit-1]
			}
		}
	}
	ms2 := func(d time.Duration) float64 { return float64(d) / 1e6 }
	line := fmt.Sprintf("releaseset-scale nodes=%d record_rate=%.0f/s summary_p50=%.1fms summary_p99=%.1fms (identity p99 %.1fms; %d bytes identity, %d zstd) page%d_p50=%.1fms page%d_p99=%.1fms (%d pages, slowest %.1fms; identity p99 %.1fms, %d bytes) rss_anon=%dMiB heap=%dMiB",
		nodes, rate, ms2(percentile(lat["summary-zstd"], 50)), ms2(percentile(lat["summary-zstd"], 99)), ms2(percentile(lat["summary-identity"], 99)),
		summaryBytes, zbytes, pageLimit, ms2(percentile(lat["page-zstd"], 50)), pageLimit, ms2(percentile(lat["page-zstd"], 99)),
		len(lat["page-zstd"]), ms2(percentile(lat["page-zstd"], 100)), ms2(percentile(lat["page-identity"], 99)), pageBytes, anon>>20, ms.HeapInuse>>20)
	b.Log(line)
	fmt.Println(line)
	suffix := ""
	if nodes != 100000 {
		suffix = "-at" + strconv.Itoa(nodes)
	}
	printTarget(b, "releaseset-summary-p99-100k"+suffix, ms2(percentile(lat["summary-zstd"], 99)), "<=", 50, "ms")
	printTarget(b, "releaseset-page500-p99-100k"+suffix, ms2(percentile(lat["page-zstd"], 99)), "<=", 20, "ms")
	printTarget(b, "releaseset-memory-100k"+suffix, float64(anon>>20), "<=", 1024, "MiB")
	printTarget(b, "releaseset-record-rate", rate, ">=", 5000, "/s")
}

func indexOf(ids []string, id string) int {
	for i, v := range ids {
		if v == id {
			return i
		}
	}
	return -1
}

// newTLSServer serves h over TLS on a loopback port until the benchmark ends.
func newTLSServer(b *testing.B, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.StartTLS()
	b.Cleanup(srv.Close)
	return srv
}

// startCPUProfile profiles this process into path until the returned
// func is called (RELEASESET_RECORD_CPUPROFILE: the records alone, founder
// and clients); nothing when path is empty.
func startCPUProfile(b *testing.B, path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// writeHeapProfile writes what the heap holds now to path
// (RELEASESET_SCALE_HEAPPROFILE: what the founder keeps per node).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
