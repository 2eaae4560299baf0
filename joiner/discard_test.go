package joiner

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/agent/unit"
	"stratum/crypto"
	"stratum/internal/stratumtest/fakefounder"
	"stratum/internal/syncbuf"
	"stratum/wire"
)

// TestDiscardDeliveryOfAnEndedJoin: the founder ends a join failed after
// its delivery reached the joiner (the answer carrying it was on the way
// when the delivery timeout struck; an operator cancelled the join while
// it installed; the joiner failed after writing it, and said so): the
// joiner removes everything the delivery wrote under
// --root, the node key, the cluster secrets (0600) and the agent's unit
// included, says so, and exits failed. A join that ends joined keeps its
// delivery.
func TestDiscardDeliveryOfAnEndedJoin(t *testing.T) {
	for name, tc := range map[string]struct {
		script func(f *fakefounder.Founder)
		config func(c *Config)
		reason string
		failed bool
	}{
		"delivery timed out while its answer was on the way": {
			script: func(f *fakefounder.Founder) {
				f.OnServe = func(r *fakefounder.Reg, state string) {
					if state == wire.StateDelivering {
						r.State, r.Reason = wire.StateFailed, "the delivery was not completed within the delivery timeout (10s)"
					}
				}
			},
			reason: "delivery timeout", failed: true,
		},
		"cancelled while installing": {
			script: func(f *fakefounder.Founder) {
				next := f.OnEvent
				f.OnEvent = func(r *fakefounder.Reg, ev string) {
					if ev == "progress:installing" {
						r.State, r.Reason = wire.StateFailed, "cancelled by admin@cloud.internal"
						return
					}
					next(r, ev)
				}
			},
			reason: "cancelled by", failed: true,
		},
		"a local failure after the delivery was written, reported": {
			script: func(*fakefounder.Founder) {},
			config: func(c *Config) { c.AgentAPI = "https://agent\nX=1" },
			reason: "cannot go into an environment file", failed: true,
		},
		"joined": {script: func(*fakefounder.Founder) {}},
	} {
		t.Run(name, func(t *testing.T) {
			f := fakefounder.New(t, fakefounder.Options{})
			delivery, secrets := f.Delivery(t, "n-abc12def", "unseal-"+crypto.RandomHex(8))
			f.AcceptOn("registered", delivery)
			tc.script(f)
			var out syncbuf.Buffer
			cfg := testConfig(t, f, &out)
			cfg.InsecureStoreUnsealKey, cfg.InstallAgent = true, true
			// As on a node's real root with systemd running: the agent
			// is started once installed.
			var calls syncbuf.Buffer
			cfg.systemd = &systemd{
				manages: func(root string) bool { return root == cfg.Root },
				run: func(_ context.Context, args ...string) ([]byte, error) {
					_, _ = calls.Write([]byte(strings.Join(args, " ") + "\n"))
					return nil, nil
				},
			}
			if tc.config != nil {
				tc.config(&cfg)
			}
			err := runJoiner(t, cfg)
			left := filesUnder(t, cfg.Root)
			stop := "stop --no-block " + unit.Name + "\ndaemon-reload\n"
			if !tc.failed {
				if err != nil || len(left) == 0 {
					t.Fatalf("a joined join: %v, files %v\n%s", err, left, out.String())
				}
				if strings.Contains(calls.String(), "stop") {
					t.Errorf("the agent of a joined join was stopped; systemctl calls:\n%s", calls.String())
				}
				return
			}
			// The agent started from the unit (if it was) is stopped, and
			// systemd forgets the unit once its files are gone.
			if !strings.HasSuffix(calls.String(), stop) {
				t.Errorf("systemctl calls:\n%s\nwant them to end with:\n%s", calls.String(), stop)
			}
			if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("joiner: %v, want failed naming %q\n%s", err, tc.reason, out.String())
			}
			o := out.String()
			if !strings.Contains(o, "delivery persisted under") {
				t.Fatalf("the delivery was never written, nothing to remove:\n%s", o)
			}
			if len(left) > 0 {
				t.Errorf("the delivery of a failed join is left under --root: %v\n%s", left, o)
			}
			for _, secret := range []string{secrets.NodeKey, secrets.Postgres, secrets.OpenBao, secrets.Unseal} {
				for _, p := range left {
					if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
						t.Errorf("%s holds a secret of the failed join's delivery", p)
					}
				}
			}
			contains(t, o, "ended failed: removed its delivery from "+cfg.Root)
			contains(t, o, "secrets/node.key")
			contains(t, o, "secrets/openbao-unseal.key")
			if st, err := loadState(cfg.StateDir); err != nil || st.Delivered || st.State != wire.StateFailed {
				t.Errorf("state after the removal: %+v %v", st, err)
			}
		})
	}
}

// filesUnder lists the files and links (not directories) under root.
func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDiscardDeliveryOnALaterRun: a joiner stopped after it wrote the
// delivery; the founder then fails the join (its delivery timeout). The
// next run with the same state dir finds the join failed and removes the
// delivery the state dir says it wrote.
func TestDiscardDeliveryOnALaterRun(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	delivery, _ := f.Delivery(t, "n-abc12def", "unseal-"+crypto.RandomHex(8))
	f.AcceptOn("registered", delivery)
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	var joinID string
	f.OnEvent = func(r *fakefounder.Reg, ev string) {
		switch ev {
		case "registered":
			f.ApproveAndDeliver(r, delivery)
		case "progress:installing":
			// The machine stops here; the founder gives up on it.
			joinID = r.ID
			stop()
			r.State, r.Reason = wire.StateFailed, "the delivery was not completed within the delivery timeout (10s)"
		}
	}
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.InsecureStoreUnsealKey = true
	if err := Run(ctx, cfg); err == nil || errors.Is(err, ErrFailed) {
		t.Fatalf("the stopped run: %v, want interrupted\n%s", err, out.String())
	}
	if st, _ := loadState(cfg.StateDir); !st.Delivered || st.JoinID != joinID || len(filesUnder(t, cfg.Root)) == 0 {
		t.Fatalf("the stopped run left state %+v and files %v", st, filesUnder(t, cfg.Root))
	}
	var next syncbuf.Buffer
	cfg.Out = &next
	if err := runJoiner(t, cfg); !errors.Is(err, ErrFailed) {
		t.Fatalf("the next run: %v, want failed\n%s", err, next.String())
	}
	if left := filesUnder(t, cfg.Root); len(left) > 0 {
		t.Errorf("the next run kept the failed join's delivery: %v\n%s", left, next.String())
	}
	contains(t, next.String(), "join "+joinID+" ended failed: removed its delivery")
}
