package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"stratum/buildinfo"
	"stratum/wire"
)

// Deps are what the handlers call into.
type Deps struct {
	Log      *slog.Logger
	Build    buildinfo.Info // what /version names
	Startup  *Startup
	Registry *prometheus.Registry
	Now      func() time.Time
	// ClusterRelease answers the release set's running release and
	// AdmissionRelease the release joiners are admitted on (/version).
	ClusterRelease   func() string
	AdmissionRelease func() string
	// Isolation answers a restored founder's isolation until it is taken
	// over, else nil (a nil func: never isolated). While isolated no node
	// or joiner is answered (isolation.go).
	Isolation func() *wire.Isolation
	// The domain services behind the endpoints. Every route is registered
	// whatever is set: a service is reached only when a request comes, so
	// a test may leave out the ones it does not call. ReleaseFiles is nil
	// when the founder serves no releases (a mirror does); Console nil
	// serves no /ui/.
	Identity     Identity
	NodeLeaves   NodeLeaves
	Audit        AuditLog
	Health       Health
	JoinAdmin    JoinAdmin
	Joiners      Joiners
	ReleaseSet   ReleaseSet
	Releases     ReleaseCatalog
	ReleaseFiles ReleaseFiles
	Console      http.Handler
	// BootstrapCredentials says whether the bootstrap admin's generated
	// password is still on the founder's disk (the sign-in hint); nil:
	// it is not.
	BootstrapCredentials func() bool
}

// API holds the two listeners' handlers.
type API struct {
	Deps
	log     *slog.Logger
	metrics *metrics
	// promHandler serves /metrics from the registry.
	promHandler http.Handler
	admin       *mux
	join        *mux
	// membersEncoded keeps the compressed forms of the nodes' members
	// list last answered: made once per list, not once per node.
	membersEncoded encodedLast
}

// New builds both routers.
func New(d Deps) *API {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	if d.Startup == nil {
		d.Startup = NewStartup()
	}
	a := &API{Deps: d, log: d.Log}
	a.metrics = newMetrics(d.Registry)
	a.admin = a.newMux("admin")
	a.join = a.newMux("join")
	a.promHandler = promhttp.HandlerFor(d.Registry, promhttp.HandlerOpts{})
	for _, rt := range a.adminRoutes() {
		a.admin.handle(rt)
	}
	for _, rt := range a.joinRoutes() {
		a.join.handle(rt)
	}
	a.mountUI()
	return a
}

// AdminHandler serves the admin API listener.
func (a *API) AdminHandler() http.Handler { return a.wrap("admin", a.admin.router) }

// JoinHandler serves the join listener.
func (a *API) JoinHandler() http.Handler { return a.wrap("join", a.join.router) }
