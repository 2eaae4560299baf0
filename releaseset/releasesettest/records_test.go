package releasesettest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"stratum/releaseset"
	"stratum/wire"
)

func TestRecordIsValid(t *testing.T) {
	for _, v := range []int{0, 1, 2, 5, -1} {
		for _, i := range []int{0, 1, 2, 3, 997} {
			r := Record(i, v)
			if len(r.Pins) < 24 || len(r.Packages) < 24 {
				t.Errorf("record %d/%d has %d pins and %d packages, want dozens", i, v, len(r.Pins), len(r.Packages))
			}
			b, err := json.Marshal(wire.RecordRequest{RunningRelease: r.Bootc.Booted.Version, Release: r})
			if err != nil {
				t.Fatal(err)
			}
			req, err := releaseset.DecodeRecordRequest(b)
			if err != nil {
				t.Fatalf("record %d/%d refused: %v", i, v, err)
			}
			r.RecordedAt = time.Time{}
			if !reflect.DeepEqual(req.Release, r) {
				t.Errorf("record %d/%d does not round-trip", i, v)
			}
		}
	}
}

// synthCluster records n synthetic nodes, node i of variant variant(i).
func synthCluster(n int, variant func(i int) int) releaseset.Input {
	in := releaseset.Input{Now: RecordedAt.Add(time.Minute), Node: "n-0", Records: make(map[string]releaseset.Stored, n)}
	for i := range n {
		id := fmt.Sprintf("n-%d", i)
		in.Members = append(in.Members, id)
		v := variant(i)
		r := Record(i, v)
		in.Records[id] = releaseset.Stored{RunningRelease: r.Bootc.Booted.Version, Release: r}
	}
	in.ControlPlane = *in.Records["n-0"].Release.ControlPlane
	return in
}

func TestVariants(t *testing.T) {
	s := releaseset.Describe(synthCluster(40, func(int) int { return 0 }))
	if !s.Summary.Consistent || s.Summary.Recent != 40 || s.RunningRelease != "0.2.0" {
		t.Errorf("variant 0 only: %+v, running %q; want consistent", s.Summary, s.RunningRelease)
	}

	s = releaseset.Describe(synthCluster(40, func(i int) int { return i % 2 }))
	var fields []string
	for _, sk := range s.Summary.Skew {
		fields = append(fields, sk.Field)
	}
	for _, want := range []string{wire.SkewOS, wire.SkewKernel, wire.SkewControlPlane, wire.SkewSchema, wire.SkewHostBinaries, wire.SkewExtensions, "package:openvswitch"} {
		if !slices.Contains(fields, want) {
			t.Errorf("variants 0 and 1: skew %q lacks %s", fields, want)
		}
	}
	if len(s.Summary.Drift) != 0 || s.RunningRelease != "0.1.0" {
		t.Errorf("variants 0 and 1: drift %+v running %q, want none and 0.1.0", s.Summary.Drift, s.RunningRelease)
	}

	s = releaseset.Describe(synthCluster(4, func(i int) int { return 2 * (i % 2) }))
	var kinds []string
	for _, d := range s.Summary.Drift {
		kinds = append(kinds, d.NodeID+" "+string(d.Kind)+" "+d.Field)
	}
	want := []string{
		"n-1 host hostBinaries", "n-1 host bootc.staged", "n-1 pin pins[2]", "n-1 pin unpinned[0]",
		"n-3 host hostBinaries", "n-3 host bootc.staged", "n-3 pin pins[2]", "n-3 pin unpinned[0]",
	}
	if !slices.Equal(kinds, want) {
		t.Errorf("variant 2 drift %q, want %q", kinds, want)
	}
}

func BenchmarkDescribe(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		in := synthCluster(n, func(i int) int { return i % 3 })
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				releaseset.Describe(in)
			}
		})
	}
}

func BenchmarkDecodeRecordRequest(b *testing.B) {
	body, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: Record(1, 2)})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := releaseset.DecodeRecordRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
