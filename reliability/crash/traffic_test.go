package crash

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"stratum/internal/stratumtest"
	"sync"
	"time"
)

// The traffic: every operation records what it sent before sending and
// what was acknowledged once the whole answer arrived. An operation whose
// answer never came (the founder died) has an unknown outcome, which the
// checks after the restart allow either way.

const describeOnly = `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:DescribeRelease"],"resource":["*"]}]}`

const recordOnly = `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:RecordRelease"],"resource":["*"]}]}`

// traffic runs the writers until ctx ends.
func (h *harness) traffic(ctx context.Context, wg *sync.WaitGroup, exclude *reg) {
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				h.mixedOp(ctx, exclude)
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if !h.turnOp(ctx) {
				sleepCtx(ctx, 15*time.Millisecond)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			h.recordOp(ctx, "")
			sleepCtx(ctx, 10*time.Millisecond)
		}
	}()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// mixedOp runs one operation picked by weight.
func (h *harness) mixedOp(ctx context.Context, exclude *reg) {
	switch n := h.intn(100); {
	case n < 14:
		h.createJoinToken(ctx)
	case n < 44:
		h.register(ctx, "")
	case n < 66:
		h.approve(ctx, exclude)
	case n < 69:
		h.reject(ctx, exclude)
	case n < 76:
		h.createAPIToken(ctx)
	case n < 80:
		h.reregister(ctx)
	default:
		h.download(ctx)
	}
}

func (h *harness) unexpected(what string, st int, raw []byte) {
	if st >= 500 && st != http.StatusServiceUnavailable {
		h.violate("%s answered %d: %s", what, st, bytes.TrimSpace(raw))
		return
	}
	h.note(fmt.Sprintf("%s-%d", what, st))
}

func (h *harness) createJoinToken(ctx context.Context) (*jtoken, bool) {
	uses := 1 + h.intn(3)
	role := []string{"worker", "control-plane", "postgres"}[h.intn(3)]
	st, raw, err := h.adminCall(ctx, "POST", "/v1/admin/join/tokens", map[string]any{"role": role, "ttl": "24h", "uses": uses, "description": "crash"})
	if err != nil {
		return nil, false
	}
	if st != http.StatusCreated {
		h.unexpected("join-token", st, raw)
		return nil, false
	}
	var out struct {
		TokenID  string `json:"tokenId"`
		Token    string `json:"token"`
		UsesLeft int    `json:"usesLeft"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.TokenID == "" || out.UsesLeft != uses {
		h.violate("join token answer %s", raw)
		return nil, false
	}
	tok := &jtoken{id: out.TokenID, secret: out.Token, uses: uses, acked: true}
	h.mu.Lock()
	h.tokens[tok.id] = tok
	h.acks["join-token"]++
	h.mu.Unlock()
	return tok, true
}

// register redeems a token with a fresh key: 201 is acknowledged; no
// answer leaves the key in pendingKeys for the next restart to adopt.
func (h *harness) register(ctx context.Context, release string) (*reg, bool) {
	key, err := stratumtest.MakeJoinerKey()
	if err != nil {
		h.t.Error(err)
		return nil, false
	}
	h.mu.Lock()
	var tok *jtoken
	for _, t := range h.tokens {
		if t.avail() > 0 {
			tok = t
			break
		}
	}
	if tok == nil {
		h.mu.Unlock()
		return nil, false
	}
	h.ipSeq++
	if release == "" {
		release = "0.2.0"
		if h.intn(4) == 0 {
			release = "0.1.0" // older: needs-upgrade, offered the imported release
		}
	}
	r := &reg{key: key, tokenID: tok.id, token: tok.secret, release: release,
		ip: fmt.Sprintf("10.%d.%d.%d", 100+h.ipSeq/65536, h.ipSeq/256%256, h.ipSeq%256), hostname: fmt.Sprintf("crash-%d", h.ipSeq),
		sent: map[string]bool{}}
	r.client = httpClient(h.pool(), []tls.Certificate{key.Cert}, false)
	tok.inflight++
	h.pendingKeys[key.Pin] = r
	h.mu.Unlock()

	st, raw, _, err := h.joinCall(ctx, r, "POST", "/v1/join/registrations", r.body(), nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	tok.inflight--
	if err != nil {
		tok.inflight++ // outcome unknown until the restart
		return nil, false
	}
	delete(h.pendingKeys, key.Pin)
	if st != http.StatusCreated {
		h.mu.Unlock()
		h.unexpected("register", st, raw)
		h.mu.Lock()
		return nil, false
	}
	var v joinerView
	if err := json.Unmarshal(raw, &v); err != nil || v.JoinID == "" {
		h.violate("registration answer %s", raw)
		return nil, false
	}
	want := "pending"
	if release != "0.2.0" {
		want = "needs-upgrade"
	}
	if v.State != want {
		h.violate("registration %s on %s answered state %s, want %s", v.JoinID, release, v.State, want)
	}
	r.id, r.acked, r.cur = v.JoinID, v.State, v.State
	h.regs[r.id] = r
	tok.redeemed++
	h.acks["registration"]++
	return r, true
}

func (r *reg) body() map[string]any {
	b := map[string]any{"token": r.token, "release": r.release, "hostname": r.hostname, "mgmtIp": r.ip, "machineId": "m-" + r.hostname,
		"facts": map[string]any{"cpu": 4, "note": "crash harness"}}
	if r.release != "0.2.0" {
		b["selfUpgrade"] = true
	}
	return b
}

func (h *harness) pool() *x509.CertPool {
	return h.admin.Transport.(*http.Transport).TLSClientConfig.RootCAs
}

// pick takes (marks busy) a registration that pred accepts.
func (h *harness) pick(pred func(r *reg) bool) *reg {
	h.mu.Lock()
	defer h.mu.Unlock()
	var cands []*reg
	for _, r := range h.regs {
		if !r.busy && pred(r) {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	r := cands[h.intn(len(cands))]
	r.busy = true
	return r
}

func (h *harness) release(r *reg) {
	h.mu.Lock()
	r.busy = false
	h.mu.Unlock()
}

// observe raises what an acknowledged answer says about r.
func (h *harness) observe(r *reg, state string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.cur = state
	if r.acked == "" || final(state) || levels[state] > levels[r.acked] {
		if !final(r.acked) || r.acked == state {
			r.acked = state
		}
	}
}

func (h *harness) approve(ctx context.Context, exclude *reg) {
	r := h.pick(func(r *reg) bool {
		return r != exclude && r.cur == "pending" && !r.sent["approve"] && !r.sent["reject"]
	})
	if r == nil {
		return
	}
	defer h.release(r)
	h.mu.Lock()
	r.sent["approve"] = true
	h.mu.Unlock()
	st, raw, err := h.adminCall(ctx, "POST", "/v1/admin/join/registrations/"+r.id+"/approve", map[string]any{})
	if err != nil {
		return
	}
	if st != http.StatusOK {
		h.unexpected("approve", st, raw)
		return
	}
	var v operatorView
	if err := json.Unmarshal(raw, &v); err != nil || v.Assignment == nil {
		h.violate("approve answer %s", raw)
		return
	}
	if v.State != "approved" && v.State != "delivering" {
		h.violate("approve of %s answered state %s", r.id, v.State)
	}
	h.mu.Lock()
	r.nodeID = v.Assignment.NodeID
	h.acks["approval"]++
	h.mu.Unlock()
	h.observe(r, v.State)
}

func (h *harness) reject(ctx context.Context, exclude *reg) {
	r := h.pick(func(r *reg) bool {
		return r != exclude && (r.cur == "pending" || r.cur == "needs-upgrade") && !r.sent["approve"] && !r.sent["reject"]
	})
	if r == nil {
		return
	}
	defer h.release(r)
	h.mu.Lock()
	r.sent["reject"] = true
	h.mu.Unlock()
	st, raw, err := h.adminCall(ctx, "POST", "/v1/admin/join/registrations/"+r.id+"/reject", map[string]any{"reason": "crash harness"})
	if err != nil {
		return
	}
	if st != http.StatusOK {
		h.unexpected("reject", st, raw)
		return
	}
	h.ack("reject")
	h.observe(r, "rejected")
}

// reregister: a needs-upgrade joiner comes back on the cluster release
// (200, no token use) and becomes pending.
func (h *harness) reregister(ctx context.Context) {
	r := h.pick(func(r *reg) bool { return r.cur == "needs-upgrade" && !r.sent["reject"] })
	if r == nil {
		return
	}
	defer h.release(r)
	h.mu.Lock()
	r.sent["reregister"] = true
	r.release = "0.2.0"
	h.mu.Unlock()
	st, raw, _, err := h.joinCall(ctx, r, "POST", "/v1/join/registrations", r.body(), nil)
	if err != nil {
		return
	}
	if st != http.StatusOK {
		h.unexpected("reregister", st, raw)
		return
	}
	var v joinerView
	if err := json.Unmarshal(raw, &v); err != nil || v.JoinID != r.id || v.State != "pending" {
		h.violate("re-registration of %s answered %s", r.id, raw)
		return
	}
	h.ack("reregister")
	h.observe(r, v.State)
}

func (h *harness) createAPIToken(ctx context.Context) {
	st, raw, err := h.adminCall(ctx, "POST", "/v1/iam/tokens", map[string]any{"name": "crash", "ttl": "1h", "policy": json.RawMessage(describeOnly)})
	if err != nil {
		return
	}
	if st != http.StatusCreated {
		h.unexpected("api-token", st, raw)
		return
	}
	var out struct {
		TokenID string `json:"tokenId"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.TokenID == "" {
		h.violate("API token answer %s", raw)
		return
	}
	h.mu.Lock()
	h.apiTokens[out.TokenID] = true
	h.acks["api-token"]++
	h.mu.Unlock()
}

// download reads a random range of the offered release's blob as a
// needs-upgrade joiner; the bytes must be the signed tree's.
func (h *harness) download(ctx context.Context) {
	r := h.pick(func(r *reg) bool { return r.cur == "needs-upgrade" })
	if r == nil {
		return
	}
	defer h.release(r)
	h.mu.Lock()
	tree := h.curTree
	h.mu.Unlock()
	h.downloadCheck(ctx, r, tree, false)
}

// downloadCheck GETs a 1 MiB range of tree's blob. strict (after a
// restart, nothing importing) also refuses RELEASE_CORRUPT and 404.
func (h *harness) downloadCheck(ctx context.Context, r *reg, tree *releaseTree, strict bool) {
	size := len(tree.blob)
	n := min(1<<20, size)
	off := h.intn(size - n + 1)
	st, raw, hdr, err := h.joinCall(ctx, r, "GET", "/v1/join/registrations/"+r.id+"/release/"+tree.blobPath, nil,
		map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", off, off+n-1)})
	if err != nil {
		return
	}
	switch st {
	case http.StatusPartialContent:
		h.check(bytes.Equal(raw, tree.blob[off:off+n]), "release range %d+%d of %s served bytes that are not the signed tree's", off, n, tree.blobPath)
		h.ack("download")
	case http.StatusServiceUnavailable:
		var e envelope
		_ = json.Unmarshal(raw, &e)
		h.note("download-" + e.Code)
		if strict {
			h.check(e.Code == "RELEASE_BUSY", "release read after restart answered %s %s (Retry-After %q)", e.Code, e.Message, hdr.Get("Retry-After"))
		}
	case http.StatusNotFound:
		h.note("download-404")
		if strict {
			h.violate("release read of %s after restart: 404 %s", tree.blobPath, raw)
		}
	default:
		h.unexpected("download", st, raw)
	}
}

// turnOp drives the join holding the delivery slot, as its joiner: it
// reads the delivery, reports installing and done, and has the other
// members apply the new generation; or it fails the join (operator
// cancel or joiner failure) to keep the membership small.
func (h *harness) turnOp(ctx context.Context) bool {
	r := h.pick(func(r *reg) bool { return inTurn(r.cur) })
	if r == nil {
		h.findTurn(ctx)
		return false
	}
	defer h.release(r)
	st, raw, _, err := h.joinCall(ctx, r, "GET", "/v1/join/registrations/"+r.id, nil, nil)
	if err != nil {
		return true
	}
	if st != http.StatusOK {
		h.unexpected("joiner-view", st, raw)
		return true
	}
	var v joinerView
	if err := json.Unmarshal(raw, &v); err != nil {
		h.violate("joiner view %s", raw)
		return true
	}
	h.observe(r, v.State)
	if !inTurn(v.State) {
		return true
	}
	if v.Delivery == nil {
		h.violate("join %s is %s without its delivery", r.id, v.State)
		return true
	}
	leaf, err := h.leafClient(v.Delivery.Bundle.NodeCert, v.Delivery.Bundle.NodeKey)
	if err != nil {
		h.violate("join %s: delivered leaf does not load: %v", r.id, err)
		return true
	}
	h.mu.Lock()
	r.leaf, r.gen = leaf, v.Delivery.Bundle.Generation
	joined := 0
	for _, o := range h.regs {
		if o.cur == "joined" {
			joined++
		}
	}
	h.mu.Unlock()

	// Joined members must all apply each later generation: keep them few.
	if (joined >= 6 && h.chance(0.8)) || h.chance(0.15) {
		if h.chance(0.5) {
			h.mu.Lock()
			r.sent["cancel"] = true
			h.mu.Unlock()
			st, raw, err := h.adminCall(ctx, "POST", "/v1/admin/join/registrations/"+r.id+"/cancel", map[string]any{"reason": "crash harness"})
			if err == nil && st == http.StatusOK {
				h.ack("cancel")
				h.observe(r, "failed")
			} else if err == nil {
				h.unexpected("cancel", st, raw)
			}
			return true
		}
		h.progress(ctx, r, "failed")
		return true
	}
	if v.State == "delivering" && !h.progress(ctx, r, "installing") {
		return true
	}
	if !h.progress(ctx, r, "done") {
		return true
	}
	h.mu.Lock()
	state := r.cur
	var others []*reg
	for _, o := range h.regs {
		if o != r && o.cur == "joined" && o.leaf != nil {
			others = append(others, o)
		}
	}
	gen := r.gen
	h.mu.Unlock()
	if state == "joined" {
		return true
	}
	for _, o := range others {
		api, _ := h.addrs()
		st, raw, _, err := call(ctx, o.leaf, "PUT", "https://"+api+"/v1/cluster/members/"+o.nodeID+"/applied", "", map[string]any{"generation": gen}, nil)
		if err != nil {
			return true
		}
		if st != http.StatusOK {
			h.unexpected("applied", st, raw)
			return true
		}
		h.ack("applied")
	}
	st, raw, _, err = h.joinCall(ctx, r, "GET", "/v1/join/registrations/"+r.id, nil, nil)
	var after joinerView
	if err == nil && st == http.StatusOK && json.Unmarshal(raw, &after) == nil {
		h.observe(r, after.State)
		if after.State != "joined" {
			h.note("turn-not-joined-after-applied")
		}
	}
	return true
}

// progress reports phase as r's joiner.
func (h *harness) progress(ctx context.Context, r *reg, phase string) bool {
	h.mu.Lock()
	r.sent[phase] = true
	h.mu.Unlock()
	st, raw, _, err := h.joinCall(ctx, r, "POST", "/v1/join/registrations/"+r.id+"/progress", map[string]any{"phase": phase, "message": "crash harness"}, nil)
	if err != nil {
		return false
	}
	if st != http.StatusOK {
		h.unexpected("progress-"+phase, st, raw)
		return false
	}
	var v joinerView
	if err := json.Unmarshal(raw, &v); err != nil {
		h.violate("progress answer %s", raw)
		return false
	}
	h.ack("progress-" + phase)
	if phase == "done" {
		h.mu.Lock()
		r.doneAcked = true
		h.mu.Unlock()
	}
	h.observe(r, v.State)
	return true
}

// findTurn asks the operator API which join holds the slot, when the
// harness does not know (a slot handed on inside another transaction).
func (h *harness) findTurn(ctx context.Context) {
	for _, s := range []string{"delivering", "installing"} {
		st, raw, err := h.adminCall(ctx, "GET", "/v1/admin/join/registrations?state="+s, nil)
		if err != nil || st != http.StatusOK {
			return
		}
		var list struct {
			Registrations []operatorView `json:"registrations"`
		}
		if json.Unmarshal(raw, &list) != nil {
			return
		}
		h.mu.Lock()
		for _, v := range list.Registrations {
			if r, ok := h.regs[v.JoinID]; ok && !r.busy {
				r.cur = v.State
				if v.Assignment != nil {
					r.nodeID = v.Assignment.NodeID
				}
			}
		}
		h.mu.Unlock()
	}
}

// recordOp records a release for the founder or a joined member with the
// recorder's bearer token; one writer, so sequence numbers order them.
// node "" picks one.
func (h *harness) recordOp(ctx context.Context, node string) (int, bool) {
	h.mu.Lock()
	if node == "" {
		node = h.founderNode
		if h.intn(2) == 0 {
			var joined []string
			for _, r := range h.regs {
				if r.cur == "joined" && r.nodeID != "" {
					joined = append(joined, r.nodeID)
				}
			}
			if len(joined) > 0 {
				node = joined[h.intn(len(joined))]
			}
		}
	}
	h.recSeq++
	seq := h.recSeq
	log := h.records[node]
	if log == nil {
		log = &recordLog{sent: map[int]bool{}}
		h.records[node] = log
	}
	log.sent[seq] = true
	log.sentSince = true
	h.mu.Unlock()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	body := map[string]any{"runningRelease": "0.2.0", "release": map[string]any{
		"hostReportedAt": now, "imageMode": false,
		"os": map[string]any{"prettyName": "Crash Linux", "id": "crash", "versionId": "1", "buildId": fmt.Sprintf("crash-%d", seq), "kernel": "6.1.0"},
	}}
	api, _ := h.addrs()
	st, raw, _, err := call(ctx, h.admin, "PUT", "https://"+api+"/v1/cluster/nodes/"+node+"/release", h.recorder, body, nil)
	if err != nil {
		return seq, false
	}
	if st != http.StatusNoContent {
		h.unexpected("record", st, raw)
		return seq, false
	}
	h.mu.Lock()
	if seq > log.ackedFloor {
		log.ackedFloor = seq
	}
	h.acks["record"]++
	h.mu.Unlock()
	return seq, true
}

// recordBurst sends n concurrent records for one node; any of them may
// be the one stored, so the floor is the lowest.
func (h *harness) recordBurst(ctx context.Context, node string, n int) {
	var wg sync.WaitGroup
	seqs := make(chan int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s, ok := h.recordOp(ctx, node); ok {
				seqs <- s
			}
		}()
	}
	wg.Wait()
	close(seqs)
	low := 0
	for s := range seqs {
		if low == 0 || s < low {
			low = s
		}
	}
	h.mu.Lock()
	if log := h.records[node]; log != nil && low > 0 {
		log.ackedFloor = low
	}
	h.mu.Unlock()
}

// importRelease imports tree through the admin API.
func (h *harness) importRelease(ctx context.Context, tree *releaseTree) (time.Duration, bool) {
	h.mu.Lock()
	h.importSent[tree.manifestSum] = true
	h.mu.Unlock()
	start := time.Now()
	st, raw, err := h.adminCall(ctx, "POST", "/v1/admin/releases", map[string]any{"path": tree.dir, "replace": true})
	took := time.Since(start)
	if err != nil {
		return took, false
	}
	if st != http.StatusCreated {
		h.unexpected("import", st, raw)
		return took, false
	}
	h.mu.Lock()
	h.importAcked, h.curTree = tree.manifestSum, tree
	h.importSent = map[string]bool{}
	h.acks["import"]++
	h.mu.Unlock()
	// A successful import leaves nothing half-done behind it.
	h.checkReleaseDir(true)
	return took, true
}

// treeFor is the tree whose manifest has sum.
func (h *harness) treeFor(sum string) *releaseTree {
	for _, t := range h.trees {
		if t.manifestSum == sum {
			return t
		}
	}
	return nil
}
