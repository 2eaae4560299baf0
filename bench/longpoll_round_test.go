//go:build linux

package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// BenchmarkLongPollRoundCPU: the founder's CPU per long-poll round of a
// waiting joiner, with TLS session resumption and without, in the same
// run on the same founder.
//
//	go test -run '^$' -bench LongPollRoundCPU -benchtime 1x ./bench/
//
// The founder is the real binary (`stratum serve --dev`). 256 joiners
// (LPROUND_JOINERS), each with its own ed25519 key, register, then each
// long-polls its pending registration with wait=1 (the founder parks the
// poll and answers it unchanged after a second), 4 rounds
// (LPROUND_ROUNDS) one after the other, as `stratum join` waits for an
// operator. Each joiner's client is the joiner's: Go's net/http with
// keep-alives on, its key as client certificate. The founder closes the
// connection after a parked poll's answer, so each round is a new
// connection: a full handshake without a session cache (`tickets=off`,
// the joiner before it kept tickets), a resumed one with it
// (`tickets=on`, the joiner now: one cache per key, warmed by the
// registration as in a real run). The two alternate, three times each. The
// founder's utime+stime from /proc/PID/stat around each phase, less its
// idle CPU over as long (measured for 5 s before). The founder issues a
// ticket after every handshake in both forms (the listener cannot tell
// which joiner keeps them), so `off` also carries the sealing of one
// ticket it never uses, a few microseconds.
//
// Printed: one `longpoll-round-cpu tickets=off|on` line each, with the
// connections and resumed handshakes a round (counted by the clients),
// and a line with the ratio.
func BenchmarkLongPollRoundCPU(b *testing.B) {
	joiners, rounds := envInt("LPROUND_JOINERS", 256), envInt("LPROUND_ROUNDS", 4)
	dir := filepath.Join(b.TempDir(), "data")
	f := stratumtest.StartFounder(b, stratumtest.FounderOptions{Dir: dir, Dev: true, LogFile: filepath.Join(filepath.Dir(dir), "founder.log")})
	defer lpStop(b, f)
	tokens := lpTokens(b, f, joiners)
	keys := make([]*stratumtest.JoinerKey, joiners)
	for i := range keys {
		k, err := stratumtest.MakeJoinerKey()
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	// Each joiner's client for one form: its own transport (and cache).
	var dials, resumed atomic.Int64
	newClient := func(i int, tickets bool) *http.Client {
		cfg := &tls.Config{Certificates: []tls.Certificate{keys[i].Cert}, RootCAs: f.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		if tickets {
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		}
		d := &net.Dialer{Timeout: 15 * time.Second}
		tr := &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig: cfg, MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		}
		return &http.Client{Transport: tr, Timeout: time.Minute}
	}
	// Registration, with each form's client: it is the joiner's first
	// connection and gives the ticket the first round resumes.
	joinIDs := make([]string, joiners)
	clients := map[bool][]*http.Client{false: make([]*http.Client, joiners), true: make([]*http.Client, joiners)}
	for i := range joiners {
		for _, tickets := range []bool{false, true} {
			clients[tickets][i] = newClient(i, tickets)
			body, _ := json.Marshal(map[string]string{"token": tokens[i/lpTokenUses], "release": lpRelease, "hostname": lpHostname(i), "mgmtIp": lpMgmtIP(i)})
			resp, err := clients[tickets][i].Post("https://"+f.Join+"/v1/join/registrations", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v struct{ JoinID string }
			if (resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK) || json.Unmarshal(raw, &v) != nil || v.JoinID == "" {
				b.Fatalf("registration %d: %s %s", i, resp.Status, raw)
			}
			joinIDs[i] = v.JoinID // the same key: the same registration (200 the second time)
			// A joiner's first poll may take the registration's connection;
			// every round here is a connection of its own, as every later
			// round of a real one is.
			clients[tickets][i].CloseIdleConnections()
		}
	}
	poll := func(tickets bool) func(i int) error {
		return func(i int) error {
			for range rounds {
				resp, err := clients[tickets][i].Get("https://" + f.Join + "/v1/join/registrations/" + joinIDs[i] + "?wait=1&state=pending")
				if err != nil {
					return err
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("joiner %d: %s %s", i, resp.Status, raw)
				}
				if resp.TLS != nil && resp.TLS.DidResume {
					resumed.Add(1)
				}
			}
			return nil
		}
	}
	idle0 := f.CPU()
	time.Sleep(registerIdle)
	idleRate := float64(f.CPU()-idle0) / float64(registerIdle)

	type result struct {
		cpu, took     time.Duration
		dials, resume int64
	}
	var res map[bool]*result
	for b.Loop() {
		res = map[bool]*result{false: {}, true: {}}
		for _, tickets := range []bool{false, true, false, true, false, true} {
			d0, r0 := dials.Load(), resumed.Load()
			c0 := f.CPU()
			start := time.Now()
			if err := concurrently(joiners, 0, joiners, poll(tickets)); err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			r := res[tickets]
			r.cpu += f.CPU() - c0 - time.Duration(idleRate*float64(took))
			r.took += took
			r.dials += dials.Load() - d0
			r.resume += resumed.Load() - r0
		}
	}
	n := float64(3 * joiners * rounds)
	perRound := map[bool]float64{}
	for _, tickets := range []bool{false, true} {
		r := res[tickets]
		perRound[tickets] = float64(r.cpu.Microseconds()) / 1000 / n
		form := map[bool]string{false: "off", true: "on"}[tickets]
		fmt.Printf("longpoll-round-cpu tickets=%s joiners=%d rounds=%.0f founder_cpu=%v per_round=%.3fms connections_per_round=%.2f resumed_per_round=%.2f load1=%s\n",
			form, joiners, n, r.cpu.Round(time.Millisecond), perRound[tickets], float64(r.dials)/n, float64(r.resume)/n, loadAvg())
	}
	fmt.Printf("longpoll-round-cpu resumed/full=%.2f (the founder's CPU a round with tickets over without)\n", perRound[true]/perRound[false])
	b.ReportMetric(perRound[false], "founder-cpu-ms/round-full")
	b.ReportMetric(perRound[true], "founder-cpu-ms/round-resumed")
}

// envInt is the positive integer in the environment variable name, else
// def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
