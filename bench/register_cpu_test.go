package bench

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"stratum/internal/stratumtest"
)

// BenchmarkRegisterCPU is SPEC section 21's registration target: the
// founder's own CPU per registration, TLS handshake included, read from
// its process CPU time (/proc/PID/stat utime+stime before and after), the
// founder being the real binary (`stratum serve --dev`, fsync on) and the
// load 64 concurrent joiners, each registration a fresh TLS connection
// made by Go's net/http client (keep-alives off) with the joiner's own
// ed25519 client certificate.
//
//	go test -run '^$' -bench RegisterCPU -benchtime 1x ./bench/
//
// The founder's CPU while idle (measured for registerIdle before the run)
// is taken off, pro rata of the run's length; both figures are printed.
// The same connections also go to a bare Go HTTPS server with the join
// listener's TLS settings (register_bare_test.go), half before the
// founder's run and half after; its CPU per connection is printed beside
// the founder's as the floor: what Go's TLS 1.3 handshake
// (X25519MLKEM768, client certificate), TCP and net/http cost before any
// of the founder's own work.
// Then the pinned form: as many registrations again (new keys), with
// the founder and the bare server on one core and this process (the
// clients) on the other (pinning_test.go), in pinnedRounds rounds of the
// two in turn; the median over the rounds of the founder's CPU per
// registration above the bare server's is the register-overhead-ms
// target.
// STRATUM_REG_COUNT sets how many registrations (default 3,000, in each
// form);
// REGISTER_PROFILE=FILE has the founder child write its CPU profile there
// (go tool pprof -top FILE).
const registerIdle = 5 * time.Second

// pinnedRounds is how many turns the pinned form takes between the bare
// server and the founder, count/pinnedRounds registrations each.
const pinnedRounds = 6

func BenchmarkRegisterCPU(b *testing.B) {
	count := 3000
	if n, err := strconv.Atoi(os.Getenv("STRATUM_REG_COUNT")); err == nil && n > 0 {
		count = n
	}
	const workers = 64
	var f *stratumtest.Founder
	if os.Getenv("REGISTER_INPROCESS") == "1" {
		// For a CPU profile (-cpuprofile) of the founder's code: the same
		// founder.Serve in this process, the clients' stacks beside it.
		f = stratumtest.StartFounder(b, stratumtest.FounderOptions{Dev: true, Serve: serveInProcess})
	} else {
		dir := filepath.Join(b.TempDir(), "data")
		o := stratumtest.FounderOptions{Dir: dir, Dev: true, LogFile: filepath.Join(filepath.Dir(dir), "founder.log")}
		if p := os.Getenv("REGISTER_PROFILE"); p != "" {
			// The child's own CPU profile, start to exit (serve --cpu-profile).
			abs, err := filepath.Abs(p)
			if err != nil {
				b.Fatal(err)
			}
			o.Args = []string{"--cpu-profile", abs}
		}
		f = stratumtest.StartFounder(b, o)
		defer lpStop(b, f)
	}
	// The pinned form (the founder, and the bare server, on one core,
	// the clients on the other: pinning_test.go) registers count joiners
	// more, after the free form's: a key registers once.
	pinned := canPin() && f.Process() != nil
	forms := 1
	if pinned {
		forms = 2
	}
	// One joiner more than measured: its registration, before the run,
	// tells how many bytes the founder answers (the bare server answers
	// as many).
	last := forms * count
	tokens := lpTokens(b, f, last+1)
	joiners, err := lpNewJoiners(last+1, f.Pool)
	if err != nil {
		b.Fatal(err)
	}
	url := "https://" + f.Join + "/v1/join/registrations"
	var answerBytes atomic.Int64
	register := func(i int) error {
		j := joiners[i]
		body, err := json.Marshal(map[string]string{"token": tokens[i/lpTokenUses], "release": lpRelease, "hostname": lpHostname(i), "mgmtIp": lpMgmtIP(i)})
		if err != nil {
			return err
		}
		tr := &http.Transport{TLSClientConfig: j.cfg, DisableKeepAlives: true, DisableCompression: true}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: time.Minute}
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("joiner %d: %w", i, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("joiner %d: %s %s", i, resp.Status, raw)
		}
		answerBytes.Store(int64(len(raw)))
		return nil
	}
	if err := register(last); err != nil {
		b.Fatal(err)
	}
	// The rack's teardown, run just before in make bench, is not the
	// registrations' either.
	settle(b)
	// What the founder spends with nothing to do (background checks,
	// timers) over as long as the run takes is not the registrations'.
	idle0 := f.CPU()
	time.Sleep(registerIdle)
	idleRate := float64(f.CPU()-idle0) / float64(registerIdle)
	// A yardstick: what one X25519 operation costs while the run goes
	// on (a round of 20 every 200 ms on one thread of this process, a
	// fraction of a percent of a core) and after it. On the shared vCPUs
	// it varies twofold with the load, and the founder's CPU with it.
	var during []time.Duration
	stopGauge, gaugeDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(gaugeDone)
		for {
			during = append(during, x25519Round())
			select {
			case <-stopGauge:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	// The floor: the same connections to a bare HTTPS server with the
	// join listener's TLS settings (register_bare_test.go), half of them
	// before the founder's run and half after, so that the load of the
	// machine around the run weighs on both alike.
	cfgs := make([]*tls.Config, last)
	for i := range cfgs {
		cfgs[i] = joiners[i].cfg
	}
	bare := startBareServer(b, cfgs, workers, int(answerBytes.Load()))
	bareCPU, bareSys := bare.measure(b, 0, count/2)
	var cpu, sys time.Duration
	var took time.Duration
	for b.Loop() {
		user0, sys0 := f.CPUTimes()
		start := time.Now()
		err := concurrently(workers, 0, count, register)
		took = time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		user1, sys1 := f.CPUTimes()
		cpu, sys = user1+sys1-user0-sys0, sys1-sys0
	}
	close(stopGauge)
	<-gaugeDone
	idle := time.Duration(idleRate * float64(took))
	gross := float64(cpu.Microseconds()) / 1000 / float64(count)
	perReg := float64((cpu - idle).Microseconds()) / 1000 / float64(count)
	sysPerReg := float64(sys.Microseconds()) / 1000 / float64(count)
	c, s := bare.measure(b, count/2, count)
	bareCPU, bareSys = bareCPU+c, bareSys+s
	bareMs := float64(bareCPU.Microseconds()) / 1000 / float64(count)
	fmt.Printf("register-cpu count=%d workers=%d founder_cpu=%v (system %v) idle_share=%v per_registration=%.3fms (user %.3f system %.3f; gross %.3fms) wall_rate=%.0f/s load1=%s x25519_cpu=%v (after: %v)\n",
		count, workers, cpu, sys, idle.Round(10*time.Millisecond), perReg, perReg-sysPerReg, sysPerReg, gross, float64(count)/took.Seconds(), loadAvg(),
		median(during).Round(time.Microsecond), x25519After().Round(time.Microsecond))
	fmt.Printf("register-cpu floor: a bare Go HTTPS server with the join listener's TLS settings, the same %d connections: %.3fms a connection (system %.3f); the founder's registration above it: %.3fms\n",
		count, bareMs, float64(bareSys.Microseconds())/1000/float64(count), perReg-bareMs)
	printTarget(b, "register-cpu-ms", perReg, "<=", 0.5, "ms")
	b.ReportMetric(perReg, "founder-cpu-ms/registration")
	if !pinned {
		return
	}

	// The pinned form: the same, with the founder and the bare server on
	// one core and the clients on the other, so that the clients' 64
	// handshakes at once take nothing from the servers' core. The
	// founder's own work above the floor is register-overhead-ms.
	unpin, err := pinForm(f.Process().Pid, bare.pid)
	if err != nil {
		b.Fatalf("pin the servers and the clients: %v", err)
	}
	defer unpin()
	// Rounds of the bare server and the founder in turn, in the order
	// bare-founder, founder-bare, ..., so that a drift of the shared
	// vCPUs' speed over the form weighs on both alike; each round's CPU
	// read to the nanosecond (stratumtest.ProcRunTime). The target is the
	// median of the rounds' differences, which a round disturbed by the
	// machine does not move. (Both servers taking their connections at
	// once, on the one core, made both dearer, the founder more: each
	// switch between the two processes costs both.)
	var diffs []float64
	var rounds []string
	bareCPU, bareSys, cpu, sys, took = 0, 0, 0, 0, 0
	for r := range pinnedRounds {
		lo, hi := count+r*count/pinnedRounds, count+(r+1)*count/pinnedRounds
		n := float64(hi - lo)
		var fMs, bMs float64
		founderRound := func() {
			user0, sys0 := f.CPUTimes()
			run0 := stratumtest.ProcRunTime(f.Process().Pid)
			start := time.Now()
			if err := concurrently(workers, lo, hi, register); err != nil {
				b.Fatal(err)
			}
			window := time.Since(start)
			run := stratumtest.ProcRunTime(f.Process().Pid) - run0
			user1, sys1 := f.CPUTimes()
			cpu, sys, took = cpu+user1+sys1-user0-sys0, sys+sys1-sys0, took+window
			fMs = float64((run - time.Duration(idleRate*float64(window))).Microseconds()) / 1000 / n
		}
		bareRound := func() {
			c, s := bare.measure(b, lo, hi)
			bareCPU, bareSys = bareCPU+c, bareSys+s
			bMs = float64(c.Microseconds()) / 1000 / n
		}
		if r%2 == 0 {
			bareRound()
			founderRound()
		} else {
			founderRound()
			bareRound()
		}
		diffs = append(diffs, fMs-bMs)
		rounds = append(rounds, fmt.Sprintf("%.3f-%.3f", fMs, bMs))
	}
	idle = time.Duration(idleRate * float64(took))
	perReg = float64((cpu - idle).Microseconds()) / 1000 / float64(count)
	sysPerReg = float64(sys.Microseconds()) / 1000 / float64(count)
	bareMs = float64(bareCPU.Microseconds()) / 1000 / float64(count)
	overhead := median(diffs)
	fmt.Printf("register-cpu pinned (the founder on cpu %d, the clients on cpu %d) count=%d workers=%d founder_cpu=%v (system %v) per_registration=%.3fms (user %.3f system %.3f) wall_rate=%.0f/s load1=%s\n",
		serverCore, clientCore, count, workers, cpu, sys, perReg, perReg-sysPerReg, sysPerReg, float64(count)/took.Seconds(), loadAvg())
	fmt.Printf("register-cpu pinned floor: the bare Go HTTPS server on cpu %d, the same %d connections: %.3fms a connection (system %.3f); the founder's registration above it: %.3fms; in %d rounds, founder-bare ms: %s, median %.3fms\n",
		serverCore, count, bareMs, float64(bareSys.Microseconds())/1000/float64(count), perReg-bareMs, pinnedRounds, strings.Join(rounds, " "), overhead)
	printTarget(b, "register-overhead-ms", overhead, "<=", 0.10, "ms")
	b.ReportMetric(perReg, "founder-cpu-ms/registration-pinned")
	b.ReportMetric(overhead, "founder-overhead-ms/registration-pinned")
}

// x25519Round is the thread CPU time of one X25519 key generation, over
// a round of 20 (about 50 us each on a quiet core of the development
// machine).
func x25519Round() time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	thread := func() time.Duration {
		var ts syscall.Timespec
		const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID: exact, where getrusage counts in ticks
		_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
		return time.Duration(ts.Nano())
	}
	t0 := thread()
	for range 20 {
		_, _ = ecdh.X25519().GenerateKey(rand.Reader)
	}
	return (thread() - t0) / 20
}

// x25519After is the median of 9 rounds, with nothing else of this
// benchmark running.
func x25519After() time.Duration {
	var rounds []time.Duration
	for range 9 {
		rounds = append(rounds, x25519Round())
	}
	return median(rounds)
}

// median is the middle of xs, the mean of the two middle ones when there
// are an even number.
func median[T time.Duration | float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
