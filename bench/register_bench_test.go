package bench

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRegistrations measures registrations on an in-process founder
// (real TLS listeners, real bbolt file with fsync): 64 joiners at once,
// each registration on a fresh TLS connection with its own ed25519 key
// (SPEC 14: >= 1,500 per second). The process's CPU time is the founder's
// and the 64 clients' together; run with -cpuprofile to split them.
//
//	go test -run '^$' -bench Registrations -benchtime 1x ./bench/
//
// STRATUM_REG_COUNT sets how many (default 5,000).
func BenchmarkRegistrations(b *testing.B) {
	count := 5000
	if n, err := strconv.Atoi(os.Getenv("STRATUM_REG_COUNT")); err == nil && n > 0 {
		count = n
	}
	const workers = 64
	f := lpServeInProcess(b)
	roots := f.roots
	var tokens []string
	for range (count + lpTokenUses - 1) / lpTokenUses {
		var out struct {
			Token string `json:"token"`
		}
		f.call(b, "POST", "/v1/admin/join/tokens", map[string]any{"role": "worker", "ttl": "1h", "uses": lpTokenUses}, 201, &out)
		tokens = append(tokens, out.Token)
	}
	joiners, err := lpNewJoiners(count, roots)
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := processCPU()
	start := time.Now()
	err = concurrently(workers, 0, count, func(i int) error {
		_, err := joiners[i].register(f.joinAddr, tokens[i/lpTokenUses], lpRelease)
		return err
	})
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	cpu := processCPU() - cpu0
	rate := float64(count) / took.Seconds()
	verdict := "pass"
	if rate < 1500 {
		verdict = "MISS"
	}
	fmt.Printf("registrations count=%d workers=%d per_s=%.0f target>=1500 %s cpu_ms_per_registration=%.2f (founder and clients, one process) load1=%s\n",
		count, workers, rate, verdict, float64(cpu.Microseconds())/1000/float64(count), lpLoad())
	b.ReportMetric(rate, "registrations/s")
}

// processCPU is this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
