package releaseset_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	membership "stratum/cluster"
	"stratum/internal/selfcpu"
	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

// BenchmarkRecordPath is a node's record as the HTTP handler makes it
// (DecodeRecordRequest, then RecordDecoded through the group commit)
// from 32 concurrent callers, without TLS and HTTP: the founder's own
// cost of a record, first and again. It reports the process's CPU per
// record, which a shared machine's load does not inflate the way it does
// the wall time:
//
//	go test -run '^$' -bench RecordPath -benchtime 20000x -benchmem ./releaseset/
func BenchmarkRecordPath(b *testing.B) {
	const nodes = 20000
	db, _ := storetest.Temp(b)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var founder string
	if err := db.Update(func(tx *store.Tx) error {
		id, _, _, err := membership.Init(tx, membership.DevDefaults(), true, now)
		founder = id.FounderNodeID
		return err
	}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, nodes)
	for lo := 0; lo < nodes; lo += 1000 {
		if err := db.Update(func(tx *store.Tx) error {
			for i := lo; i < lo+1000; i++ {
				ids[i] = fmt.Sprintf("n-%08d", i)
				m := membership.Member{MemberView: wire.MemberView{NodeID: ids[i], Role: "worker"}, JoinID: fmt.Sprintf("j-%08d", i), Installed: true}
				if _, err := membership.Admit(tx, m, now); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	s, err := releaseset.New(releaseset.Config{DB: db, Now: time.Now, Node: founder, ControlPlane: wire.ControlPlane{Version: "v1", Commit: "c1"}})
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([][]byte, 60)
	for i := range bodies {
		r := releasesettest.Record(i, i%3)
		if bodies[i], err = json.Marshal(wire.RecordRequest{RunningRelease: r.Bootc.Booted.Version, Release: r}); err != nil {
			b.Fatal(err)
		}
	}
	// first: each op records a member that has not recorded yet (its
	// record is audited) while b.N <= nodes. again: each op records a
	// member that recorded already (the steady state: a node recording
	// what it runs again), once first recorded them.
	var recorded atomic.Int64
	for _, again := range []bool{false, true} {
		b.Run(map[bool]string{false: "first", true: "again"}[again], func(b *testing.B) {
			n := nodes
			if again {
				n = int(max(1, recorded.Load()))
			}
			var next atomic.Int64
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0))) // 32 callers, as the scale benchmark's clients
			cpu0 := selfcpu.Total()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(next.Add(1)-1) % n
					req, err := releaseset.DecodeRecordRequest(bodies[i%60])
					if err != nil {
						b.Error(err)
						return
					}
					if err := s.RecordDecoded("bench", ids[i], req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if !again {
				recorded.Store(min(int64(nodes), next.Load()))
			}
			b.ReportMetric(float64(selfcpu.Total()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}
