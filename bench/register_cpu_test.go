package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
// STRATUM_REG_COUNT sets how many registrations (default 3,000).
func BenchmarkRegisterCPU(b *testing.B) {
	count := 3000
	if n, err := strconv.Atoi(os.Getenv("STRATUM_REG_COUNT")); err == nil && n > 0 {
		count = n
	}
	const workers = 64
	f := lpStartFounder(b, filepath.Join(b.TempDir(), "data"), "founder.log")
	defer f.stop(b)
	var tokens []string
	for range (count + lpTokenUses - 1) / lpTokenUses {
		var out struct {
			Token string `json:"token"`
		}
		f.call(b, "POST", "/v1/admin/join/tokens", map[string]any{"role": "worker", "ttl": "1h", "uses": lpTokenUses}, 201, &out)
		tokens = append(tokens, out.Token)
	}
	joiners, err := lpNewJoiners(count, f.roots)
	if err != nil {
		b.Fatal(err)
	}
	url := "https://" + f.joinAddr + "/v1/join/registrations"
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
		return nil
	}
	var cpu time.Duration
	var took time.Duration
	for b.Loop() {
		cpu0 := f.cpu()
		start := time.Now()
		var next atomic.Int64
		var failed atomic.Pointer[error]
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for failed.Load() == nil {
					i := int(next.Add(1)) - 1
					if i >= count {
						return
					}
					if err := register(i); err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
				}
			})
		}
		wg.Wait()
		took = time.Since(start)
		if err := failed.Load(); err != nil {
			b.Fatal(*err)
		}
		cpu = f.cpu() - cpu0
	}
	perReg := float64(cpu.Microseconds()) / 1000 / float64(count)
	fmt.Printf("register-cpu count=%d workers=%d founder_cpu=%v per_registration=%.3fms wall_rate=%.0f/s load1=%s\n",
		count, workers, cpu, perReg, float64(count)/took.Seconds(), lpLoad())
	printTarget(b, "register-cpu-ms", perReg, "<=", 0.5, "ms")
	b.ReportMetric(perReg, "founder-cpu-ms/registration")
}
