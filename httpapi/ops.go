package httpapi

import (
	_ "embed"
	"net/http"
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

func (a *API) startupz(w http.ResponseWriter, r *http.Request, _ *call) error {
	writeJSON(w, http.StatusOK, startupView(a.Startup))
	return nil
}

// version tells anyone the build; the releases only to an authenticated
// caller (SPEC 10.2): which release joiners are admitted on is what an
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
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) openapi(w http.ResponseWriter, r *http.Request, _ *call) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}
