package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"stratum/buildinfo"
	"stratum/founder"
	"stratum/internal/stratumtest"
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
	f := stratumtest.StartFounder(b, stratumtest.FounderOptions{Dev: true, Serve: serveInProcess})
	tokens := lpTokens(b, f, count)
	joiners, err := lpNewJoiners(count, f.Pool)
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := f.CPU() // this process's: the founder's and the clients'
	start := time.Now()
	err = concurrently(workers, 0, count, func(i int) error {
		_, err := joiners[i].register(f.Join, tokens[i/lpTokenUses], lpRelease)
		return err
	})
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	cpu := f.CPU() - cpu0
	rate := float64(count) / took.Seconds()
	verdict := "pass"
	if rate < 1500 {
		verdict = "MISS"
	}
	fmt.Printf("registrations count=%d workers=%d per_s=%.0f target>=1500 %s cpu_ms_per_registration=%.2f (founder and clients, one process) load1=%s\n",
		count, workers, rate, verdict, float64(cpu.Microseconds())/1000/float64(count), loadAvg())
	b.ReportMetric(rate, "registrations/s")
}

// serveInProcess is founder.Serve (what `stratum serve --dev` runs) for
// the harness's in-process mode: the founder runs in this process until
// the benchmark ends, and its CPU is this process's. Its log is
// discarded, as a child's costs nothing here.
func serveInProcess(ctx context.Context, p stratumtest.InProcess) error {
	return founder.Serve(ctx, founder.Options{
		Data: founder.DataDir(p.Dir), Dev: p.Dev, APIAddr: p.APIAddr, JoinAddr: p.JoinAddr, Ready: p.Ready,
		Build: buildinfo.Info{Version: "bench", Commit: "bench"},
		Log:   slog.New(slog.DiscardHandler), Out: io.Discard,
	})
}
