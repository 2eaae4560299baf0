package joinflow

import (
	"os/exec"
	"path/filepath"
	"stratum/internal/syncbuf"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// A join whose install waits on a member that never applies the new
// generation (here: a member with no agent) names that member in the
// joiner's output and in `stratum joins get` and `joins list` (SPEC 17),
// instead of "waiting for every member".
func TestStallNamesTheMember(t *testing.T) {
	work := t.TempDir()
	f := stratumtest.Serve(t, filepath.Join(work, "founder"), "--dev", "--probe-startupz=false")
	holder := stratumtest.NodeID(t, joinNode(t, f, work, "node-a", "127.0.0.2"))

	var tok struct{ Token string }
	f.Operator(t).Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": "worker"}, 201, &tok)
	cmd := exec.Command(stratumtest.Binary(t), "join", "--founder", f.Join, "--token", tok.Token, "--ca-pin", f.Pin, "--release", "0.1.0",
		"--state-dir", filepath.Join(work, "b-state"), "--root", filepath.Join(work, "node-b"), "--hostname", "node-b", "--mgmt-ip", "127.0.0.3",
		"--tpm", filepath.Join(work, "no-tpm"), "--insecure-store-unseal-key")
	cmd.Env = stratumtest.Env()
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	var joinID string
	waitFor(t, 20*time.Second, "node-b pending\n"+out.String(), func() bool {
		var list struct {
			Registrations []struct{ JoinID, Hostname string }
		}
		f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations?state=pending", nil, 200, &list)
		for _, r := range list.Registrations {
			if r.Hostname == "node-b" {
				joinID = r.JoinID
			}
		}
		return joinID != ""
	})
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+joinID+"/approve", map[string]any{}, 200, nil)

	want := "waiting for " + holder + " to apply generation 3 (it has 2)"
	waitFor(t, 20*time.Second, "the joiner names "+holder+"\n"+out.String(), func() bool {
		return strings.Contains(out.String(), want)
	})
	env := []string{"STRATUM_API=https://" + f.API, "STRATUM_CA_FILE=" + filepath.Join(f.Dir, "ca.pem"), "STRATUM_TOKEN=" + f.Operator(t).Token}
	get := stratumtest.Run(t, env, "joins", "get", joinID)
	if get.Code != 0 || !strings.Contains(get.Stdout, holder+" (has 2) to apply generation 3") {
		t.Errorf("stratum joins get %s (exit %d) does not name %s:\n%s%s", joinID, get.Code, holder, get.Stdout, get.Stderr)
	}
	list := stratumtest.Run(t, env, "joins", "list")
	if list.Code != 0 || !strings.Contains(list.Stdout, "installing (waiting for "+holder+" (has 2))") || !strings.Contains(list.Stdout, "127.0.0.3") {
		t.Errorf("stratum joins list (exit %d) does not name %s or the assigned address:\n%s%s", list.Code, holder, list.Stdout, list.Stderr)
	}
}
