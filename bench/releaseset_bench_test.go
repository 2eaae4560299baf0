// Package bench holds end-to-end benchmarks of the founder's API: a real
// data directory and store, the real admin handler, real TLS.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"stratum/cluster"
	"stratum/founder"
	"stratum/httpapi"
	"stratum/iam"
	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/store"
	"stratum/wire"
)

// Sizes, requests and batch sizes of BenchmarkReleaseSet.
const (
	// putSamples records are sent through PUT /v1/cluster/nodes/{id}/release
	// and timed; the other nodes are recorded through the service directly
	// (the same store transaction, without HTTP and JSON decoding).
	putSamples = 200
	// admitBatch members are admitted per store transaction.
	admitBatch = 500
	// releasePath is the endpoint measured.
	releasePath = "/v1/admin/upgrades/release"
)

// BenchmarkReleaseSet measures GET /v1/admin/upgrades/release on clusters
// of 1,000 and 10,000 recorded nodes: latency p50/p99 over sequential
// requests, and the bytes on the wire for identity, gzip and zstd. It also
// reports the p50 of PUT /v1/cluster/nodes/{nodeId}/release.
//
//	go test -run '^$' -bench ReleaseSet -benchtime 1x ./bench/
//
// The fixture (founder data directory, members, records) is built once per
// size: b.Loop runs the function body once whatever -benchtime says.
func BenchmarkReleaseSet(b *testing.B) {
	for _, size := range []struct{ nodes, gets int }{{1000, 50}, {10000, 20}} {
		b.Run(fmt.Sprintf("nodes=%d", size.nodes), func(b *testing.B) {
			benchReleaseSet(b, size.nodes, size.gets)
		})
	}
}

func benchReleaseSet(b *testing.B, nodes, gets int) {
	setupStart := time.Now()
	f := newFixture(b, nodes)
	b.Logf("setup of %d nodes took %v (admit %v, record %v)", nodes, time.Since(setupStart).Round(time.Millisecond),
		f.admitTook.Round(time.Millisecond), f.recordTook.Round(time.Millisecond))

	// Warm up once (connection, TLS handshake, first allocations), and
	// check the answer is what the fixture recorded.
	body, _ := f.get(b, "identity")
	checkSet(b, body, nodes)
	// The timed GETs start from a collected heap: checking the answer
	// decoded 11 MB of JSON per 1,000 nodes in this process, garbage a
	// real client leaves in its own process, not in the founder's.
	runtime.GC()

	// Latency of an unchanged set, identity (SPEC 14): the body is read
	// to the end.
	var lat []time.Duration
	for b.Loop() {
		for range gets {
			start := time.Now()
			f.drain(b, "identity")
			lat = append(lat, time.Since(start))
		}
	}
	p50, p99 := percentile(lat, 50), percentile(lat, 99)

	// Latency right after one node recorded: the answer is rebuilt from
	// the kept fragments (one node re-encoded, the summary re-derived).
	var changed []time.Duration
	for i := range gets {
		if err := f.svc.Record("bench", f.in.Members[i+1], syntheticRequest(i+1)); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		f.drain(b, "identity")
		changed = append(changed, time.Since(start))
	}
	// And what a 304 costs a client that holds the current tag.
	var notModified []time.Duration
	tag := f.etag(b)
	for range gets {
		start := time.Now()
		f.getIfNoneMatch(b, tag)
		notModified = append(notModified, time.Since(start))
	}

	// Bytes on the wire, one request each; the transport does not
	// decompress, so what is read is what was sent.
	sizes := map[string]int{}
	var plain []byte
	for _, enc := range []string{"identity", "gzip", "zstd"} {
		start := time.Now()
		wire, got := f.get(b, enc)
		took := time.Since(start)
		if got != enc && !(enc == "identity" && got == "") {
			b.Fatalf("Accept-Encoding %s answered Content-Encoding %q", enc, got)
		}
		dec := decode(b, enc, wire)
		if plain == nil {
			plain = dec
		} else if !bytes.Equal(plain, dec) {
			b.Fatalf("%s body decodes to %d bytes that differ from identity's %d", enc, len(dec), len(plain))
		}
		sizes[enc] = len(wire)
		b.Logf("nodes=%d encoding=%s bytes=%d took=%v", nodes, enc, len(wire), took.Round(time.Microsecond))
	}
	putP50 := percentile(f.putLat, 50)
	f.phases(b, nodes, plain)

	target := 25 * time.Millisecond
	if nodes >= 10000 {
		target = 250 * time.Millisecond
	}
	verdict := "pass"
	if p99 > target {
		verdict = "MISS"
	}
	if nodes == 1000 {
		printTarget(b, "releaseset-full-p99-1k", float64(p99)/1e6, "<=", 25, "ms")
	}
	fig := fmt.Sprintf("releaseset nodes=%d get_identity_p99=%v want<=%v %s (p50 %v; after one record changed p50 %v p99 %v; 304 p99 %v)",
		nodes, p99.Round(time.Microsecond), target, verdict, p50.Round(time.Microsecond),
		percentile(changed, 50).Round(time.Microsecond), percentile(changed, 99).Round(time.Microsecond),
		percentile(notModified, 99).Round(time.Microsecond))
	b.Log(fig)
	fmt.Println(fig)
	line := fmt.Sprintf("releaseset nodes=%d gets=%d get_p50=%v get_p99=%v bytes_identity=%d bytes_gzip=%d bytes_zstd=%d ratio_gzip=%.1fx ratio_zstd=%.1fx put_p50=%v put_p99=%v puts=%d",
		nodes, len(lat), p50.Round(time.Microsecond), p99.Round(time.Microsecond),
		sizes["identity"], sizes["gzip"], sizes["zstd"],
		float64(sizes["identity"])/float64(sizes["gzip"]), float64(sizes["identity"])/float64(sizes["zstd"]),
		putP50.Round(time.Microsecond), percentile(f.putLat, 99).Round(time.Microsecond), len(f.putLat))
	b.Log(line)
	fmt.Println(line)

	b.ReportMetric(float64(p50)/1e6, "get-p50-ms")
	b.ReportMetric(float64(p99)/1e6, "get-p99-ms")
	b.ReportMetric(float64(sizes["identity"]), "bytes-identity")
	b.ReportMetric(float64(sizes["gzip"]), "bytes-gzip")
	b.ReportMetric(float64(sizes["zstd"]), "bytes-zstd")
	b.ReportMetric(float64(putP50)/1e6, "put-p50-ms")
}

// fixture is a founder's data directory with nodes members, each with a
// recorded release, served over TLS.
type fixture struct {
	srv    *httptest.Server
	client *http.Client
	token  string
	svc    *releaseset.Service
	// in is what the service reads from the store, built in memory, to
	// time releaseset.Describe alone.
	in releaseset.Input
	// putLat are the timed PUTs of records.
	putLat                []time.Duration
	admitTook, recordTook time.Duration
}

func newFixture(b *testing.B, nodes int) *fixture {
	b.Helper()
	dir := founder.DataDir(b.TempDir())
	res, err := founder.Init(dir, cluster.DevDefaults(), true, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	db, err := dir.OpenStore(founder.KeySource{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })

	f := &fixture{token: login(b, db, dir.Credentials())}
	founderID := res.Identity.FounderNodeID

	// The founder is member 1; admit the others in batches.
	start := time.Now()
	ids := []string{founderID}
	for i := 1; i < nodes; i++ {
		ids = append(ids, fmt.Sprintf("n-%08d", i))
	}
	for lo := 1; lo < len(ids); lo += admitBatch {
		hi := min(lo+admitBatch, len(ids))
		err := db.Update(func(tx *store.Tx) error {
			for i := lo; i < hi; i++ {
				m := cluster.Member{MemberView: wire.MemberView{NodeID: ids[i], Role: roleOf(i), MgmtIP: fmt.Sprintf("10.%d.%d.%d", 16+i/65536, i/256%256, i%256), Networks: map[string]wire.Network{"storage": {IP: fmt.Sprintf("10.%d.%d.%d", 96+i/65536, i/256%256, i%256), Interface: "vlan90"}}, Labels: map[string]string{"topology.rack": fmt.Sprintf("r%d", i/40)}}}
				if _, err := cluster.Admit(tx, m, time.Now()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	f.admitTook = time.Since(start)

	cp := wire.ControlPlane{Version: "v0.2.0", Commit: "4298b2fe"}
	schema := db.Schema()
	cp.SchemaLevel = &schema
	svc, err := releaseset.New(releaseset.Config{DB: db, Now: time.Now, Node: founderID, ControlPlane: cp})
	if err != nil {
		b.Fatal(err)
	}
	f.svc = svc
	f.in = releaseset.Input{Node: founderID, ControlPlane: cp, Members: ids, Records: map[string]releaseset.Stored{}}
	api := httpapi.New(httpapi.Deps{Identity: mustIAM(b, db), ReleaseSet: svc})
	f.srv = httptest.NewUnstartedServer(api.AdminHandler())
	f.srv.StartTLS()
	b.Cleanup(f.srv.Close)
	f.client = f.srv.Client()
	tr := f.client.Transport.(*http.Transport)
	tr.DisableCompression = true // count and check the bytes as sent

	// Record every node: the first putSamples over HTTP, timed, one at a
	// time; the others through the service from fillClients goroutines
	// (records share group commits).
	start = time.Now()
	for i, id := range ids {
		req := syntheticRequest(i)
		rec := req.Release
		rec.RecordedAt = time.Now().UTC()
		f.in.Records[id] = releaseset.Stored{RunningRelease: req.RunningRelease, Release: rec}
		if i < putSamples {
			body, err := json.Marshal(req)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			f.put(b, id, body)
			f.putLat = append(f.putLat, time.Since(t0))
		}
	}
	var next atomic.Int64
	next.Store(putSamples)
	var wg sync.WaitGroup
	const fillClients = 32
	errs := make(chan error, fillClients)
	for range fillClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if err := svc.Record("bench", ids[i], syntheticRequest(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	f.recordTook = time.Since(start)
	return f
}

// phaseRuns is how many times each phase is timed; the median is shown.
const phaseRuns = 3

// phases times, outside HTTP and TLS, what one GET does: the service's
// Describe (store read, JSON decoding of every record, the pure Describe),
// the pure releaseset.Describe on the same records already in memory,
// encoding the set as the handler does (json.Encoder, whole body buffered),
// and compressing the body as the handler does. Each run starts after
// a GC so that one phase's garbage is not billed to the next.
func (f *fixture) phases(b *testing.B, nodes int, body []byte) {
	median := func(fn func()) time.Duration {
		var ds []time.Duration
		for range phaseRuns {
			// Two collections empty sync.Pool (json's encode buffers) as
			// the garbage of a previous large GET does between requests.
			runtime.GC()
			runtime.GC()
			start := time.Now()
			fn()
			ds = append(ds, time.Since(start))
		}
		return percentile(ds, 50)
	}
	var set wire.ReleaseSet
	svcDescribe := median(func() {
		var err error
		if set, err = f.svc.Describe(); err != nil {
			b.Fatal(err)
		}
	})
	f.in.Now = time.Now()
	pure := median(func() { releaseset.Describe(f.in) })
	encode := median(func() {
		je := json.NewEncoder(io.Discard)
		je.SetEscapeHTML(false)
		if err := je.Encode(set); err != nil {
			b.Fatal(err)
		}
	})
	gz := median(func() {
		zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
		_, _ = zw.Write(body)
		_ = zw.Close()
	})
	zs := median(func() {
		zw, err := zstd.NewWriter(io.Discard, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = zw.Write(body)
		_ = zw.Close()
	})
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }
	line := fmt.Sprintf("releaseset nodes=%d phases service_describe=%s (store_read_and_decode=%s describe=%s) json_encode=%s gzip=%s zstd=%s",
		nodes, ms(svcDescribe), ms(svcDescribe-pure), ms(pure), ms(encode), ms(gz), ms(zs))
	b.Log(line)
	fmt.Println(line)
}

// roleOf: a few control-plane nodes, every fourth stores, the rest compute
// (releasesettest.Record's pins follow the same i%4 rule).
func roleOf(i int) string {
	switch {
	case i < 3:
		return "control-plane"
	case i%4 == 0:
		return "storage"
	}
	return "compute"
}

// syntheticRequest is node i's record: mostly the current release, one
// node in twenty still on the older build (skew), one in twenty with
// drift, as in a cluster in the middle of an upgrade.
func syntheticRequest(i int) wire.RecordRequest {
	variant := 0
	switch i % 20 {
	case 7:
		variant = 1
	case 13:
		variant = 2
	}
	running := "0.2.0"
	if variant == 1 {
		running = "0.1.0"
	}
	return wire.RecordRequest{RunningRelease: running, Release: releasesettest.Record(i, variant)}
}

// login is the bootstrap admin's session token, as POST /v1/auth/login
// would issue it.
func login(b *testing.B, db *store.DB, credentials string) string {
	b.Helper()
	raw, err := os.ReadFile(credentials)
	if err != nil {
		b.Fatal(err)
	}
	kv := map[string]string{}
	for line := range strings.Lines(string(raw)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		kv[k] = v
	}
	s, err := iam.New(iam.Config{DB: db})
	if err != nil {
		b.Fatal(err)
	}
	session, err := s.Login(context.Background(), kv["email"], kv["password"], "bench")
	if err != nil {
		b.Fatal(err)
	}
	return session.Token
}

func (f *fixture) put(b *testing.B, id string, body []byte) {
	req, err := http.NewRequest(http.MethodPut, f.srv.URL+"/v1/cluster/nodes/"+id+"/release", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b.Fatalf("PUT %s: %s %s", id, resp.Status, msg)
	}
}

// drain fetches the release set and reads it to the end without keeping
// it: the latency is the founder's, not a client's growing buffer.
func (f *fixture) drain(b *testing.B, enc string) {
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+releasePath, nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Accept-Encoding", enc)
	resp, err := f.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || n != resp.ContentLength {
		b.Fatalf("GET %s: %s, %d of %d bytes, %v", releasePath, resp.Status, n, resp.ContentLength, err)
	}
}

// etag is the current identity ETag.
func (f *fixture) etag(b *testing.B) string {
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+releasePath, nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := f.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tag := resp.Header.Get("ETag")
	if tag == "" {
		b.Fatalf("HEAD %s: no ETag (%s)", releasePath, resp.Status)
	}
	return tag
}

// getIfNoneMatch fails unless the answer is 304.
func (f *fixture) getIfNoneMatch(b *testing.B, tag string) {
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+releasePath, nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("If-None-Match", tag)
	resp, err := f.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		b.Fatalf("If-None-Match %s: %s, want 304", tag, resp.Status)
	}
}

// get fetches the release set with Accept-Encoding enc and returns the
// body as sent and its Content-Encoding.
func (f *fixture) get(b *testing.B, enc string) ([]byte, string) {
	req, err := http.NewRequest(http.MethodGet, f.srv.URL+releasePath, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Accept-Encoding", enc)
	resp, err := f.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s %s", releasePath, resp.Status, body)
	}
	return body, resp.Header.Get("Content-Encoding")
}

func decode(b *testing.B, enc string, wire []byte) []byte {
	var r io.Reader
	switch enc {
	case "identity":
		return wire
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(wire))
		if err != nil {
			b.Fatal(err)
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(wire))
		if err != nil {
			b.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	out, err := io.ReadAll(r)
	if err != nil {
		b.Fatalf("%s body: %v", enc, err)
	}
	return out
}

// checkSet fails unless the answer lists every node recorded, with the
// skew and drift the fixture's mix produces.
func checkSet(b *testing.B, body []byte, nodes int) {
	var set struct {
		RunningRelease string          `json:"runningRelease"`
		Summary        json.RawMessage `json:"summary"`
		Nodes          []struct {
			NodeID   string `json:"nodeId"`
			Recorded bool   `json:"recorded"`
		} `json:"nodes"`
	}
	var summary struct {
		Recent int               `json:"recent"`
		Skew   []json.RawMessage `json:"skew"`
		Drift  []json.RawMessage `json:"drift"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(set.Summary, &summary); err != nil {
		b.Fatal(err)
	}
	recorded := 0
	for _, n := range set.Nodes {
		if n.Recorded {
			recorded++
		}
	}
	if len(set.Nodes) != nodes || recorded != nodes || summary.Recent != nodes || set.RunningRelease != "0.1.0" {
		b.Fatalf("set has %d nodes, %d recorded, %d recent, running %q; want %d of each and 0.1.0",
			len(set.Nodes), recorded, summary.Recent, set.RunningRelease, nodes)
	}
	b.Logf("nodes=%d response: %d bytes, summary %d bytes (%d skew fields, %d drift entries), nodes[] the rest (%d bytes a node)",
		nodes, len(body), len(set.Summary), len(summary.Skew), len(summary.Drift), (len(body)-len(set.Summary))/nodes)
}

// percentile is the nearest-rank percentile p of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	return s[max(rank, 1)-1]
}

// mustIAM is the identity service over db.
func mustIAM(b *testing.B, db *store.DB) *iam.Service {
	b.Helper()
	s, err := iam.New(iam.Config{DB: db})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
