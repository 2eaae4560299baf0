package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// mountUI serves the operator console (package ui) under /ui/ on the
// admin listener. Its pages are HTML, not API endpoints: they go on the
// router without a Route record, so the OpenAPI document lists only the
// JSON API the console itself calls. "/" and "/ui" lead to the joins page.
func (a *API) mountUI() {
	console := a.Console
	if console == nil {
		return
	}
	serve := func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		setRoute(r, "GET /ui/*")
		console.ServeHTTP(w, r)
	}
	toJoins := func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		setRoute(r, "GET /ui/*")
		http.Redirect(w, r, "/ui/joins", http.StatusFound)
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		a.admin.router.Handle(method, "/ui/*path", serve)
		a.admin.router.Handle(method, "/ui", toJoins)
		a.admin.router.Handle(method, "/", toJoins)
	}
}
