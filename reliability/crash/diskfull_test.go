package crash

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"stratum/internal/stratumtest"
	"stratum/store"

	bolt "go.etcd.io/bbolt"
)

// TestDiskFull runs the founder with its data directory on a 4 MiB
// tmpfs and writes until the file system is full. Every write that fails
// must fail in the error envelope as 500 INTERNAL or 503, quickly; reads
// keep working; the founder stops cleanly; afterwards the store opens
// (`stratum audit verify` passes) with every acknowledged write in it, and
// once space is back the founder writes again.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	t.Parallel()
	work := writableTempDir(t)
	mnt := filepath.Join(work, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs does not work here: %v %s", err, out)
	}
	var f *proc
	t.Cleanup(func() {
		if f != nil && f.Alive() {
			f.Kill()
		}
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s; retrying lazily", mnt, err, out)
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	rk := stratumtest.NewReleaseKey(t, filepath.Join(work, "keys"))
	tree := makeReleaseTree(t, filepath.Join(work, "tree"), "0.2.0", "0.1.0", rk.Key, 16<<20)
	dir := filepath.Join(mnt, "data")
	mustStratum(t, "init", "--data", dir, "--config", writeConfig(t, work))
	rk.Trust(t, dir)
	api, join := freeAddrs(t)
	var err error
	if f, err = startServe(dir, api, join); err != nil {
		t.Fatal(err)
	}
	admin := httpClient(f.Pool, nil, true)
	admin.Timeout = 30 * time.Second // a write that hangs on a full disk fails the test
	ctx := context.Background()
	session := f.Operator(t).Token

	// failed checks an answer to a write the full disk refused.
	failures := map[string]int{}
	failed := func(what string, st int, raw []byte, hdr http.Header, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s on a full disk: no answer (%v): a hang or a crash", what, err)
			return
		}
		var e envelope
		jerr := json.Unmarshal(raw, &e)
		if jerr != nil || e.Code == "" || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Errorf("%s on a full disk: %d %q is not the error envelope", what, st, raw)
			return
		}
		if !(st == 500 && e.Code == "INTERNAL") && st != 503 {
			t.Errorf("%s on a full disk answered %d %s (%s); want 500 INTERNAL or 503", what, st, e.Code, e.Message)
		}
		failures[fmt.Sprintf("%s=%d %s", what, st, e.Code)]++
	}

	// A release import that cannot fit: the destination's failure, not
	// the release's, and nothing left behind.
	freeBefore := freeBytes(t, mnt)
	st, raw, hdr, err := call(ctx, admin, "POST", "https://"+api+"/v1/admin/releases", session, map[string]any{"path": tree.dir}, nil)
	if st/100 == 2 {
		t.Fatalf("a 16 MiB import into a 4 MiB file system succeeded: %s", raw)
	}
	failed("release import", st, raw, hdr, err)
	if free := freeBytes(t, mnt); free < freeBefore-(64<<10) {
		t.Errorf("a failed import left %d bytes behind on the full disk", freeBefore-free)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "releases")); len(entries) > 0 {
		t.Errorf("a failed import left %v in DIR/releases", names(entries))
	}

	// Fill the disk: registrations with 60 KiB of facts, a join token
	// per 1000, API tokens.
	var tok struct {
		TokenID string `json:"tokenId"`
		Token   string `json:"token"`
	}
	mustCall(t, ctx, admin, "POST", "https://"+api+"/v1/admin/join/tokens", session, map[string]any{"role": "worker", "uses": 1000}, 201, &tok)
	facts := map[string]any{"blob": strings.Repeat("x", 60<<10)}
	var ackedRegs, ackedAPITokens, ackedJoinTokens []string
	var oneJoiner *http.Client
	var oneJoinID string
	var set0 releaseSetView
	mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/admin/upgrades/release", session, nil, 200, &set0)
	founderNode := set0.Node
	recSeq, ackedRecord := 0, 0
	full := false
	start := time.Now()
	for i := 0; i < 2000 && time.Since(start) < 3*time.Minute; i++ {
		key, err := stratumtest.MakeJoinerKey()
		if err != nil {
			t.Fatal(err)
		}
		joiner := httpClient(f.Pool, []tls.Certificate{key.Cert}, false)
		joiner.Timeout = 30 * time.Second
		st, raw, hdr, err := call(ctx, joiner, "POST", "https://"+join+"/v1/join/registrations", "", map[string]any{
			"token": tok.Token, "release": "0.2.0", "hostname": fmt.Sprintf("full-%d", i), "mgmtIp": fmt.Sprintf("10.9.%d.%d", i/256, i%256), "facts": facts}, nil)
		if st == 201 {
			var v joinerView
			_ = json.Unmarshal(raw, &v)
			ackedRegs = append(ackedRegs, v.JoinID)
			if oneJoiner == nil {
				oneJoiner, oneJoinID = joiner, v.JoinID
			}
		} else {
			failed("registration", st, raw, hdr, err)
			full = true
		}
		if i%3 == 0 && !full {
			recSeq++
			pk := make([]map[string]string, 0, 2000)
			for j := 0; j < 2000; j++ {
				pk = append(pk, map[string]string{"component": fmt.Sprintf("c%d", j), "name": fmt.Sprintf("pkg-%d-%d-%s", recSeq, j, strings.Repeat("n", 80)), "version": "1.0.0"})
			}
			body := map[string]any{"runningRelease": "0.2.0", "release": map[string]any{"imageMode": false, "packages": pk,
				"os": map[string]any{"prettyName": "Crash Linux", "id": "crash", "versionId": "1", "buildId": fmt.Sprintf("crash-%d", recSeq), "kernel": "6.1.0"}}}
			st, raw, hdr, err := call(ctx, admin, "PUT", "https://"+api+"/v1/cluster/nodes/"+founderNode+"/release", session, body, nil)
			if st == 204 {
				ackedRecord = recSeq
			} else {
				failed("release record", st, raw, hdr, err)
				full = true
			}
		}
		if i%5 == 0 || full {
			st, raw, hdr, err := call(ctx, admin, "POST", "https://"+api+"/v1/iam/tokens", session, map[string]any{"name": "full", "ttl": "1h", "policy": json.RawMessage(describeOnly)}, nil)
			if st == 201 {
				var out struct {
					TokenID string `json:"tokenId"`
				}
				_ = json.Unmarshal(raw, &out)
				ackedAPITokens = append(ackedAPITokens, out.TokenID)
			} else {
				failed("API token", st, raw, hdr, err)
				full = true
			}
		}
		if full {
			break
		}
	}
	if !full {
		t.Fatalf("the disk never filled: %d registrations acknowledged", len(ackedRegs))
	}
	t.Logf("disk full after %d registrations, %d API tokens and %d release records; %d bytes free", len(ackedRegs), len(ackedAPITokens), ackedRecord, freeBytes(t, mnt))

	// Every kind of write now fails cleanly, more than once.
	for i := 0; i < 3; i++ {
		st, raw, hdr, err := call(ctx, admin, "POST", "https://"+api+"/v1/admin/join/tokens", session, map[string]any{"role": "worker", "uses": 1, "description": strings.Repeat("d", 200)}, nil)
		if st/100 != 2 {
			failed("join token", st, raw, hdr, err)
		} else {
			var out struct {
				TokenID string `json:"tokenId"`
			}
			_ = json.Unmarshal(raw, &out)
			ackedJoinTokens = append(ackedJoinTokens, out.TokenID)
		}
		if len(ackedRegs) > i {
			st, raw, hdr, err = call(ctx, admin, "POST", "https://"+api+"/v1/admin/join/registrations/"+ackedRegs[i]+"/reject", session, map[string]any{"reason": strings.Repeat("r", 200)}, nil)
			if st/100 != 2 {
				failed("reject", st, raw, hdr, err)
			} else {
				t.Logf("a rejection fit on the full disk")
			}
		}
		recSeq++
		body := map[string]any{"runningRelease": "0.2.0", "release": map[string]any{"imageMode": false,
			"os": map[string]any{"prettyName": strings.Repeat("p", 100<<10), "id": "x", "versionId": "1", "buildId": fmt.Sprintf("crash-%d", recSeq), "kernel": "6"}}}
		st, raw, hdr, err = call(ctx, admin, "PUT", "https://"+api+"/v1/cluster/nodes/"+founderNode+"/release", session, body, nil)
		if st/100 != 2 {
			failed("release record", st, raw, hdr, err)
		} else {
			ackedRecord = recSeq
		}
	}
	t.Logf("refused writes: %v; acknowledged on the full disk: %d join tokens", failures, len(ackedJoinTokens))

	// Reads keep working on the full disk.
	var regs struct {
		Registrations []operatorView `json:"registrations"`
	}
	mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/admin/join/registrations", session, nil, 200, &regs)
	mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/admin/join/tokens", session, nil, 200, nil)
	mustCall(t, ctx, admin, "GET", "https://"+api+"/healthz", "", nil, 200, nil)
	if oneJoiner != nil {
		mustCall(t, ctx, oneJoiner, "GET", "https://"+join+"/v1/join/registrations/"+oneJoinID, "", nil, 200, nil)
	}
	if len(regs.Registrations) < len(ackedRegs) {
		t.Errorf("%d registrations listed, %d acknowledged", len(regs.Registrations), len(ackedRegs))
	}

	// Stop it; the store opens again with every acknowledged write.
	code, took, err := f.Signal(syscall.SIGTERM, 30*time.Second)
	if err != nil || code != 0 {
		t.Errorf("SIGTERM on a full disk: exit %d after %v: %v\n%s", code, took, err, f.Output())
	}
	if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 || !strings.Contains(r.stdout, "intact") {
		t.Errorf("audit verify after the disk filled: %d %q %q", r.code, r.stdout, r.stderr)
	}
	checkStored(t, filepath.Join(dir, "stratum.db"), ackedRegs, tok.TokenID)
	if recs, err := storedRecords(filepath.Join(dir, "stratum.db")); err != nil {
		t.Error(err)
	} else if got := recs[founderNode].buildID; got != fmt.Sprintf("crash-%d", ackedRecord) && strings.HasPrefix(got, "crash-") {
		t.Errorf("the founder's stored release record is %s; crash-%d was the last acknowledged (later ones were refused)", got, ackedRecord)
	}

	// The founder starts again on the full disk and serves what it holds.
	if f, err = startServe(dir, api, join); err != nil {
		t.Errorf("the founder does not start on the full disk: %v", err)
	} else {
		mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/admin/join/registrations", session, nil, 200, &regs)
		listed := map[string]bool{}
		for _, v := range regs.Registrations {
			listed[v.JoinID] = true
		}
		for _, id := range ackedRegs {
			if !listed[id] {
				t.Errorf("acknowledged registration %s is not listed after the restart", id)
			}
		}
		var joinTokens struct {
			Tokens []tokenView `json:"tokens"`
		}
		mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/admin/join/tokens", session, nil, 200, &joinTokens)
		haveJoin := map[string]bool{}
		for _, tk := range joinTokens.Tokens {
			haveJoin[tk.TokenID] = true
		}
		for _, id := range ackedJoinTokens {
			if !haveJoin[id] {
				t.Errorf("acknowledged join token %s is not listed after the restart", id)
			}
		}
		var apiTokens struct {
			Tokens []struct {
				TokenID string `json:"tokenId"`
			} `json:"tokens"`
		}
		mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/iam/tokens", session, nil, 200, &apiTokens)
		have := map[string]bool{}
		for _, tk := range apiTokens.Tokens {
			have[tk.TokenID] = true
		}
		for _, id := range ackedAPITokens {
			if !have[id] {
				t.Errorf("acknowledged API token %s is not listed after the restart", id)
			}
		}
		// Space comes back: writes work again without a restart.
		if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
			t.Logf("remount bigger: %v %s", err, out)
		} else {
			mustCall(t, ctx, admin, "POST", "https://"+api+"/v1/admin/join/tokens", session, map[string]any{"role": "worker"}, 201, nil)
		}
		if code, _, err := f.Signal(syscall.SIGTERM, 30*time.Second); err != nil || code != 0 {
			t.Errorf("SIGTERM after the disk filled: exit %d: %v\n%s", code, err, f.Output())
		}
		if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 {
			t.Errorf("audit verify at the end: %d %q %q", r.code, r.stdout, r.stderr)
		}
	}
	if t.Failed() && f != nil {
		t.Logf("founder log:\n%s", f.Output())
	}
}

func freeBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// checkStored reads the file directly: each acknowledged registration is
// there, and the token's uses match them.
func checkStored(t *testing.T, path string, regs []string, tokenID string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Errorf("the store does not open after the disk filled: %v", err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("join-registrations")) // join.bucketRegistrations
		if b == nil {
			return fmt.Errorf("no registrations bucket")
		}
		stored := 0
		for _, id := range regs {
			if b.Get([]byte(id)) == nil {
				t.Errorf("acknowledged registration %s is not in the store", id)
			}
		}
		_ = b.ForEach(func(_, _ []byte) error { stored++; return nil })
		var tok struct {
			Uses     int `json:"uses"`
			UsesLeft int `json:"usesLeft"`
		}
		raw, _ := store.RecordPayload(tx.Bucket([]byte("join-tokens")).Get([]byte(tokenID)))
		if err := json.Unmarshal(raw, &tok); err != nil {
			return err
		}
		if tok.Uses-tok.UsesLeft != stored {
			t.Errorf("the token was used %d times, %d registrations are stored", tok.Uses-tok.UsesLeft, stored)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
