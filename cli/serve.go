package cli

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"stratum/attest"
	"stratum/bootprobe"
	"stratum/buildinfo"
	"stratum/founder"
	"stratum/hostrecord"
	"stratum/internal/gcfloor"
	"stratum/openbao"
	"stratum/release/repo"
)

func init() { Register(newServeCmd) }

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the founder (join listener, release mirror, admin API)",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "./data", "data directory")
	dev := fs.Bool("dev", false, "initialize an empty data directory with lab defaults")
	config := fs.String("config", "", "cluster file, used when --dev initializes")
	apiAddr := fs.String("api-addr", "127.0.0.1:8443", "admin API listen address")
	joinAddr := fs.String("join-addr", "127.0.0.1:9443", "join listener address")
	advertise := fs.String("join-advertise", "", "HOST:PORT joiners dial (default: the join listener address)")
	concurrency := fs.Int("release-concurrency", 4, "release files served at once")
	cache := byteSize(repo.DefaultCacheBytes())
	fs.Var(&cache, "release-cache", "memory for verified release chunks, shared by downloads (e.g. 256MiB, 1GiB; 0: none); the default is an eighth of the memory (or the cgroup limit), 256MiB to 2GiB")
	upload := byteSize(repo.DefaultUploadLimits.MaxBytes)
	fs.Var(&upload, "release-upload-limit", "largest release upload (stratum release push) taken, tar stream included (e.g. 16GiB)")
	source := fs.String("release-source", "", "release mirror URL to offer instead of serving releases")
	timeout := fs.Duration("delivery-timeout", 30*time.Minute, "time a delivery may stay unacknowledged")
	probe := fs.Bool("probe-startupz", true, "probe every member's agent /startupz for the boot fields of the members lists and bundle")
	probeInterval := fs.Duration("probe-interval", bootprobe.DefaultInterval, "time between two boot-health probes of a member")
	agentPort := fs.Int("agent-port", bootprobe.DefaultPort, "port of the members' agents (stratum agent --listen)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	keys := addKeyFlags(fs, "TPM holding the sealed data key (/dev/tpmrm0 or a swtpm socket; data.key.tpm alone implies /dev/tpmrm0)")
	dsn := storeFlag(fs)
	allowPublic := fs.Bool("allow-public-connect", false, "serve on a PostgreSQL database every role of the server may connect to (warned at every start)")
	acceptRollback := fs.Bool("accept-audit-rollback", false, "start once although the store's audit chain ends below this founder's high-water mark (an older backup restored on purpose; audited)")
	packages := fs.String("packages", "", "the founder host's packages to record, as an agent does: component=name1|name2,... or bare names")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile (pprof) of this founder to FILE, from start to exit")
	ekCA := fs.StringSlice("ek-ca", nil, "PEM bundle of the TPM manufacturers' CAs a joiner's EK certificate must chain to, for zero-touch enrollment (repeatable; in a lab, swtpm's local CA: /var/lib/swtpm-localca/swtpm-localca-rootca-cert.pem and issuercert.pem)")
	var bao openbao.Settings
	fs.StringVar(&bao.Addr, "openbao-addr", "", "the cluster's OpenBao (https://HOST:8200); overrides the cluster file's openbao.addr")
	fs.StringVar(&bao.CAFile, "openbao-ca-file", "", "PEM CA bundle of the OpenBao server; overrides openbao.caFile")
	fs.StringVar(&bao.TokenFile, "openbao-token-file", "", "file holding the founder's OpenBao token (policy stratum-cp); overrides openbao.tokenFile")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ks, err := keys.source()
		if err != nil {
			return err
		}
		specs, err := hostrecord.ParsePackages(*packages)
		if err != nil {
			return usagef("--packages: %w", err)
		}
		var ekPool *attest.Pool
		if len(*ekCA) > 0 {
			if ekPool, err = attest.LoadPool(*ekCA...); err != nil {
				return usagef("--ek-ca: %w", err)
			}
		}
		// The founder's idle heap is a few MiB: without a floor it would
		// collect every few dozen registrations.
		defer gcfloor.Keep(gcfloor.DefaultFloor)()
		if *cpuProfile != "" {
			stop, err := startCPUProfile(*cpuProfile)
			if err != nil {
				return err
			}
			defer stop()
		}
		return founder.Serve(cmd.Context(), founder.Options{
			Data: founder.DataDir(*data), Keys: ks, Store: *dsn, Dev: *dev, ConfigFile: *config,
			APIAddr: *apiAddr, JoinAddr: *joinAddr, JoinAdvertise: *advertise,
			ReleaseConcurrency: *concurrency, ReleaseCacheBytes: cacheBytes(cache), ReleaseUploadBytes: int64(upload), ReleaseSource: *source, DeliveryTimeout: *timeout,
			OpenBao: bao, Packages: specs, EKPool: ekPool,
			ProbeStartupz: *probe, ProbeInterval: *probeInterval, AgentPort: *agentPort, AllowPublicConnect: *allowPublic,
			AcceptAuditRollback: *acceptRollback, Build: buildinfo.Current(), Log: newLogger(*logLevel, *logFormat), Out: cmd.OutOrStdout(), JSONBanner: *logFormat == "json",
		})
	}
	return cmd
}

// cacheBytes maps the flag's 0 (no cache) to the mirror's "none".
func cacheBytes(b byteSize) int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
}

// durationsAsText writes a duration as people and log readers expect it
// ("1s"), not as JSON's integer nanoseconds.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

func newLogger(level, format string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: l, ReplaceAttr: durationsAsText}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// startCPUProfile samples this process's CPU into path (mode 0600) until
// the returned stop is called: where a founder's CPU goes under real load
// (go tool pprof -top stratum FILE).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
