package httpapi

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"testing"
	"time"

	"stratum/release/releasetest"
	"stratum/release/repo"
)

// heapAfterGC is the live heap once garbage is collected (twice, so the
// chunk pool's victims are gone too).
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestServeNoLeak: hundreds of responses ended every way one ends (whole,
// ranged, suffix, HEAD, 304, 416, 404, RELEASE_BUSY, a client that goes away in
// the middle) give back every slot and leave no goroutine and no heap
// behind. The founder serves releases for months; a slot, a goroutine or
// a 1 MiB chunk buffer kept per response would exhaust it.
func TestServeNoLeak(t *testing.T) {
	// Large enough that a stalled reader's response does not fit in the
	// socket buffers.
	f := newFixture(t, 12*repo.ChunkSize+12345, 2)
	// A reader that stops reading really holds its slot, so RELEASE_BUSY
	// can be provoked.
	f.client.Transport.(*http.Transport).DialContext = releasetest.StallingDialer()
	size := int64(len(f.data))
	rng := rand.New(rand.NewPCG(7, 7))

	want := func(what string, resp *http.Response, status int, body []byte, wantLen int64) {
		t.Helper()
		if resp.StatusCode != status || (wantLen >= 0 && int64(len(body)) != wantLen) {
			t.Fatalf("%s: %d with %d bytes, want %d with %d", what, resp.StatusCode, len(body), status, wantLen)
		}
	}
	// open starts a whole-file GET and returns it unread: it holds a slot.
	open := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, f.url(f.blob), nil)
		resp, err := f.client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("holding read: %v %v", err, resp)
		}
		return resp
	}
	round := func() {
		t.Helper()
		resp, body, _ := f.do(t, "GET", f.url(f.blob), "Range", "bytes=0-3145727")
		want("first chunks", resp, 206, body, 3<<20)
		for range 12 {
			a := rng.Int64N(size)
			b := min(size-1, a+rng.Int64N(2*repo.ChunkSize))
			resp, body, _ := f.do(t, "GET", f.url(f.blob), "Range", fmt.Sprintf("bytes=%d-%d", a, b))
			want("range", resp, 206, body, b-a+1)
		}
		resp, body, _ = f.do(t, "GET", f.url(f.blob), "Range", "bytes=-1000", "If-Range", f.etag)
		want("suffix range", resp, 206, body, 1000)
		resp, body, _ = f.do(t, "HEAD", f.url(f.blob))
		want("HEAD", resp, 200, body, 0)
		resp, body, _ = f.do(t, "GET", f.url(f.blob), "If-None-Match", f.etag)
		want("If-None-Match", resp, 304, body, 0)
		resp, _, _ = f.do(t, "GET", f.url(f.blob), "Range", fmt.Sprintf("bytes=%d-", size+10))
		want("unsatisfiable", resp, 416, nil, -1)
		resp, _, _ = f.do(t, "GET", f.url("os/blobs/sha256/"+fmt.Sprintf("%064x", rng.Uint64())))
		want("unknown file", resp, 404, nil, -1)

		// Every slot held by a reader that stalls: the next is refused.
		held := []*http.Response{open(), open()}
		resp, _, _ = f.do(t, "GET", f.url(f.blob), "Range", "bytes=0-99")
		want("busy", resp, 503, nil, -1)
		// One holder goes away mid-body, the other reads to the end.
		if _, err := io.ReadFull(held[0].Body, make([]byte, 100<<10)); err != nil {
			t.Fatal(err)
		}
		held[0].Body.Close()
		if b, err := io.ReadAll(held[1].Body); err != nil || int64(len(b)) != size {
			t.Fatalf("holder read %d bytes: %v", len(b), err)
		}
		held[1].Body.Close()

		// A client whose context ends in the middle of a range.
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url(f.blob), nil)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", repo.ChunkSize/2))
		if resp, err := f.client.Do(req); err == nil {
			_, _ = io.ReadFull(resp.Body, make([]byte, 10<<10))
			cancel()
			resp.Body.Close()
		}
		cancel()
		waitSlots(t, f.mirror)
	}

	round() // warm up: the index cache, the chunk pool, TLS
	f.client.CloseIdleConnections()
	goroutines := runtime.NumGoroutine()
	before := heapAfterGC()
	const rounds = 8
	for range rounds {
		round()
	}
	f.client.CloseIdleConnections()
	releasetest.WaitGoroutines(t, goroutines)
	after := heapAfterGC()
	grown := int64(after) - int64(before)
	t.Logf("live heap %d -> %d bytes (%+d) over %d rounds of 22 responses", before, after, grown, rounds)
	if grown > 1<<20 {
		t.Errorf("the live heap grew by %d bytes over %d responses: something outlives its response", grown, rounds*22)
	}
	if n := f.mirror.BusyCount(); n != rounds+1 {
		t.Errorf("%d RELEASE_BUSY answers, want %d", n, rounds+1)
	}
}

// waitSlots waits for every release slot to be given back.
func waitSlots(t *testing.T, m *repo.Service) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for m.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d release slots still taken after every response ended", m.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
