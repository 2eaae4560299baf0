package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"stratum/apierr"
	"stratum/join"
)

// mountJoinListener adds the joiner endpoints: every one is pinned to the
// client certificate's key, the joiner's only identity.
func (a *API) mountJoinListener() {
	svc, releases := a.Joiners, a.ReleaseFiles
	m := a.join
	m.handle(Route{Method: "POST", Path: "/v1/join/registrations", Summary: "Register with a join token; pinned to the client certificate's key.", Auth: "joiner-key"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			pin, err := JoinerPin(r)
			if err != nil {
				return err
			}
			body, err := readBody(r, DefaultBodyLimit)
			if err != nil {
				return err
			}
			req, err := join.DecodeRegisterRequest(body)
			if err != nil {
				return err
			}
			view, created, err := svc.Register(pin, req)
			if err != nil {
				return err
			}
			status := http.StatusOK
			if created {
				status = http.StatusCreated
				w.Header().Set("Location", "/v1/join/registrations/"+view.JoinID)
			}
			writeJSON(w, status, view)
			return nil
		})
	m.handle(Route{Method: "GET", Path: "/v1/join/registrations/:joinId", Summary: "The joiner's view, long-polled with wait (seconds, at most 60) and state (the state last seen).", Auth: "joiner-key"},
		func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
			pin, err := JoinerPin(r)
			if err != nil {
				return err
			}
			wait, state, err := waitParams(r)
			if err != nil {
				return err
			}
			return a.parkPoll(w, r, svc, pin, ps.ByName("joinId"), state, wait)
		})
	m.handle(Route{Method: "POST", Path: "/v1/join/registrations/:joinId/progress", Summary: "Report delivery progress: installing, done or failed.", Auth: "joiner-key"},
		func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
			pin, err := JoinerPin(r)
			if err != nil {
				return err
			}
			body, err := readBody(r, DefaultBodyLimit)
			if err != nil {
				return err
			}
			req, err := join.DecodeProgress(body)
			if err != nil {
				return err
			}
			view, err := svc.Progress(pin, ps.ByName("joinId"), req)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, view)
			return nil
		})
	serve := func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		pin, err := JoinerPin(r)
		if err != nil {
			return err
		}
		release, err := svc.OfferedRelease(pin, ps.ByName("joinId"))
		if err != nil {
			return err
		}
		if releases == nil {
			return apierr.New(apierr.NotFound, "this founder serves no releases")
		}
		// Download time is bounded by the client, not by a timeout
		// meant for small answers.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		// The registration holds the read slots (SPEC 10.8).
		return ServeReleaseFile(w, r, releases, ps.ByName("joinId"), release, strings.TrimPrefix(ps.ByName("path"), "/"))
	}
	m.handle(Route{Method: "GET", Path: "/v1/join/registrations/:joinId/release/*path", Summary: "A file of the offered release, while needs-upgrade; ranges, ETag, hash-verified.", Auth: "joiner-key"}, serve)
	m.handle(Route{Method: "HEAD", Path: "/v1/join/registrations/:joinId/release/*path", Summary: "Headers of a file of the offered release.", Auth: "joiner-key"}, serve)
}

// holdLongPoll gives a long-poll answer its own write deadline: the hold
// outlives the server's read timeout.
func holdLongPoll(w http.ResponseWriter, wait time.Duration) {
	if wait > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	}
}

// waitParams parses wait (seconds; above 60 taken as 60) and state.
func waitParams(r *http.Request) (time.Duration, string, error) {
	wait, err := waitParam(r)
	if err != nil {
		return 0, "", err
	}
	return wait, r.URL.Query().Get("state"), nil
}

// waitParam parses a long-poll's wait: whole seconds, above 60 taken as 60.
func waitParam(r *http.Request) (time.Duration, error) {
	q := r.URL.Query()
	var f apierr.Fields
	var wait time.Duration
	if s, ok := q["wait"]; ok {
		// Digits only; a value too long to parse is still "above 60".
		digits := strings.TrimLeft(s[0], "0")
		switch {
		case s[0] == "" || strings.Trim(s[0], "0123456789") != "":
			f.Add("wait", "must be a whole, non-negative number of seconds")
		case len(digits) > 3:
			wait = join.MaxWait
		default:
			n, _ := strconv.Atoi("0" + digits)
			wait = min(time.Duration(n)*time.Second, join.MaxWait)
		}
	}
	if err := f.Err("bad query parameters"); err != nil {
		return 0, err
	}
	return wait, nil
}
