package joinflow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stratum/internal/stratumtest"
	"stratum/internal/stratumtest/fakefounder"
)

// impostor is the one fake founder (the harness's) as a compromised
// founder: a real founder certificate of its own cluster (so the pin and
// the founder SAN check pass), every registration answered needs-upgrade
// with offer, and the release files of tree served, when given.
func impostor(t *testing.T, offer map[string]string, tree string) *fakefounder.Founder {
	t.Helper()
	ff := fakefounder.New(t, fakefounder.Options{ClusterID: "cl-impostr1"})
	ff.Mu.Lock()
	defer ff.Mu.Unlock()
	ff.Token = impostorToken
	ff.Offer = map[string]any{"from": offer["from"], "to": offer["to"], "source": ""}
	ff.ReleaseDir = tree
	return ff
}

const impostorToken = "sjt1.aaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// joinAgainst runs a real `stratum join` on release rel with a hook that
// leaves a mark, and returns its exit code, output and whether the hook ran.
func joinAgainst(t *testing.T, ff *fakefounder.Founder, rel, keys string) (int, string, bool) {
	t.Helper()
	work := t.TempDir()
	mark := filepath.Join(work, "hook-ran")
	hook := filepath.Join(work, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, "join", "--founder", ff.Addr(), "--token", impostorToken, "--ca-pin", ff.CA.Pin(),
		"--release", rel, "--self-upgrade", "--upgrade-hook", hook, "--release-keys", keys,
		"--state-dir", filepath.Join(work, "state"), "--root", filepath.Join(work, "root"), "--hostname", "victim", "--mgmt-ip", "192.0.2.71")
	_, statErr := os.Stat(mark)
	return code, out, statErr == nil
}

// TestTrust04_JoinerRefusesDowngrade: a founder (here an impostor with a
// valid founder certificate, as a compromised founder would be) offers
// an upgrade to an older release, to the same release, or to a newer one
// whose signed manifest does not upgrade from the joiner's: the real
// joiner refuses each, exits 4, and runs no hook.
func TestTrust04_JoinerRefusesDowngrade(t *testing.T) {
	work := t.TempDir()
	rk := stratumtest.NewReleaseKey(t, filepath.Join(work, "keys"))
	pub := rk.CopyPub(t, filepath.Join(work, "pub"))

	for _, offer := range []map[string]string{{"from": "0.3.0", "to": "0.2.0"}, {"from": "0.3.0", "to": "0.3.0"}} {
		ff := impostor(t, offer, "")
		code, out, hookRan := joinAgainst(t, ff, "0.3.0", pub)
		if code != 4 || hookRan || !strings.Contains(out, "refusing the upgrade to "+offer["to"]) {
			t.Errorf("offer %s -> %s: exit %d, hook ran %v:\n%s", offer["from"], offer["to"], code, hookRan, out)
		}
		if got := ff.Requested(""); len(got) != 0 {
			t.Errorf("offer %s -> %s: the joiner fetched %v", offer["from"], offer["to"], got)
		}
	}

	// Newer, signed by a trusted key, but only an upgrade from 0.1.0.
	tree := filepath.Join(work, "tree")
	os.MkdirAll(filepath.Join(tree, "sysext"), 0o755)
	os.WriteFile(filepath.Join(tree, "sysext", "x.raw"), []byte("sysext image"), 0o644)
	mustRun(t, "release", "sign", "--key", rk.Key, "--release", "0.4.0", "--upgrades-from", "0.1.0", tree)
	ff := impostor(t, map[string]string{"from": "0.3.0", "to": "0.4.0"}, tree)
	code, out, hookRan := joinAgainst(t, ff, "0.3.0", pub)
	if code != 4 || hookRan || !strings.Contains(out, "upgrades only from 0.1.0") {
		t.Fatalf("a manifest that does not upgrade from 0.3.0: exit %d, hook ran %v:\n%s", code, hookRan, out)
	}
	if got := ff.Requested("sysext/"); len(got) != 0 {
		t.Fatalf("the joiner fetched files of a refused release: %v", got)
	}
}
