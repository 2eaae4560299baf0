package founder

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stratum/attest"
	"stratum/bootprobe"
	"stratum/buildinfo"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/hostrecord"
	"stratum/httpapi"
	"stratum/iam"
	"stratum/internal/gatherconn"
	"stratum/join"
	"stratum/openbao"
	"stratum/release/repo"
	"stratum/releaseset"
	"stratum/store"
	"stratum/ui"
	"stratum/wire"
)

// Options configure `stratum serve`.
type Options struct {
	Data DataDir
	// Keys says where the data key is: a file, or sealed to a TPM.
	Keys KeySource
	// Store is a postgres:// DSN when the state lives in a database shared
	// by several replicas; empty for the bbolt file in Data.
	Store              string
	Dev                bool
	ConfigFile         string
	APIAddr            string
	JoinAddr           string
	JoinAdvertise      string
	ReleaseConcurrency int
	// ReleaseCacheBytes bounds the cache of verified release chunks
	// (0: repo.DefaultCacheBytes(); < 0: no cache).
	ReleaseCacheBytes int64
	// ReleaseUploadBytes bounds one release upload's tar stream (0: the
	// repository's default).
	ReleaseUploadBytes int64
	ReleaseSource      string
	DeliveryTimeout    time.Duration
	// EKPool is the TPM manufacturer CA pool (--ek-ca) joiners' EK
	// certificates are checked against; nil: none.
	EKPool *attest.Pool
	// ProbeStartupz turns the boot-health prober on (SPEC 11): every
	// ProbeInterval each member's agent is asked at mgmtIp:AgentPort.
	ProbeStartupz bool
	ProbeInterval time.Duration
	AgentPort     int
	Build         buildinfo.Info
	// AllowPublicConnect starts on a PostgreSQL database every role of the
	// server may connect to, with a warning (SPEC 16.7).
	AllowPublicConnect bool
	Log                *slog.Logger
	// Out receives the start banner (listeners, CA pin, credentials).
	Out io.Writer
	// JSONBanner writes the banner as JSON lines, as --log-format json
	// writes the logs, so a log shipper reads one format from start on.
	JSONBanner bool
	// Ready, when set, is called with the bound addresses once serving.
	Ready func(apiAddr, joinAddr string)
	// AcceptAuditRollback lets a store whose audit chain ends below the
	// high-water mark start (once, audited): an older backup restored on
	// purpose (SPEC 16.3).
	AcceptAuditRollback bool
	// OpenBao overrides the cluster file's openbao: block, field by field
	// (serve --openbao-addr, --openbao-ca-file, --openbao-token-file).
	OpenBao openbao.Settings
	// Packages are the founder host's packages its own release record
	// reports, as an agent's --packages does (SPEC 19).
	Packages []hostrecord.PackageSpec
	// ReleaseReads are the fairness limits of release reads (zero: SPEC
	// 10.8's); tests shorten them.
	ReleaseReads repo.ReadLimits
}

// Founder is a running founder.
type Founder struct {
	opts    Options
	db      *store.DB
	dataKey *crypto.DataKey // for backups that carry it
	ca      *crypto.CA
	id      cluster.Identity
	api     *httpapi.API
	startup *httpapi.Startup
	log     *slog.Logger
	closers []func()

	prober   *bootprobe.Prober
	releases *releaseset.Service
	iam      *iam.Service
	// recordProblems says once per change which fields of the founder's
	// own record its host does not let it read.
	recordProblems hostrecord.ProblemLog
	joins          *join.Service
	// members keeps the member records decoded, shared by the join
	// service and the node leaf checks.
	members   *cluster.Decoded
	repo      *repo.Service
	auditMark *auditKeeper
	// openBao is the cluster's OpenBao; nil when none is configured.
	openBao     *openbao.Service
	openBaoAddr string
	openBaoLine string // what the banner says of it
	// isolation is set while a restored founder is not taken over
	// (isolation.go); nil when it serves the cluster.
	isolation atomic.Pointer[wire.Isolation]
	// ctx is run's: the founder's life.
	ctx context.Context
}

// Serve runs the founder until ctx ends, then shuts down gracefully.
func Serve(ctx context.Context, o Options) error {
	startup := httpapi.NewStartup()
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	startup.Phase("init")
	held, err := o.Data.HoldsCluster(o.Store)
	if err != nil {
		return err
	}
	if !held {
		if !o.Dev && o.Store != "" {
			return fmt.Errorf("the database holds no cluster: run `stratum init --data %s --store DSN --config cluster.yaml` on one replica first", o.Data)
		}
		if !o.Dev {
			return fmt.Errorf("%s holds no cluster: run `stratum init --data %s --config cluster.yaml` first, or `stratum serve --dev` for a lab founder", o.Data, o.Data)
		}
		// A dev founder that could not serve must not leave a cluster
		// behind (the next `serve --dev` would then find one whose admin
		// credentials nobody saw): the addresses are tried first.
		if err := canListen([][2]string{{"admin API listener", o.APIAddr}, {"join listener", o.JoinAddr}}); err != nil {
			return fmt.Errorf("%w; nothing was initialized in %s", err, o.Data)
		}
		cfg := cluster.DevDefaults()
		if o.ConfigFile != "" {
			c, err := cluster.LoadConfig(o.ConfigFile)
			if err != nil {
				return err
			}
			cfg = c
		}
		res, err := InitWithKey(o.Data, cfg, true, o.Keys, o.Store, time.Now())
		if err != nil {
			return err
		}
		if o.JSONBanner {
			slog.New(slog.NewJSONHandler(o.Out, nil)).Info("initialized a new dev cluster", "data", string(o.Data))
		} else {
			fmt.Fprintf(o.Out, "initialized a new dev cluster in %s\n", o.Data)
		}
		PrintRecoveryKey(o.Out, res.RecoveryKey)
	}
	startup.Phase("store")
	key, err := o.Data.LoadDataKey(o.Keys)
	if err != nil {
		if o.Store != "" {
			return fmt.Errorf("%w (every replica of a shared store needs a copy of the first replica's data key)", err)
		}
		return err
	}
	db, err := store.Open(o.Data.StoreTarget(o.Store), key, o.Data.schemaFloor(key, o.AcceptAuditRollback)...)
	if err != nil {
		return err
	}
	f := &Founder{opts: o, db: db, dataKey: key, startup: startup, log: o.Log}
	defer f.close()
	if o.Log != nil {
		db.SetLogger(o.Log)
	}
	if err := f.checkPublicConnect(); err != nil {
		return err
	}
	if err := db.View(func(tx *store.Tx) error {
		var err error
		if f.id, err = cluster.LoadIdentity(tx); err != nil {
			if errors.Is(err, cluster.ErrNotInitialized) && cluster.Initialized(tx) {
				// The identity is there but fails its MAC: the key is not
				// this store's (or every record was forged, which the
				// same key check answers).
				return o.Data.wrongKeyError(o.Store)
			}
			return err
		}
		f.ca, err = cluster.LoadCA(tx)
		return err
	}); err != nil {
		return err
	}
	if err := f.guardAuditRollback(o.AcceptAuditRollback); err != nil {
		return err
	}
	f.startIsolated()
	if err := f.prepareReplica(); err != nil {
		return err
	}
	startup.Phase("listeners")
	return f.run(ctx)
}

// canListen checks that each address (name, address) can be listened
// on now, and frees it again.
func canListen(addrs [][2]string) error {
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a[1])
		if err != nil {
			return fmt.Errorf("%s: %w", a[0], err)
		}
		ln.Close()
	}
	return nil
}

func (f *Founder) close() {
	for i := len(f.closers) - 1; i >= 0; i-- {
		f.closers[i]()
	}
	f.db.Close()
}

func (f *Founder) run(ctx context.Context) error {
	o := f.opts
	f.ctx = ctx
	var mgmt string
	_ = f.db.View(func(tx *store.Tx) error {
		m, _, _ := cluster.GetMember(tx, f.id.FounderNodeID)
		mgmt = m.MgmtIP
		return nil
	})
	apiIPs := listenerIPs(o.APIAddr)
	cert, err := newRenewingCert("admin API", func(now time.Time) (tls.Certificate, error) {
		return serverCertificate(f.ca, f.id.ClusterID, cluster.Hostname(), mgmt, apiIPs, false, now)
	}, time.Now, f.log)
	if err != nil {
		return err
	}
	joinCert, err := newRenewingCert("join listener", func(now time.Time) (tls.Certificate, error) {
		return serverCertificate(f.ca, f.id.ClusterID, cluster.Hostname(), mgmt, nil, true, now)
	}, time.Now, f.log)
	if err != nil {
		return err
	}
	apiLn, err := listenTLS(o.APIAddr, adminTLS(cert.server, f.ca))
	if err != nil {
		return fmt.Errorf("admin API listener: %w", err)
	}
	joinLn, err := listenTLS(o.JoinAddr, joinTLS(joinCert.server))
	if err != nil {
		apiLn.Close()
		return fmt.Errorf("join listener: %w", err)
	}
	if f.opts.JoinAdvertise == "" {
		f.opts.JoinAdvertise = joinLn.Addr().String()
	}
	if o.ProbeStartupz {
		if f.prober, err = f.newProber(); err != nil {
			apiLn.Close()
			joinLn.Close()
			return err
		}
	}
	if err := f.openBaoSetup(ctx); err != nil {
		apiLn.Close()
		joinLn.Close()
		return err
	}
	if err := f.services(ctx); err != nil {
		apiLn.Close()
		joinLn.Close()
		return err
	}
	reg := prometheus.NewRegistry()
	f.registerDomainMetrics(reg)
	f.api = httpapi.New(httpapi.Deps{
		Log: f.log, Build: o.Build, Startup: f.startup, Registry: reg,
		ClusterRelease: f.runningRelease, AdmissionRelease: f.admissionRelease, Isolation: f.isolationView,
		Identity: f.iam, NodeLeaves: cluster.NodeLeaves{DB: f.db, Decoded: f.members}, Audit: store.AuditReader{DB: f.db}, Health: storeHealth{f.db},
		JoinAdmin: f.joins, Joiners: f.joins, ReleaseSet: f.releases, ReleaseFiles: f.releaseFiles(), Console: ui.Handler(),
		Releases: f.repo, BootstrapCredentials: f.hasBootstrapCredentials,
	})
	join := NewHTTPServer(corkOnClose(f.api.JoinHandler()), f.log)
	join.ConnContext = withConn
	servers := []*http.Server{NewHTTPServer(f.api.AdminHandler(), f.log), join}
	lns := []net.Listener{apiLn, joinLn}
	errc := make(chan error, 2)
	for i := range servers {
		go func(s *http.Server, ln net.Listener) { errc <- s.Serve(ln) }(servers[i], lns[i])
	}
	stopControl, err := f.serveControl()
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	f.closers = append(f.closers, stopControl)
	f.startBackground(ctx)
	f.startup.Ready()
	f.banner(apiLn.Addr().String(), joinLn.Addr().String())
	if o.Ready != nil {
		o.Ready(apiLn.Addr().String(), joinLn.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			f.log.Error("listener failed", "err", err)
		}
	}
	f.log.Info("shutting down: answering waiters, finishing in-flight requests")
	f.beforeShutdown()
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func(s *http.Server) {
			defer wg.Done()
			if err := s.Shutdown(shutCtx); err != nil {
				s.Close()
			}
		}(s)
	}
	wg.Wait()
	return nil
}

// NewHTTPServer is the http.Server both listeners serve with: its limits
// on slow clients, and its errors to log at debug level. The benchmarks'
// stand-in servers use it too, so that they measure the founder's settings.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// ReadTimeout bounds slow bodies; long-polls and downloads write
		// long after, so no WriteTimeout (handlers set their own).
		ReadTimeout:    30 * time.Second,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		// The release mirror's response writes find the connection that
		// gathers their TLS records (internal/gatherconn).
		ConnContext: gatherconn.ConnContext,
	}
}

func (f *Founder) banner(apiAddr, joinAddr string) {
	// The credentials file is named only when it is there: a restored
	// founder has none (its admins sign in with their own passwords).
	login := f.opts.Data.Credentials()
	if _, err := os.Stat(login); err != nil {
		login = "no credentials file here: sign in with an existing account"
	}
	if f.opts.JSONBanner {
		attrs := []any{"version", f.opts.Build.Version, "cluster", f.id.ClusterID, "parentDomain", f.id.ParentDomain, "region", f.id.Region,
			"adminApi", "https://" + apiAddr, "joinListener", "https://" + joinAddr, "caCertificate", f.opts.Data.CACert(),
			"caPin", f.ca.Pin(), "adminLogin", login, "console", "https://" + apiAddr + "/ui/", "openBao", f.openBaoLine}
		if iso := f.isolationView(); iso != nil {
			attrs = append(attrs, "isolated", iso)
		}
		slog.New(slog.NewJSONHandler(f.opts.Out, nil)).Info("stratum founder serving", attrs...)
		f.logServing(apiAddr, joinAddr)
		return
	}
	fmt.Fprintf(f.opts.Out, "stratum founder %s serving cluster %s (%s, %s)\n", f.opts.Build.Version, f.id.ClusterID, f.id.ParentDomain, f.id.Region)
	if iso := f.isolationView(); iso != nil {
		// First, before the addresses an operator would copy.
		fmt.Fprintf(f.opts.Out, "  ISOLATED:       restored from %s at %s: probes no node, contacts no OpenBao, answers no node or joiner\n", iso.Backup, iso.RestoredAt.Format(time.RFC3339))
		fmt.Fprintf(f.opts.Out, "                  until `stratum takeover --data %s`, once the old founder is gone for good (docs/restore-drill.md)\n", f.opts.Data)
	}
	fmt.Fprintf(f.opts.Out, "  admin API:      https://%s\n", apiAddr)
	fmt.Fprintf(f.opts.Out, "  join listener:  https://%s\n", joinAddr)
	fmt.Fprintf(f.opts.Out, "  CA certificate: %s\n", f.opts.Data.CACert())
	fmt.Fprintf(f.opts.Out, "  CA pin:         %s\n", f.ca.Pin())
	fmt.Fprintf(f.opts.Out, "  admin login:    %s\n", login)
	fmt.Fprintf(f.opts.Out, "  console:        https://%s/ui/\n", apiAddr)
	fmt.Fprintf(f.opts.Out, "  OpenBao:        %s\n", f.openBaoLine)
	f.logServing(apiAddr, joinAddr)
}

// logServing logs the start, and a restored founder's isolation.
func (f *Founder) logServing(apiAddr, joinAddr string) {
	f.log.Info("serving", "api", apiAddr, "join", joinAddr, "caPin", f.ca.Pin(), "cluster", f.id.ClusterID)
	if iso := f.isolationView(); iso != nil {
		f.log.Warn("isolated: "+iso.Message, "backup", iso.Backup, "restoredAt", iso.RestoredAt)
	}
}

// uploadLimits is the repository's default with the operator's byte bound.
func uploadLimits(maxBytes int64) repo.UploadLimits {
	l := repo.DefaultUploadLimits
	if maxBytes > 0 {
		l.MaxBytes = maxBytes
	}
	return l
}
