package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stratum/backup"
	"stratum/crypto"
	"stratum/internal/stratumtest"
	"stratum/releaseset"
	"stratum/store"

	// The whole schema: the restored backup carries every domain's
	// migrations, and a store refuses a schema newer than what is linked.
	_ "stratum/founder"
	"stratum/internal/pgtest"
)

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// TestCrashConsistency: SIGKILL the founder CRASH_KILLS times at random
// moments of a stream of acknowledged writes (some during a release
// import, some during a live backup, some at a quiet moment) and check
// the store after each restart.
func TestCrashConsistency(t *testing.T) {
	t.Parallel()
	crashConsistency(t, "", envInt("CRASH_RELEASE_MB", 64))
}

// TestCrashConsistencyPostgres runs the same cycles against a founder
// whose store is a PostgreSQL database (SPEC section 13). There is no
// bbolt backup to kill during, so the backup cycles kill at a quiet
// moment; imports also store the release content in the database.
func TestCrashConsistencyPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	t.Parallel()
	crashConsistency(t, dsn, envInt("CRASH_RELEASE_MB", 8))
}

func crashConsistency(t *testing.T, dsn string, mb int) {
	kills := envInt("CRASH_KILLS", 8)
	seed := uint64(envInt("CRASH_SEED", int(time.Now().UnixNano()%1_000_000_007)))
	t.Logf("CRASH_SEED=%d CRASH_KILLS=%d CRASH_RELEASE_MB=%d store=%s", seed, kills, mb, map[bool]string{true: "postgres", false: "bbolt"}[dsn != ""])
	start := time.Now()
	h := newHarness(t, seed)
	h.store = dsn
	h.setup(mb)
	kinds := map[string]int{}
	for k := 1; k <= kills; k++ {
		kind := "backup"
		switch {
		case k%5 == 0 || (dsn != "" && k%2 == 0):
			kind = "idle"
		case k%2 == 1:
			kind = "import"
		}
		kinds[h.cycle(k, kind)]++
	}
	h.finish()
	line := h.summary(kinds, kills) + fmt.Sprintf("; seed=%d took=%s", seed, time.Since(start).Round(time.Second))
	t.Log(line)
	if p := os.Getenv("CRASH_SUMMARY"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, line)
			h.vmu.Lock()
			for _, v := range h.violations {
				fmt.Fprintln(f, "  violation: "+v)
			}
			h.vmu.Unlock()
			f.Close()
		}
	}
	h.vmu.Lock()
	defer h.vmu.Unlock()
	for _, v := range h.violations {
		t.Error(v)
	}
}

// setup makes two signed trees of release 0.2.0 (different blobs), a
// cluster on 0.2.0 that trusts their key, starts the founder, logs in and
// imports the first tree.
func (h *harness) setup(mb int) {
	t := h.t
	h.work = writableTempDir(t)
	h.dir = filepath.Join(h.work, "data")
	rk := stratumtest.NewReleaseKey(t, filepath.Join(h.work, "keys"))
	var wg sync.WaitGroup
	for i, name := range []string{"tree-a", "tree-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.trees[i] = makeReleaseTree(t, filepath.Join(h.work, name), "0.2.0", "0.1.0", rk.Key, mb<<20)
		}()
	}
	wg.Wait()
	if h.trees[0] == nil || h.trees[1] == nil {
		t.FailNow()
	}
	mustStratum(t, append([]string{"init", "--data", h.dir, "--config", writeConfig(t, h.work)}, h.storeArgs()...)...)
	rk.Trust(t, h.dir)
	h.pickAddrs()
	h.restart()
	t.Cleanup(func() {
		if h.f != nil && h.f.Alive() {
			h.f.Kill()
		}
	})
	h.login()
	var set releaseSetView
	h.mustAdmin("GET", "/v1/admin/upgrades/release", nil, 200, &set)
	h.founderNode = set.Node
	var rec struct {
		Token string `json:"token"`
	}
	h.mustAdmin("POST", "/v1/iam/tokens", map[string]any{"name": "recorder", "ttl": "11h", "policy": json.RawMessage(recordOnly)}, 201, &rec)
	h.recorder = rec.Token
	h.waitSelfRecord()

	took, ok := h.importRelease(context.Background(), h.trees[0])
	if !ok {
		t.Fatalf("first import failed\n%s", h.logTail())
	}
	h.importDur = took
	h.growStore()
	if h.store != "" {
		t.Logf("setup: import of %d MiB into the database took %v", mb, took.Round(time.Millisecond))
		h.verify(nil)
		return
	}
	bk := h.startBackup(filepath.Join(h.work, "backup-0.zst"))
	<-bk.finished
	at, streamed := bk.connectedAt()
	if bk.res.res.code != 0 || !strings.Contains(bk.res.res.stdout, "running founder") || !streamed {
		t.Fatalf("live backup: %d %s %s", bk.res.res.code, bk.res.res.stdout, bk.res.res.stderr)
	}
	h.backupDur = bk.res.ended.Sub(at)
	h.ack("backup")
	st, _ := os.Stat(filepath.Join(h.dir, "stratum.db"))
	t.Logf("setup: import of %d MiB took %v; a live backup of the %d-byte store streamed for %v", mb, took.Round(time.Millisecond), st.Size(), h.backupDur.Round(time.Millisecond))
	h.verify(nil)
}

// login makes h.admin trust the founder's CA and logs the bootstrap
// admin in. The session is an acknowledged write too: it is used across
// every restart (logins are rate limited).
func (h *harness) login() {
	h.admin = httpClient(h.f.Pool, nil, true)
	h.session = h.f.Operator(h.t).Token
}

// pickAddrs chooses the fixed addresses the founder comes back on.
func (h *harness) pickAddrs() {
	api, join := freeAddrs(h.t)
	h.addrMu.Lock()
	h.apiAddr, h.joinAddr = api, join
	h.addrMu.Unlock()
}

// restart starts the founder on the same data directory and addresses.
func (h *harness) restart() {
	for try := 0; ; try++ {
		api, join := h.addrs()
		p, err := startServe(h.dir, api, join, h.storeArgs()...)
		if err == stratumtest.ErrAddrInUse && try < 5 {
			h.note("port-taken-while-down")
			h.pickAddrs()
			continue
		}
		if err != nil {
			h.violate("the founder does not start again after a kill: %v", err)
			h.t.FailNow()
		}
		h.f = p
		if h.admin != nil {
			h.admin.CloseIdleConnections()
		}
		return
	}
}

// waitSelfRecord waits until the founder's own release record of this
// start is shown, so it cannot overwrite a record the harness sends. When
// the release set keeps showing an older record, the store is read (after
// a kill) to tell a missing self-record from a stale answer, and the
// founder is started again.
func (h *harness) waitSelfRecord() {
	for attempt := 0; ; attempt++ {
		api, ok := h.selfRecordShown(20 * time.Second)
		if ok {
			h.mu.Lock()
			if log := h.records[h.founderNode]; log != nil {
				log.ackedFloor, log.sentSince = 0, false
			}
			h.mu.Unlock()
			return
		}
		started := h.f.Started
		h.f.Kill()
		h.note("extra-kill-after-stale-release-set")
		stored, err := storedRecords(h.target())
		got := stored[h.founderNode]
		switch {
		case err != nil:
			h.violate("reading the store: %v", err)
		case got.recordedAt.After(started.Add(-time.Second)):
			h.violate("release-set cache stale after a restart: for 20s GET /v1/admin/upgrades/release showed the founder's record %q recorded %s, while the store holds its self-record %q recorded %s (after the start at %s)",
				api.buildID, api.recordedAt.Format(time.RFC3339Nano), got.buildID, got.recordedAt.Format(time.RFC3339Nano), started.UTC().Format(time.RFC3339Nano))
		default:
			h.violate("the founder did not record its own release within 20s of its start; the store holds %q recorded %s\n%s", got.buildID, got.recordedAt, h.logTail())
		}
		if attempt == 3 {
			h.t.FailNow()
		}
		h.restart()
	}
}

// selfRecordShown polls the release set for the founder's record of this
// start; it answers what was last shown.
func (h *harness) selfRecordShown(within time.Duration) (storedRecord, bool) {
	deadline := time.Now().Add(within)
	var last storedRecord
	for {
		var set releaseSetView
		h.mustAdmin("GET", "/v1/admin/upgrades/release", nil, 200, &set)
		for _, n := range set.Nodes {
			if n.NodeID != h.founderNode || n.Release == nil {
				continue
			}
			last = storedRecord{recordedAt: n.Release.RecordedAt}
			if n.Release.OS != nil {
				last.buildID = n.Release.OS.BuildID
			}
			if !n.Release.RecordedAt.Before(h.f.Started.Add(-time.Second)) && !strings.HasPrefix(last.buildID, "crash-") {
				return last, true
			}
		}
		if time.Now().After(deadline) {
			return last, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// snapshot is what the API showed at a quiet moment just before a kill.
type snapshot struct {
	regs       map[string]string
	usesLeft   map[string]int
	generation uint64
	buildIDs   map[string]string
}

// quietSnapshot waits until two snapshots 200 ms apart agree: a request
// whose client gave up may still be committed by the founder after the
// client left (a registration waits up to bbolt's batch delay for its
// group commit, longer on a loaded machine); that write is durable but
// was never acknowledged, so it does not belong to the "before".
//
// On PostgreSQL such a request may also wait for the cluster-wide writer
// lock behind the others: the quiet window is longer.
func (h *harness) quietSnapshot() *snapshot {
	quiet := 200 * time.Millisecond
	if h.store != "" {
		quiet = time.Second
	}
	snap := h.takeSnapshot()
	for range 25 {
		time.Sleep(quiet)
		again := h.takeSnapshot()
		if reflect.DeepEqual(again, snap) {
			return snap
		}
		snap = again
	}
	return snap
}

func (h *harness) takeSnapshot() *snapshot {
	s := &snapshot{regs: map[string]string{}, usesLeft: map[string]int{}}
	regs, tokens, members, set := h.lists()
	for _, v := range regs {
		s.regs[v.JoinID] = v.State
	}
	for _, tk := range tokens {
		s.usesLeft[tk.TokenID] = tk.UsesLeft
	}
	s.generation = members.Generation
	s.buildIDs = set.buildIDs()
	return s
}

func (h *harness) lists() ([]operatorView, []tokenView, membersView, releaseSetView) {
	var regs struct {
		Registrations []operatorView `json:"registrations"`
	}
	var tokens struct {
		Tokens []tokenView `json:"tokens"`
	}
	var members membersView
	var set releaseSetView
	h.mustAdmin("GET", "/v1/admin/join/registrations", nil, 200, &regs)
	h.mustAdmin("GET", "/v1/admin/join/tokens", nil, 200, &tokens)
	h.mustAdmin("GET", "/v1/admin/cluster/members", nil, 200, &members)
	h.mustAdmin("GET", "/v1/admin/upgrades/release", nil, 200, &set)
	return regs.Registrations, tokens.Tokens, members, set
}

// liveBackup is a `stratum backup` running against the live founder.
type liveBackup struct {
	streaming chan struct{} // closed once its .partial file appears
	finished  chan struct{}
	connected time.Time
	res       backupRun
}

// connectedAt is when the snapshot began to stream, if it did.
func (bk *liveBackup) connectedAt() (time.Time, bool) {
	select {
	case <-bk.streaming:
		return bk.connected, true
	default:
		return time.Time{}, false
	}
}

// startBackup runs `stratum backup --data DIR --out out` in the background.
func (h *harness) startBackup(out string) *liveBackup {
	bk := &liveBackup{streaming: make(chan struct{}), finished: make(chan struct{})}
	bk.res = backupRun{out: out, started: time.Now()}
	h.mu.Lock()
	for id, tk := range h.tokens {
		if tk.acked {
			bk.res.tokensAt = append(bk.res.tokensAt, id)
		}
	}
	h.mu.Unlock()
	stop := make(chan struct{})
	go func() {
		for {
			if _, err := os.Stat(out + ".partial"); err == nil {
				bk.connected = time.Now()
				close(bk.streaming)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Microsecond):
			}
		}
	}()
	go func() {
		bk.res.res = stratum(h.t, "backup", "--data", h.dir, "--out", out)
		bk.res.ended = time.Now()
		close(stop)
		close(bk.finished)
	}()
	return bk
}

// growStore records a few large release records (about 3.5 MiB each) so
// the store, and so each live backup, is big enough for a kill to land
// while a snapshot streams.
func (h *harness) growStore() {
	for i := 0; i < 3; i++ {
		h.growStoreOnce(i)
	}
}

// growStoreOnce records one large release record for the founder node.
func (h *harness) growStoreOnce(i int) {
	{
		pk := make([]map[string]string, 0, 24000)
		h.rngMu.Lock()
		for j := 0; j < 24000; j++ {
			pk = append(pk, map[string]string{"component": fmt.Sprintf("c%d-%d", i, j), "name": fmt.Sprintf("pkg-%x%x%x", h.rng.Uint64(), h.rng.Uint64(), h.rng.Uint64()), "version": "1.0.0"})
		}
		h.rngMu.Unlock()
		h.mu.Lock()
		h.recSeq++
		seq := h.recSeq
		log := h.records[h.founderNode]
		if log == nil {
			log = &recordLog{sent: map[int]bool{}}
			h.records[h.founderNode] = log
		}
		log.sent[seq] = true
		h.mu.Unlock()
		body := map[string]any{"runningRelease": "0.2.0", "release": map[string]any{"imageMode": false, "packages": pk,
			"os": map[string]any{"prettyName": "Crash Linux", "id": "crash", "versionId": "1", "buildId": fmt.Sprintf("crash-%d", seq), "kernel": "6.1.0"}}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		api, _ := h.addrs()
		st, raw, _, err := call(ctx, h.admin, "PUT", "https://"+api+"/v1/cluster/nodes/"+h.founderNode+"/release", h.recorder, body, nil)
		cancel()
		if err != nil || st != http.StatusNoContent {
			h.t.Fatalf("large release record: %d %s %v", st, short(string(raw)), err)
		}
		h.mu.Lock()
		log.ackedFloor = seq
		h.acks["record"]++
		h.mu.Unlock()
	}
}

type backupRun struct {
	res      result
	out      string
	started  time.Time
	ended    time.Time
	tokensAt []string // join tokens acknowledged before it started
}

// cycle runs traffic, kills the founder, restarts it and verifies. It
// answers the kind of kill that happened.
func (h *harness) cycle(k int, kind string) string {
	t := h.t
	w := h.waiterTarget()
	wt := h.startWaiter(w)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	h.traffic(ctx, &wg, w)

	window := h.between(100*time.Millisecond, 800*time.Millisecond)
	killAt := window
	var importDone chan bool
	var bk *liveBackup
	began := time.Now()
	switch kind {
	case "import":
		h.mu.Lock()
		tree := h.trees[0]
		if h.curTree == tree {
			tree = h.trees[1]
		}
		h.mu.Unlock()
		importDone = make(chan bool, 1)
		go func() {
			took, ok := h.importRelease(context.Background(), tree)
			if ok {
				h.mu.Lock()
				h.importDur = took
				h.mu.Unlock()
			}
			importDone <- ok
		}()
		h.mu.Lock()
		d := h.importDur
		h.mu.Unlock()
		killAt = h.between(20*time.Millisecond, d*13/10)
		if h.intn(3) == 0 {
			// Now and then the import finishes first: the next successful
			// import must leave nothing of the killed ones behind.
			ok := <-importDone
			importDone <- ok
			killAt = time.Since(began) + h.between(0, window)
		}
	case "backup":
		time.Sleep(h.between(0, window/2))
		bk = h.startBackup(filepath.Join(h.work, fmt.Sprintf("backup-%d.zst", k)))
		// Kill while the snapshot streams over control.sock: once the
		// command has its answer (its .partial file exists), within the
		// time a whole transfer took before.
		select {
		case <-bk.streaming:
		case <-bk.finished:
		case <-time.After(30 * time.Second):
		}
		h.mu.Lock()
		d := h.backupDur
		h.mu.Unlock()
		killAt = time.Since(began) + h.between(0, d*6/5)
	}
	time.Sleep(time.Until(began.Add(killAt)))

	var snap *snapshot
	if kind == "idle" {
		// A quiet moment: every answer is in. A burst of concurrent records
		// for one node first: the release set must show the stored one.
		cancel()
		wg.Wait()
		h.mu.Lock()
		node := h.founderNode
		for _, r := range h.regs {
			if r.cur == "joined" && r.nodeID != "" {
				node = r.nodeID
				break
			}
		}
		h.mu.Unlock()
		h.recordBurst(context.Background(), node, 8)
		snap = h.quietSnapshot()
	}
	killed := time.Now()
	h.f.Kill()
	cancel()
	wg.Wait()
	if code := h.f.ExitCode(); code != -int(syscall.SIGKILL) {
		h.violate("cycle %d: the founder was not killed by SIGKILL (exit %d)", k, code)
	}

	what := kind
	if importDone != nil {
		if ok := <-importDone; ok {
			what = "import-done-before-kill"
		} else {
			what = "import-in-flight"
		}
	}
	var b *backupRun
	if bk != nil {
		<-bk.finished
		run := bk.res
		b = &run
		switch {
		case run.ended.Before(killed):
			what = "backup-done-before-kill"
		case run.res.code == 0 && strings.Contains(run.res.stdout, "running founder"):
			what = "backup-done-before-kill" // the snapshot was complete; the exit came later
		case run.res.code == 0:
			what = "backup-offline-after-kill"
		default:
			what = "backup-in-flight"
		}
	}

	// Offline, before the restart: the audit chain and the stored records.
	t0 := time.Now()
	h.offlineChecks(k, snap)
	t1 := time.Now()
	h.restart()
	t2 := time.Now()
	h.waitSelfRecord()
	h.verify(snap)
	h.waiterResumes(wt)
	if b != nil {
		h.checkBackup(*b)
	}
	t.Logf("cycle %d: %s, killed after %v (offline checks %v, restart %v, verify %v)", k, what, killAt.Round(time.Millisecond),
		t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
	return what
}

var intact = regexp.MustCompile(`intact: (\d+) events`)

// offlineChecks runs with the founder dead: `stratum audit verify` on the
// file, and the stored release records read directly.
func (h *harness) offlineChecks(k int, snap *snapshot) {
	r := stratum(h.t, append([]string{"audit", "verify", "--data", h.dir}, h.storeArgs()...)...)
	m := intact.FindStringSubmatch(r.stdout)
	h.check(r.code == 0 && m != nil, "cycle %d: `stratum audit verify` after SIGKILL = %d %q %q", k, r.code, r.stdout, r.stderr)
	if m != nil {
		n, _ := strconv.Atoi(m[1])
		h.mu.Lock()
		prev := h.auditCount
		h.mu.Unlock()
		h.check(n >= prev, "cycle %d: the audit chain has %d events after the kill, %d were seen before it", k, n, prev)
	}

	stored, err := storedBuildIDs(h.target())
	if err != nil {
		h.violate("cycle %d: reading the store after the kill: %v", k, err)
		return
	}
	h.mu.Lock()
	log := h.records[h.founderNode]
	h.mu.Unlock()
	if log != nil {
		got := stored[h.founderNode]
		n, isCrash := crashSeq(got)
		h.mu.Lock()
		floor, sent := log.ackedFloor, log.sent[n]
		h.mu.Unlock()
		if floor > 0 {
			h.check(isCrash && n >= floor && sent, "cycle %d: founder node record after the kill is %q, but crash-%d was acknowledged", k, got, floor)
		} else if isCrash {
			h.check(sent, "cycle %d: founder node record %q was never sent since the restart", k, got)
		}
	}
	if snap != nil {
		for node, api := range snap.buildIDs {
			if node == h.founderNode && !strings.HasPrefix(stored[node], "crash-") {
				continue // the founder's periodic self-record ran in between
			}
			want := stored[node]
			if want == "" && api == "-" {
				continue
			}
			h.check(api == want, "cycle %d: release set answered %q for node %s before the kill, the store holds %q (the release-set cache disagrees with the committed record)", k, api, node, want)
		}
	}
}

type storedRecord struct {
	buildID    string
	recordedAt time.Time
}

// storedBuildIDs reads each stored release record's os.buildId.
func storedBuildIDs(path string) (map[string]string, error) {
	recs, err := storedRecords(path)
	out := map[string]string{}
	for k, r := range recs {
		out[k] = r.buildID
	}
	return out, err
}

// storedRecords reads the stored release records from the file or the
// database target names.
func storedRecords(target string) (map[string]storedRecord, error) {
	db, err := store.OpenReadOnly(target, nil)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := map[string]storedRecord{}
	err = db.View(func(tx *store.Tx) error {
		return store.Named("release-records").ForEach(tx, func(k string, v []byte) error { // releaseset.bucketRecords
			rec, err := releaseset.DecodeStored(v)
			if err != nil {
				return fmt.Errorf("record %s: %w", k, err)
			}
			r := storedRecord{recordedAt: rec.Release.RecordedAt}
			if rec.Release.OS != nil {
				r.buildID = rec.Release.OS.BuildID
			}
			out[string(k)] = r
			return nil
		})
	})
	return out, err
}

// verify checks the restarted founder against the model, then takes what
// it shows as the new durable baseline.
func (h *harness) verify(snap *snapshot) {
	t := h.t
	// Online audit check through the control socket.
	resp, err := unixClient(filepath.Join(h.dir, "control.sock")).Get("http://founder/audit/verify")
	if err != nil {
		h.violate("audit verify over control.sock: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := intact.FindStringSubmatch(string(body))
		h.check(resp.StatusCode == 200 && m != nil, "audit verify over control.sock: %d %s", resp.StatusCode, body)
		if m != nil {
			n, _ := strconv.Atoi(m[1])
			h.mu.Lock()
			h.check2(n >= h.auditCount, "the running founder's audit chain has %d events, %d were seen before", n, h.auditCount)
			h.auditCount = n
			h.mu.Unlock()
		}
	}

	regs, tokens, members, set := h.lists()
	var apiTokens struct {
		Tokens []struct {
			TokenID string `json:"tokenId"`
		} `json:"tokens"`
	}
	h.mustAdmin("GET", "/v1/iam/tokens", nil, 200, &apiTokens)
	var releases struct {
		Releases []releaseView `json:"releases"`
	}
	h.mustAdmin("GET", "/v1/admin/releases", nil, 200, &releases)
	h.readAudit()

	h.mu.Lock()
	defer h.mu.Unlock()
	listed := map[string]operatorView{}
	for _, v := range regs {
		listed[v.JoinID] = v
	}
	// Registrations whose 201 never came: adopted when their key is ours,
	// with the token use that must come with them.
	for _, v := range regs {
		if _, ok := h.regs[v.JoinID]; ok {
			continue
		}
		r, ok := h.pendingKeys[v.KeyFingerprint]
		h.check2(ok, "registration %s (key %s) was never sent by the harness", v.JoinID, v.KeyFingerprint)
		if ok {
			r.id, r.adopted = v.JoinID, true
			h.regs[v.JoinID] = r
			h.notes["registration-committed-unacknowledged"]++
			delete(h.pendingKeys, v.KeyFingerprint)
		}
	}
	h.notes["registration-lost-unacknowledged"] += len(h.pendingKeys)
	h.pendingKeys = map[string]*reg{}

	// Tokens: every acknowledged one listed; each use is a registration.
	redeemed := map[string]int{}
	for _, v := range regs {
		redeemed[v.TokenID]++
	}
	listedTokens := map[string]tokenView{}
	for _, tk := range tokens {
		listedTokens[tk.TokenID] = tk
		h.check2(tk.UsesLeft == tk.Uses-redeemed[tk.TokenID], "join token %s: usesLeft %d, uses %d, but %d registrations redeemed it", tk.TokenID, tk.UsesLeft, tk.Uses, redeemed[tk.TokenID])
		if mt, ok := h.tokens[tk.TokenID]; ok {
			h.check2(mt.uses == tk.Uses, "join token %s: %d uses, created with %d", tk.TokenID, tk.Uses, mt.uses)
		} else {
			// Its 201 never came; it is durable now. Without its secret the
			// harness cannot redeem it, so it is kept used up.
			h.notes["join-token-committed-unacknowledged"]++
			h.tokens[tk.TokenID] = &jtoken{id: tk.TokenID, uses: tk.Uses, acked: true}
		}
	}
	for id, mt := range h.tokens {
		_, ok := listedTokens[id]
		h.check2(ok || !mt.acked, "acknowledged join token %s is gone after the restart", id)
		mt.redeemed, mt.inflight = redeemed[id], 0
		if mt.secret == "" {
			mt.redeemed = mt.uses
		}
	}

	// Registrations: at least as far as acknowledged, nothing applied that
	// was never sent, the token they redeemed.
	inTurnCount, approved := 0, []int{}
	turnMembers := map[string]string{}
	for id, r := range h.regs {
		v, ok := listed[id]
		if !ok {
			h.check2(r.acked == "", "acknowledged registration %s (%s) is gone after the restart", id, r.acked)
			continue
		}
		s := v.State
		h.check2(v.TokenID == r.tokenID, "registration %s redeemed token %s, the harness sent %s", id, v.TokenID, r.tokenID)
		switch {
		case r.acked == "rejected" || r.acked == "failed":
			h.check2(s == r.acked, "registration %s: acknowledged %s, now %s", id, r.acked, s)
		case s == "rejected":
			h.check2(r.sent["reject"], "registration %s is rejected; no rejection was sent", id)
		case s == "failed":
			h.check2(r.sent["cancel"] || r.sent["failed"], "registration %s failed (%s); neither a cancel nor a failure was sent", id, v.Reason)
		default:
			h.check2(r.acked == "" || levels[s] >= levels[r.acked], "registration %s is %s after the restart; %s was acknowledged", id, s, r.acked)
		}
		if levels[s] >= 1 && s != "rejected" {
			h.check2(r.sent["approve"], "registration %s is %s without an approval sent", id, s)
		}
		if s == "installing" {
			h.check2(r.sent["installing"] || r.sent["done"], "registration %s is installing; no progress was sent", id)
		}
		if s == "joined" {
			h.check2(r.sent["done"], "registration %s joined; no done was sent", id)
		}
		if r.doneAcked && s != "failed" {
			h.check2(s == "installing" || s == "joined", "registration %s: done acknowledged, now %s", id, s)
		}
		if s == "pending" && r.acked == "needs-upgrade" {
			h.check2(r.sent["reregister"], "registration %s left needs-upgrade with no re-registration", id)
		}
		switch {
		case inTurn(s):
			inTurnCount++
		case s == "approved":
			approved = append(approved, v.QueuePosition)
		}
		if (inTurn(s) || s == "joined") && v.Assignment != nil {
			want := "joining"
			if s == "joined" {
				want = "active"
			}
			turnMembers[v.Assignment.NodeID] = want
		}
		if s == "approved" || inTurn(s) || s == "joined" {
			h.check2(v.Assignment != nil && v.Assignment.NodeID != "", "registration %s is %s without an assignment", id, s)
		}
		// The new baseline: what a restarted founder shows is durable.
		r.cur = s
		if r.acked == "" || final(s) || levels[s] > levels[r.acked] {
			r.acked = s
		}
		if v.Assignment != nil {
			r.nodeID = v.Assignment.NodeID
		}
		r.release = map[bool]string{true: "0.1.0", false: "0.2.0"}[s == "needs-upgrade"]
	}
	h.check2(inTurnCount <= 1, "%d joins are delivering or installing at once", inTurnCount)
	h.check2(len(approved) == 0 || inTurnCount == 1, "%d approved joins wait but none holds the delivery slot (the queue stalled)", len(approved))
	sort.Ints(approved)
	for i, p := range approved {
		h.check2(p == i+1, "approved joins have queue positions %v, want 1..%d", approved, len(approved))
		if p != i+1 {
			break
		}
	}

	// Members: the founder plus one per delivering, installing or joined
	// registration, in the matching state.
	seen := map[string]bool{}
	for _, m := range members.Members {
		seen[m.NodeID] = true
		h.check2(m.Generation <= members.Generation, "member %s admitted at generation %d, the cluster is at %d", m.NodeID, m.Generation, members.Generation)
		if m.NodeID == h.founderNode {
			h.check2(m.AppliedGeneration == members.Generation, "the founder applied generation %d, the cluster is at %d", m.AppliedGeneration, members.Generation)
			continue
		}
		want, ok := turnMembers[m.NodeID]
		h.check2(ok, "member %s (%s) belongs to no delivering, installing or joined registration", m.NodeID, m.State)
		if ok {
			h.check2(m.State == want, "member %s is %s, its registration says %s", m.NodeID, m.State, want)
		}
	}
	for node, state := range turnMembers {
		h.check2(seen[node], "registration with node %s is %s but the node is not a member", node, state)
	}

	// API tokens.
	listedAPI := map[string]bool{}
	for _, tk := range apiTokens.Tokens {
		listedAPI[tk.TokenID] = true
	}
	for id := range h.apiTokens {
		h.check2(listedAPI[id], "acknowledged API token %s is gone after the restart", id)
	}

	// Release records of members: sequential writes, the stored one at
	// least the last acknowledged.
	ids := set.buildIDs()
	for node, log := range h.records {
		if node == h.founderNode {
			continue // checked on the file before the restart
		}
		got := ids[node]
		n, isCrash := crashSeq(got)
		if log.ackedFloor > 0 {
			h.check2(isCrash && n >= log.ackedFloor && log.sent[n], "node %s release record is %q after the restart; crash-%d was acknowledged", node, got, log.ackedFloor)
		} else if isCrash {
			h.check2(log.sent[n], "node %s release record %q was never sent", node, got)
		}
	}

	// Releases: listed means complete on disk and the acknowledged import
	// (or one whose answer never came).
	for _, rv := range releases.Releases {
		h.check2(len(rv.Corrupt) == 0, "release %s lists corrupt files %v after the restart (no file was damaged)", rv.Release, rv.Corrupt)
		sum, problems := treeOnDisk(filepath.Join(h.dir, "releases", rv.Release))
		h.check2(len(problems) == 0 && sum == rv.ManifestSHA256, "listed release %s (manifest %s, import %s) does not match its tree on disk: manifest on disk %s, problems %v", rv.Release, short(rv.ManifestSHA256), rv.ImportID, short(sum), problems)
		if rv.Release == "0.2.0" {
			h.check2(rv.ManifestSHA256 == h.importAcked || h.importSent[rv.ManifestSHA256], "release 0.2.0 has manifest %s; the last acknowledged import was %s", short(rv.ManifestSHA256), short(h.importAcked))
			if tr := h.treeFor(rv.ManifestSHA256); tr != nil {
				h.curTree, h.importAcked = tr, rv.ManifestSHA256
			}
		}
	}
	h.importSent = map[string]bool{}

	// Every acknowledged state change has its audit event.
	for id, r := range h.regs {
		if r.acked != "" && !r.adopted {
			h.check2(h.auditSeen["join.registered/"+id], "registration %s has no join.registered audit event", id)
		}
		if r.sent["approve"] && levels[r.acked] >= 1 {
			h.check2(h.auditSeen["join.approved/"+id], "approved registration %s has no join.approved audit event", id)
		}
	}
	for id, mt := range h.tokens {
		if mt.acked {
			h.check2(h.auditSeen["join.token.created/"+id], "join token %s has no join.token.created audit event", id)
		}
	}
	for id := range h.apiTokens {
		h.check2(h.auditSeen["iam.token.created/"+id], "API token %s has no iam.token.created audit event", id)
	}

	// A quiet kill: exactly what the API showed before it.
	if snap != nil {
		for id, s := range snap.regs {
			h.check2(listed[id].State == s, "quiet kill: registration %s was %s before the kill, %s after", id, s, listed[id].State)
		}
		h.check2(len(regs) == len(snap.regs), "quiet kill: %d registrations before, %d after", len(snap.regs), len(regs))
		for id, n := range snap.usesLeft {
			h.check2(listedTokens[id].UsesLeft == n, "quiet kill: token %s had %d uses left before, %d after", id, n, listedTokens[id].UsesLeft)
		}
		h.check2(members.Generation == snap.generation, "quiet kill: generation %d before, %d after", snap.generation, members.Generation)
	}

	// The join in its turn still has its delivery, and a needs-upgrade
	// joiner reads the listed release's bytes.
	var turnReg, upgrader *reg
	for _, r := range h.regs {
		if inTurn(r.cur) {
			turnReg = r
		}
		if r.cur == "needs-upgrade" && upgrader == nil {
			upgrader = r
		}
	}
	tree := h.curTree
	h.mu.Unlock()
	if upgrader == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, ok := h.createJoinToken(ctx); ok {
			upgrader, _ = h.register(ctx, "0.1.0")
		}
		cancel()
	}
	if turnReg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		st, raw, _, err := h.joinCall(ctx, turnReg, "GET", "/v1/join/registrations/"+turnReg.id, nil, nil)
		cancel()
		var v joinerView
		ok := err == nil && st == 200 && json.Unmarshal(raw, &v) == nil
		h.check(ok && inTurn(v.State) && v.Delivery != nil && v.Delivery.Bundle.NodeCert != "", "join %s in its turn after the restart: %d %s %v", turnReg.id, st, short(string(raw)), err)
	}
	if upgrader != nil && upgrader.cur == "needs-upgrade" && tree != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		h.downloadCheck(ctx, upgrader, tree, true)
		cancel()
	} else {
		h.violate("no needs-upgrade joiner could be registered to read release %v", tree != nil)
	}
	h.checkReleaseDir(false)
	h.mu.Lock()
	t.Logf("verified: %d registrations, %d join tokens, %d members (generation %d), %d API tokens, %d audit events",
		len(regs), len(tokens), len(members.Members), members.Generation, len(apiTokens.Tokens), h.auditCount)
}

// check2 is check with h.mu held.
func (h *harness) check2(ok bool, format string, args ...any) {
	h.checks++
	if !ok {
		h.violate(format, args...)
	}
}

func short(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// readAudit reads the audit events appended since the last read.
func (h *harness) readAudit() {
	for {
		h.mu.Lock()
		after := h.auditAfter
		h.mu.Unlock()
		var page struct {
			Events []struct {
				Seq     uint64 `json:"seq"`
				Kind    string `json:"kind"`
				Subject string `json:"subject"`
			} `json:"events"`
		}
		h.mustAdmin("GET", fmt.Sprintf("/v1/admin/audit?after=%d&limit=1000", after), nil, 200, &page)
		h.mu.Lock()
		for _, ev := range page.Events {
			h.auditSeen[ev.Kind+"/"+ev.Subject] = true
			h.auditAfter = ev.Seq
		}
		h.mu.Unlock()
		if len(page.Events) < 1000 {
			return
		}
	}
}

// checkReleaseDir: after a successful import nothing half-done is left
// in DIR/releases.
func (h *harness) checkReleaseDir(afterImport bool) {
	entries, err := os.ReadDir(filepath.Join(h.dir, "releases"))
	if err != nil {
		h.violate("releases dir: %v", err)
		return
	}
	var leftovers []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".import-") || strings.HasPrefix(e.Name(), ".old-") {
			leftovers = append(leftovers, e.Name())
		}
	}
	if afterImport {
		h.check(len(leftovers) == 0, "after a successful import DIR/releases still holds %v", leftovers)
	} else if len(leftovers) > 0 {
		h.note("release-leftovers-until-next-import")
	}
}

// checkBackup: a backup that said it succeeded is a consistent store
// holding every join token acknowledged before it started; one that
// failed left no file behind.
func (h *harness) checkBackup(b backupRun) {
	if b.res.code != 0 {
		_, errOut := os.Stat(b.out)
		_, errPartial := os.Stat(b.out + ".partial")
		h.check(os.IsNotExist(errOut) && os.IsNotExist(errPartial), "a failed backup left %s or its .partial behind", b.out)
		h.check(strings.TrimSpace(b.res.stderr) != "", "a failed backup (exit %d) said nothing", b.res.code)
		h.note("backup-failed-cleanly")
		return
	}
	h.ack("backup")
	restored := filepath.Join(h.work, "restored.db")
	os.Remove(restored)
	defer os.Remove(restored)
	in, err := os.Open(b.out)
	if err != nil {
		h.violate("backup %s said it succeeded: %v", b.out, err)
		return
	}
	defer in.Close()
	key, err := crypto.LoadOrCreateDataKey(filepath.Join(h.dir, "data.key"), false)
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := backup.Open(in, nil)
	if err == nil {
		err = c.Authenticate(key)
	}
	var e *backup.Entry
	if err == nil {
		e, err = c.Next()
	}
	if err != nil {
		h.violate("backup %s: %v", b.out, err)
		return
	}
	defer c.Close()
	out, err := os.Create(restored)
	if err != nil {
		h.t.Fatal(err)
	}
	_, err = io.Copy(out, e)
	out.Close()
	for err == nil {
		if e, err = c.Next(); err == nil {
			_, err = io.Copy(io.Discard, e)
		}
	}
	if err == io.EOF {
		err = c.Finish()
	}
	if err != nil {
		h.violate("backup %s (%q) does not read to its MAC: %v", b.out, b.res.stdout, err)
		return
	}
	db, err := store.OpenReadOnly(restored, nil)
	if err != nil {
		h.violate("backup %s does not open as a store: %v", b.out, err)
		return
	}
	defer db.Close()
	n, err := store.VerifyAuditFile(restored, key)
	h.check(err == nil, "backup %s: audit chain broken after %d events: %v", b.out, n, err)
	var missing []string
	_ = db.View(func(tx *store.Tx) error {
		for _, id := range b.tokensAt {
			if store.Named("join-tokens").Get(tx, id) == nil { // join.bucketTokens
				missing = append(missing, id)
			}
		}
		return nil
	})
	h.check(len(missing) == 0, "backup %s lacks join tokens acknowledged before it started: %v", b.out, missing)
	os.Remove(b.out)
}

// waiterTarget is a pending registration for the long-poll waiter; one is
// made when there is none.
func (h *harness) waiterTarget() *reg {
	if r := h.pick(func(r *reg) bool { return r.cur == "pending" && !r.sent["approve"] && !r.sent["reject"] }); r != nil {
		h.release(r)
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, ok := h.createJoinToken(ctx); !ok {
		h.t.Fatalf("creating a join token for the waiter failed\n%s", h.logTail())
	}
	for i := 0; i < 10; i++ {
		if r, ok := h.register(ctx, "0.2.0"); ok && r.cur == "pending" {
			return r
		}
	}
	h.t.Fatalf("no pending registration for the waiter\n%s", h.logTail())
	return nil
}

// waiter is a joiner long-polling its registration, reconnecting after
// errors as `stratum join` does.
type waiter struct {
	r      *reg
	client *http.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	answers []waitAnswer
	errs    int
}

type waitAnswer struct {
	at    time.Time
	state string
}

func (h *harness) startWaiter(r *reg) *waiter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &waiter{r: r, client: httpClient(h.pool(), r.client.Transport.(*http.Transport).TLSClientConfig.Certificates, true), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		last := ""
		for ctx.Err() == nil {
			_, join := h.addrs()
			url := "https://" + join + "/v1/join/registrations/" + r.id
			if last != "" {
				url += "?wait=30&state=" + last
			}
			st, raw, _, err := call(ctx, w.client, "GET", url, "", nil, nil)
			if err != nil || st != 200 {
				w.mu.Lock()
				w.errs++
				w.mu.Unlock()
				w.client.CloseIdleConnections()
				sleepCtx(ctx, 50*time.Millisecond)
				continue
			}
			var v joinerView
			if json.Unmarshal(raw, &v) != nil {
				continue
			}
			w.mu.Lock()
			w.answers = append(w.answers, waitAnswer{at: time.Now(), state: v.State})
			w.mu.Unlock()
			last = v.State
		}
	}()
	return w
}

// waiterResumes: the waiter that held a long-poll across the kill
// reconnects to the restarted founder; a change wakes it at once and it
// answers the current state.
func (h *harness) waiterResumes(w *waiter) {
	defer func() {
		w.cancel()
		<-w.done
	}()
	h.mu.Lock()
	state := w.r.cur
	h.mu.Unlock()
	// Its current state, as the operator sees it.
	var v operatorView
	h.mustAdmin("GET", "/v1/admin/join/registrations/"+w.r.id, nil, 200, &v)
	if v.State != "pending" {
		h.violate("waiter's registration %s is %s after the restart; only pending was ever acknowledged for it (model %s)", w.r.id, v.State, state)
		return
	}
	h.mu.Lock()
	w.r.sent["approve"] = true
	h.mu.Unlock()
	approvedAt := time.Now()
	var ov operatorView
	h.mustAdmin("POST", "/v1/admin/join/registrations/"+w.r.id+"/approve", map[string]any{}, 200, &ov)
	h.ack("approval")
	h.observe(w.r, ov.State)
	h.mu.Lock()
	if ov.Assignment != nil {
		w.r.nodeID = ov.Assignment.NodeID
	}
	h.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		var got *waitAnswer
		for i := range w.answers {
			if w.answers[i].at.After(approvedAt) && w.answers[i].state != "pending" {
				got = &w.answers[i]
				break
			}
		}
		errs := w.errs
		w.mu.Unlock()
		if got != nil {
			h.check(levels[got.state] >= 1, "the resumed waiter answered %s after the approval", got.state)
			if errs == 0 {
				h.note("waiter-kill-unnoticed")
			}
			h.mu.Lock()
			if h.waitLatency < got.at.Sub(approvedAt) {
				h.waitLatency = got.at.Sub(approvedAt)
			}
			h.mu.Unlock()
			h.ack("waiter-resumed")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h.violate("the long-poll waiter on %s did not get its new state within 15s of the approval after the restart (%d errors, answers %v)", w.r.id, w.errs, w.answers)
}

// finish stops the last founder with SIGTERM and verifies the file.
func (h *harness) finish() {
	code, took, err := h.f.Signal(syscall.SIGTERM, 30*time.Second)
	h.check(err == nil && code == 0, "final SIGTERM: exit %d after %v: %v\n%s", code, took, err, h.logTail())
	_, serr := os.Stat(filepath.Join(h.dir, "control.sock"))
	h.check(os.IsNotExist(serr), "control.sock left after a clean shutdown")
	r := stratum(h.t, append([]string{"audit", "verify", "--data", h.dir}, h.storeArgs()...)...)
	h.check(r.code == 0 && strings.Contains(r.stdout, "intact"), "audit verify after SIGTERM = %d %q %q", r.code, r.stdout, r.stderr)
	h.mu.Lock()
	h.notes[fmt.Sprintf("max-waiter-wake-ms-%d", h.waitLatency.Milliseconds())]++
	h.mu.Unlock()
}
