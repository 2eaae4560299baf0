package releaseset_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"stratum/apierr"
	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// TestViewsMatchTheWholeAnswer checks ?view=summary and the pages against
// the whole answer (the seed's, itself checked against Describe): the
// summary is the whole answer without nodes[] plus the member count, and
// the pages, joined, are nodes[] in order. A page's ETag changes exactly
// when its bytes do. It runs with entries kept and with the whole answer
// streamed (a set over the fragment budget).
func TestViewsMatchTheWholeAnswer(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed=%v", streamed), func(t *testing.T) {
			if streamed {
				defer releaseset.SetFragmentBudget(1)()
			}
			testViews(t)
		})
	}
}

func testViews(t *testing.T) {
	now := releasesettest.RecordedAt
	svc, _, founder := devSet(t, func() time.Time { return now }, 11)
	ids := []string{founder}
	for i := 1; i <= 11; i++ {
		ids = append(ids, fmt.Sprintf("n-%08d", i))
	}
	for i, id := range ids[:10] { // two members never record
		if err := svc.Record("test", id, wire.RecordRequest{RunningRelease: fmt.Sprintf("0.%d.0", 2+i%2), Release: releasesettest.Record(i, i%3)}); err != nil {
			t.Fatal(err)
		}
	}
	whole := func() map[string]json.RawMessage {
		a, err := svc.Answer()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if buf.Len() != a.Size() {
			t.Fatalf("whole answer: Size %d, wrote %d", a.Size(), buf.Len())
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	read := func(a *releaseset.Answer) map[string]json.RawMessage {
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, buf.Bytes())
		}
		return m
	}
	check := func(step string) {
		t.Helper()
		w := whole()
		sa, err := svc.SummaryAnswer()
		if err != nil {
			t.Fatal(err)
		}
		s := read(sa)
		if _, ok := s["nodes"]; ok {
			t.Fatalf("%s: the summary carries nodes[]", step)
		}
		for k, v := range w {
			if k == "nodes" {
				continue
			}
			if !bytes.Equal(s[k], v) {
				t.Fatalf("%s: summary %s = %s, the whole answer has %s", step, k, s[k], v)
			}
		}
		if string(s["members"]) != fmt.Sprint(len(ids)) {
			t.Fatalf("%s: members %s, want %d", step, s["members"], len(ids))
		}
		var want, got []json.RawMessage
		if err := json.Unmarshal(w["nodes"], &want); err != nil {
			t.Fatal(err)
		}
		after := ""
		for pages := 0; ; pages++ {
			pa, err := svc.Page(after, 5)
			if err != nil {
				t.Fatal(err)
			}
			p := read(pa)
			pageInZstd(t, pa)
			var nodes []json.RawMessage
			if err := json.Unmarshal(p["nodes"], &nodes); err != nil {
				t.Fatal(err)
			}
			got = append(got, nodes...)
			if !bytes.Equal(p["runningRelease"], w["runningRelease"]) {
				t.Fatalf("%s: page runningRelease %s, want %s", step, p["runningRelease"], w["runningRelease"])
			}
			next, more := p["next"]
			if !more {
				break
			}
			if err := json.Unmarshal(next, &after); err != nil {
				t.Fatal(err)
			}
			if pages > 10 {
				t.Fatal("pages never end")
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the pages joined (%d nodes) differ from nodes[] (%d)", step, len(got), len(want))
		}
	}
	check("ten of twelve recorded")
	tag := func(after string) string {
		a, err := svc.Page(after, 5)
		if err != nil {
			t.Fatal(err)
		}
		return a.ETag
	}
	first, second := tag(""), tag(ids[4])
	// A record on the second page changes its tag, not the first's.
	if err := svc.Record("test", ids[6], wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(6, 2)}); err != nil {
		t.Fatal(err)
	}
	check("one record changed")
	if tag("") != first {
		t.Error("the first page's ETag changed though none of its nodes did")
	}
	if tag(ids[4]) == second {
		t.Error("the second page's ETag did not change with one of its records")
	}
	now = now.Add(releaseset.RecentWindow + time.Second)
	check("every record stale")
	if tag("") == first {
		t.Error("the first page's ETag did not change when its nodes turned stale")
	}

	for _, tc := range []struct {
		after string
		limit int
		field string
	}{{"", 0, "limit"}, {"", releaseset.MaxPageLimit + 1, "limit"}, {"n-nobody", 5, "after"}} {
		_, err := svc.Page(tc.after, tc.limit)
		e, ok := apierr.As(err)
		if !ok || e.Code != apierr.InvalidInput || len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
			t.Errorf("Page(%q, %d): %v, want INVALID_INPUT at %s", tc.after, tc.limit, err, tc.field)
		}
	}
}

// pageInZstd fails unless a's zstd coding, made of the records' kept
// frames without compressing, decodes to its identity bytes, by the
// decoder the CLI uses and by the zstd command (the reference
// implementation) when it is installed.
func pageInZstd(t *testing.T, a *releaseset.Answer) {
	t.Helper()
	var plain, coded bytes.Buffer
	if _, err := a.WriteTo(&plain); err != nil {
		t.Fatal(err)
	}
	body, size, ok := a.Encoded("zstd")
	if !ok {
		t.Fatal("a page has no zstd coding of its own")
	}
	if _, err := body.WriteTo(&coded); err != nil {
		t.Fatal(err)
	}
	if coded.Len() != size || plain.Len() != a.Size() {
		t.Fatalf("zstd: %d bytes, Size says %d; identity %d, Size says %d", coded.Len(), size, plain.Len(), a.Size())
	}
	got, err := zstdDecoder.DecodeAll(coded.Bytes(), nil)
	if err != nil || !bytes.Equal(got, plain.Bytes()) {
		t.Fatalf("zstd page decodes to %d bytes (%v), identity is %d", len(got), err, plain.Len())
	}
	if zstdCmd, err := exec.LookPath("zstd"); err == nil {
		cmd := exec.Command(zstdCmd, "-d", "-c")
		cmd.Stdin = bytes.NewReader(coded.Bytes())
		out, err := cmd.Output()
		if err != nil || !bytes.Equal(out, plain.Bytes()) {
			t.Fatalf("zstd -d: %v, %d bytes, identity is %d", err, len(out), plain.Len())
		}
	}
}

var zstdDecoder, _ = zstd.NewReader(nil)

// TestLargeSetBuiltInBackground: from backgroundBuildMembers members a
// reader never waits for a build: after a record it gets the last view
// (same ETag, same bytes) until the next, built in the background, shows
// the record.
func TestLargeSetBuiltInBackground(t *testing.T) {
	defer releaseset.SetBackgroundBuildMembers(2)()
	now := releasesettest.RecordedAt
	svc, _, founder := devSet(t, func() time.Time { return now }, 1)
	first, err := svc.SummaryAnswer() // no view yet: built now
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Record("test", founder, wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(0, 0)}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a, err := svc.SummaryAnswer()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		recorded := bytes.Contains(buf.Bytes(), []byte(`"recent":1`))
		if a.ETag == first.ETag && recorded || a.ETag != first.ETag && !recorded {
			t.Fatalf("ETag %s (first %s) with the record shown %v", a.ETag, first.ETag, recorded)
		}
		if recorded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background build never showed the record")
		}
	}
}
