package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"stratum/apierr"
	"stratum/join"
)

// The joiner's endpoints (Joiners): every one is pinned to the client
// certificate's key, the joiner's only identity.

func (a *API) register(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	req, err := join.DecodeRegisterRequest(body)
	if err != nil {
		return err
	}
	view, created, err := a.Joiners.Register(c.pin, req)
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
}

func (a *API) pollRegistration(w http.ResponseWriter, r *http.Request, c *call) error {
	wait, state, err := waitParams(r)
	if err != nil {
		return err
	}
	return a.parkPoll(w, r, c.pin, c.params.ByName("joinId"), state, wait)
}

func (a *API) reportProgress(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	req, err := join.DecodeProgress(body)
	if err != nil {
		return err
	}
	view, err := a.Joiners.Progress(c.pin, c.params.ByName("joinId"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

func (a *API) answerAttestation(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	proof, err := join.DecodeAttestationProof(body)
	if err != nil {
		return err
	}
	view, err := a.Joiners.Attest(c.pin, c.params.ByName("joinId"), proof)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// serveReleaseFile answers GET and HEAD for a file of the release offered
// to the registration.
func (a *API) serveReleaseFile(w http.ResponseWriter, r *http.Request, c *call) error {
	joinID := c.params.ByName("joinId")
	release, err := a.Joiners.OfferedRelease(c.pin, joinID)
	if err != nil {
		return err
	}
	if a.ReleaseFiles == nil {
		return apierr.New(apierr.NotFound, "this founder serves no releases")
	}
	// Download time is bounded by the client, not by a timeout
	// meant for small answers.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	// The registration holds the read slots (SPEC 10.8).
	return ServeReleaseFile(w, r, a.ReleaseFiles, joinID, release, strings.TrimPrefix(c.params.ByName("path"), "/"))
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
