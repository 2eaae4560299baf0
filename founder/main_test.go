package founder

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"stratum/buildinfo"
	"stratum/internal/stratumtest"
)

// The founder's tests drive it through the one harness: as the real
// binary (a child, built once here), or in this process where a test sets
// hooks of Options or counts the founder's goroutines.
func TestMain(m *testing.M) { os.Exit(stratumtest.Main(m)) }

// serveIn is Serve behind the harness's in-process mode, its Options
// changed by mutate (when not nil) before it starts. Its build is commit
// abcdef12; its log and output are the harness's.
func serveIn(mutate func(*Options)) stratumtest.ServeFunc {
	return func(ctx context.Context, p stratumtest.InProcess) error {
		o := Options{
			Data: DataDir(p.Dir), Dev: p.Dev, APIAddr: p.APIAddr, JoinAddr: p.JoinAddr, Ready: p.Ready,
			Build: buildinfo.Info{Version: "test", Commit: "abcdef12"},
			Log:   slog.New(slog.NewTextHandler(p.Out, nil)), Out: p.Out,
		}
		if mutate != nil {
			mutate(&o)
		}
		return Serve(ctx, o)
	}
}
