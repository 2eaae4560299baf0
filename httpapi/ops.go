package httpapi

import (
	_ "embed"
	"fmt"
	"net/http"

	"stratum/apierr"
	"stratum/store"
)

//go:embed openapi.json
var openAPIDoc []byte

func (a *API) serveMetrics(w http.ResponseWriter, r *http.Request, _ *call) error {
	a.promHandler.ServeHTTP(w, r)
	return nil
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request, _ *call) error {
	if err := a.Health.Ping(); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz is healthz plus what degrades the service without stopping it
// (a founder isolated after a restore is not ready: 503 "isolated"):
// a database session that is not a founder holding the cluster's writer
// lock (writes wait) or lease (background work stops), with its pid so
// the operator can end it. Degraded still answers 200: every replica
// shares the condition, so a balancer taking them out fixes nothing.
func (a *API) readyz(w http.ResponseWriter, r *http.Request, _ *call) error {
	if err := a.Health.Ping(); err != nil {
		return err
	}
	if iso := a.isolation(); iso != nil {
		// A balancer must send no node here.
		e := apierr.New(apierr.Unavailable, "%s", iso.Message)
		e.Details = map[string]any{"status": "isolated"}
		return e
	}
	holders := a.Health.Degraded()
	if len(holders) == 0 {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return nil
	}
	type problem struct {
		store.ForeignHolder
		Message string `json:"message"`
	}
	out := []problem{}
	for _, h := range holders {
		out = append(out, problem{h, fmt.Sprintf("database session pid %d (role %q, application %q) that is not a founder holds the cluster's %s lock; end it with SELECT pg_terminate_backend(%d)", h.PID, h.User, h.Application, h.Lock, h.PID)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "degraded", "problems": out})
	return nil
}

func (a *API) startupz(w http.ResponseWriter, r *http.Request, _ *call) error {
	writeJSON(w, http.StatusOK, startupView(a.Startup))
	return nil
}

// version tells anyone the build; the releases (and a restored founder's
// isolation) only to an authenticated caller (SPEC 10.2): which release joiners are admitted on is what an
// intruder would need to forge a matching joiner.
func (a *API) version(w http.ResponseWriter, r *http.Request, _ *call) error {
	out := map[string]any{"version": a.Build.Version, "commit": a.Build.Commit, "schemaLevel": a.Health.Schema()}
	if a.authenticated(r) {
		if a.ClusterRelease != nil {
			out["runningRelease"] = a.ClusterRelease()
		}
		if a.AdmissionRelease != nil {
			out["admissionRelease"] = a.AdmissionRelease()
		}
		if iso := a.isolation(); iso != nil {
			out["isolated"] = iso
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) openapi(w http.ResponseWriter, r *http.Request, _ *call) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}
