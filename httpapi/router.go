package httpapi

import (
	"net/http"
	"sort"

	"github.com/julienschmidt/httprouter"

	"stratum/apierr"
	"stratum/iam"
)

// Route is one endpoint of a listener's routes table; the OpenAPI test
// compares the table with the published document.
type Route struct {
	Listener string // "admin" or "join"
	Method   string
	Path     string // httprouter syntax
	Summary  string
	Auth     string // how the caller is established: the auth* constants
	// Action is the IAM action a bearer token needs (empty for none); the
	// resource it acts on has the action's type from iam's catalog and
	// the id Resource gives, the whole collection ("*") when nil.
	Action   string
	Resource func(httprouter.Params) string
	handler  handlerFunc
}

// How a route's caller is established before its handler runs.
const (
	authNone         = "none"
	authBearer       = "bearer"         // a login session or API token
	authNodeOrBearer = "node-or-bearer" // the node's transport leaf, or a bearer token
	authNode         = "node"           // the node's transport leaf only
	authJoinerKey    = "joiner-key"     // the joiner's client key (join listener)
)

// param is a Resource: the path parameter name is the resource's id.
func param(name string) func(httprouter.Params) string {
	return func(ps httprouter.Params) string { return ps.ByName(name) }
}

// fixed is a Resource naming one resource whatever the path.
func fixed(id string) func(httprouter.Params) string {
	return func(httprouter.Params) string { return id }
}

// call is what the router hands a handler: the path parameters and who
// is asking, established from the route before the handler runs.
type call struct {
	params httprouter.Params
	// action is the route's action, for iam.Visible over a listing.
	action string
	// principal is the bearer caller (authBearer, and authNodeOrBearer
	// when no node leaf came).
	principal iam.Principal
	// actor names the caller in the audit log (authNodeOrBearer).
	actor string
	// node is the transport leaf's node id (authNode).
	node string
	// pin is the joiner's client key pin (authJoinerKey).
	pin string
}

// handlerFunc is a handler that returns its error for the envelope.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// mux is one listener's router plus the record of its routes.
type mux struct {
	api      *API
	listener string
	router   *httprouter.Router
	routes   []Route
}

func (a *API) newMux(listener string) *mux {
	m := &mux{api: a, listener: listener, router: httprouter.New()}
	m.router.RedirectTrailingSlash = false
	m.router.RedirectFixedPath = false
	m.router.HandleMethodNotAllowed = true
	m.router.HandleOPTIONS = false
	m.router.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, a.log, apierr.New(apierr.NotFound, "no such endpoint: %s", r.URL.Path))
	})
	m.router.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, a.log, apierr.New(apierr.MethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
	})
	m.router.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		a.log.Error("handler panic", "requestId", w.Header().Get("X-Request-Id"), "path", r.URL.Path, "panic", v)
		writeError(w, r, a.log, apierr.New(apierr.Internal, "internal error; the founder's log has the details under this request id"))
	}
	return m
}

func (m *mux) handle(rt Route) {
	if _, ok := iam.Actions[rt.Action]; rt.Action != "" && !ok {
		panic("httpapi: " + rt.Method + " " + rt.Path + " names " + rt.Action + ", not in iam's action catalog")
	}
	rt.Listener = m.listener
	m.routes = append(m.routes, rt)
	route := rt.Method + " " + rt.Path
	m.router.Handle(rt.Method, rt.Path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		setRoute(r, route)
		c, err := m.api.admit(r, rt, ps)
		if err == nil {
			err = m.api.refuseWhileIsolated(rt, c)
		}
		if err == nil {
			err = rt.handler(w, r, c)
		}
		if err != nil {
			writeError(w, r, m.api.log, err)
		}
	})
}

// admit establishes who is asking as the route says: 401 when the
// caller is not established, then 403 naming the action it lacks.
func (a *API) admit(r *http.Request, rt Route, ps httprouter.Params) (*call, error) {
	c := &call{params: ps, action: rt.Action}
	var err error
	switch rt.Auth {
	case authNone:
	case authBearer:
		if rt.Action == "" {
			c.principal, err = a.principal(r)
			if err == nil && c.principal.MustChangePassword && !rt.passwordChangeAllowed() {
				err = iam.PasswordChangeFirst()
			}
		} else {
			c.principal, err = a.authorize(r, rt.Action, rt.resource(ps))
		}
	case authNodeOrBearer:
		c.actor, err = a.nodeOrBearer(r, ps.ByName("nodeId"), rt.Action, rt.resource(ps))
	case authNode:
		c.node, err = a.requireNode(r, ps.ByName("nodeId"))
	case authJoinerKey:
		c.pin, err = JoinerPin(r)
	default:
		panic("httpapi: " + rt.Method + " " + rt.Path + " has no known auth: " + rt.Auth)
	}
	return c, err
}

// passwordChangeAllowed: the routes a session that must change its
// password may call (SPEC 16.1).
func (rt Route) passwordChangeAllowed() bool {
	return rt.Method == "POST" && (rt.Path == "/v1/auth/password" || rt.Path == "/v1/auth/logout")
}

// resource is the resource rt's action acts on for these parameters.
func (rt Route) resource(ps httprouter.Params) string {
	id := "*"
	if rt.Resource != nil {
		id = rt.Resource(ps)
	}
	return iam.Resource(iam.Actions[rt.Action], id)
}

// Routes lists every registered route of both listeners, sorted.
func (a *API) Routes() []Route {
	out := append(append([]Route(nil), a.admin.routes...), a.join.routes...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		if out[i].Method != out[j].Method {
			return out[i].Method < out[j].Method
		}
		// A route on both listeners (GET /healthz) comes in one order.
		return out[i].Listener < out[j].Listener
	})
	return out
}
