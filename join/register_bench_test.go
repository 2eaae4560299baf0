package join

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"stratum/internal/selfcpu"
	"stratum/wire"
)

// BenchmarkRegisterPath is a registration as the join listener makes it
// (DecodeRegisterRequest, then Register through the group commit, fsync
// on) from 64 concurrent callers, without TLS and HTTP: the founder's own
// work above the handshake, which bench's register-overhead-ms measures
// on the real binary. It reports the process's CPU per registration,
// which the machine's load inflates less than the wall time:
//
//	go test -run '^$' -bench RegisterPath -benchtime 6000x ./join/
func BenchmarkRegisterPath(b *testing.B) {
	e := newEnv(b)
	tokens := make([]string, b.N/maxTokenUses+1)
	for i := range tokens {
		tokens[i] = e.token("worker", maxTokenUses)
	}
	bodies := make([][]byte, b.N)
	for i := range bodies {
		var err error
		if bodies[i], err = json.Marshal(wire.RegisterRequest{Token: tokens[i/maxTokenUses], Release: clusterRelease,
			Hostname: fmt.Sprintf("node-%05d", i), MgmtIP: fmt.Sprintf("10.%d.%d.%d", 20+i>>16, i>>8&255, i&255)}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	cpu0 := selfcpu.Total()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1) - 1)
			req, err := DecodeRegisterRequest(bodies[i])
			if err != nil {
				b.Error(err)
				return
			}
			if _, created, err := e.svc.Register(keyPin(fmt.Sprint("bench-", i)), req); err != nil || !created {
				b.Errorf("registration %d: created=%v %v", i, created, err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(selfcpu.Total()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/registration")
}
