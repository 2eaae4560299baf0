package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"stratum/store"
)

//go:embed openapi.json
var openAPIDoc []byte

func (a *API) mountOps() {
	m := a.admin
	m.handle(Route{Method: "GET", Path: "/healthz", Summary: "Liveness: the process serves and its store answers.", Auth: "none"}, a.healthz)
	m.handle(Route{Method: "GET", Path: "/startupz", Summary: "Boot progress: state, phase, phase duration, last boot duration.", Auth: "none"}, a.startupz)
	m.handle(Route{Method: "GET", Path: "/version", Summary: "Build version and commit, store schema; the running and admission releases to an authenticated caller.", Auth: "none"}, a.version)
	m.handle(Route{Method: "GET", Path: "/openapi.json", Summary: "This document.", Auth: "none"}, a.openapi)
	metricsHandler := promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{})
	m.handle(Route{Method: "GET", Path: "/metrics", Summary: "Prometheus metrics.", Auth: "none"}, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		metricsHandler.ServeHTTP(w, r)
		return nil
	})
	a.join.handle(Route{Method: "GET", Path: "/healthz", Summary: "Liveness of the join listener.", Auth: "none"}, a.healthz)
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := a.DB.View(func(*store.Tx) error { return nil }); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (a *API) startupz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	writeJSON(w, http.StatusOK, startupView(a.Startup))
	return nil
}

// version tells anyone the build; the releases only to an authenticated
// caller (SPEC 10.2): which release joiners are admitted on is what an
// intruder would need to forge a matching joiner.
func (a *API) version(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	out := map[string]any{"version": a.Build.Version, "commit": a.Build.Commit, "schemaLevel": a.DB.Schema()}
	if a.authenticated(r) {
		if a.ClusterRelease != nil {
			out["runningRelease"] = a.ClusterRelease()
		}
		if a.AdmissionRelease != nil {
			out["admissionRelease"] = a.AdmissionRelease()
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) openapi(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}
