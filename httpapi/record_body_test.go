package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// TestRecordBodyBufferIsReused: record bodies are read into pooled
// buffers; a later body written over the buffer (here a refused one of
// the same size) changes nothing of the record kept and stored before.
func TestRecordBodyBufferIsReused(t *testing.T) {
	f, svc := newReleaseSetFixture(t)
	admin := f.login()
	node := f.member()
	rec := releasesettest.Record(1, 0)
	rec.OS.PrettyName = "first record"
	body, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: rec})
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/cluster/nodes/" + node + "/release"
	if r := f.do(http.MethodPut, path, admin, bytes.NewReader(body), 0); r.status != http.StatusNoContent {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	// The same length, every byte changed: refused, and read into the
	// buffer the first body was read into.
	junk := strings.Repeat("x", len(body))
	for range 4 {
		if r := f.do(http.MethodPut, path, admin, strings.NewReader(junk), 0); r.status != http.StatusBadRequest {
			t.Fatalf("PUT junk: %d %s", r.status, r.body)
		}
	}
	set, err := svc.Describe()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range set.Nodes {
		if n.NodeID != node {
			continue
		}
		if n.Release == nil || n.Release.OS == nil || n.Release.OS.PrettyName != "first record" || n.RunningRelease != "0.2.0" {
			t.Fatalf("kept record changed: %+v", n.Release)
		}
		got, _ := json.Marshal(n.Release.Packages)
		want, _ := json.Marshal(rec.Packages)
		if !bytes.Equal(got, want) {
			t.Fatalf("kept packages changed:\n got %.200s\nwant %.200s", got, want)
		}
		return
	}
	t.Fatalf("node %s not in the set", node)
}
