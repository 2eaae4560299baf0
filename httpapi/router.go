package httpapi

import (
	"net/http"
	"sort"

	"github.com/julienschmidt/httprouter"

	"stratum/apierr"
)

// Route is one endpoint as registered; the OpenAPI test compares the
// routes actually registered with the published document.
type Route struct {
	Listener string // "admin" or "join"
	Method   string
	Path     string // httprouter syntax
	Summary  string
	Action   string // IAM action gate, empty for none
	Auth     string // "none", "bearer", "node-or-bearer", "joiner-key", "node"
}

// handlerFunc is a handler that returns its error for the envelope.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p httprouter.Params) error

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

func (m *mux) handle(rt Route, h handlerFunc) {
	rt.Listener = m.listener
	m.routes = append(m.routes, rt)
	route := rt.Method + " " + rt.Path
	m.router.Handle(rt.Method, rt.Path, func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		setRoute(r, route)
		if err := h(w, r, p); err != nil {
			writeError(w, r, m.api.log, err)
		}
	})
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
