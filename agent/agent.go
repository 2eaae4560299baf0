package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"stratum/apiclient"

	"stratum/bootclock"
	"stratum/buildinfo"
	"stratum/hostrecord"
)

// Defaults of SPEC 11.
const (
	DefaultInterval = 60 * time.Second
	DefaultPort     = 9444
	DefaultRoot     = "/"

	// recordWriteBuffer holds a whole release record's request.
	recordWriteBuffer = 64 << 10
)

// Config is one `stratum agent`.
type Config struct {
	// API is the founder's admin API, https://HOST:PORT.
	API      string
	Root     string
	Interval time.Duration
	// Listen is the /startupz address; empty means the node's mgmtIp on
	// DefaultPort.
	Listen     string
	Packages   []hostrecord.PackageSpec
	PinsFile   string
	PayloadDir string
	Build      buildinfo.Info
	Log        *slog.Logger
	// Ready, when set, is called with the bound /startupz address.
	Ready func(addr string)
	// LeafRenewBefore: the node's transport leaf is renewed once less than
	// this remains of it (0: DefaultLeafRenewBefore).
	LeafRenewBefore time.Duration

	// checkEvery overrides how often the host is read for changes (tests).
	checkEvery time.Duration
}

// Agent is a running agent.
type Agent struct {
	cfg        Config
	log        *slog.Logger
	id         *identity
	api        *apiclient.Client
	transport  *rotatingTransport
	host       hostrecord.Host
	clock      *bootclock.Clock
	ready      *readiness
	badRelease sync.Once
}

// Run runs the agent until ctx ends. Only a node that cannot say who it
// is (no leaf, no node.yaml) or a /startupz address that cannot be bound
// stops it; founder errors are retried for ever.
func Run(ctx context.Context, cfg Config) error {
	clock := bootclock.New()
	clock.Phase("identity")
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Root == "" {
		cfg.Root = DefaultRoot
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.LeafRenewBefore <= 0 {
		cfg.LeafRenewBefore = DefaultLeafRenewBefore
	}
	bases, err := apiBases(cfg.API)
	if err != nil {
		return err
	}
	id, err := loadIdentity(cfg.Root)
	if err != nil {
		return err
	}
	listen := cfg.Listen
	if listen == "" {
		if net.ParseIP(id.mgmtIP) == nil {
			return fmt.Errorf("node.yaml has no mgmt address to serve /startupz on: give --listen")
		}
		listen = net.JoinHostPort(id.mgmtIP, strconv.Itoa(DefaultPort))
	}
	exe, _ := os.Executable()
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	transport := newRotatingTransport(func() *http.Transport {
		return &http.Transport{
			Proxy:               nil, // the founder is on the management network
			TLSClientConfig:     id.clientTLS(),
			TLSHandshakeTimeout: 15 * time.Second,
			DialContext:         (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
			// A release record (11 KB) goes out in one write and one TLS
			// record instead of three of the default 4 KiB: fewer
			// records for the founder to open and fewer reads
			// (releaseset-record-rate, 343 to 299-313 us of CPU a
			// record, founder and clients).
			WriteBufferSize: recordWriteBuffer,
		}
	})
	a := &Agent{
		cfg: cfg, log: cfg.Log, id: id, clock: clock, transport: transport,
		api: apiclient.New(bases, &http.Client{Transport: transport}, apiclient.Options{}),
		host: hostrecord.Host{Root: cfg.Root, OSFallback: "/", Packages: cfg.Packages, PinsFile: cfg.PinsFile, PayloadDir: cfg.PayloadDir,
			Build: cfg.Build, Executable: exe},
		ready: &readiness{clock: clock},
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("/startupz listener: %w", err)
	}
	srv := &http.Server{
		Handler:           startupzHandler(clock),
		TLSConfig:         id.serverTLS(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		// Probes that fail their handshake are the prober's business.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	clock.Phase("record")
	a.log.Info("agent started", "node", id.nodeID, "cluster", id.clusterID, "api", strings.Join(bases, ","), "startupz", ln.Addr().String(), "root", cfg.Root)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); a.recordLoop(ctx) }()
	go func() { defer wg.Done(); a.membersLoop(ctx) }()
	go func() { defer wg.Done(); a.leafLoop(ctx) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("/startupz: %w", err)
	}
	return nil
}

// apiBases checks --api: one founder's URL, or the replicas' separated by
// commas.
func apiBases(raw string) ([]string, error) {
	var bases []string
	for _, one := range strings.Split(raw, ",") {
		b, err := apiBase(strings.TrimSpace(one))
		if err != nil {
			return nil, err
		}
		bases = append(bases, b)
	}
	return bases, nil
}

// apiBase checks one --api URL: https with a host and nothing after it.
func apiBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("--api %q: want https://HOST:PORT of the founder's admin API", raw)
	}
	return "https://" + u.Host, nil
}
