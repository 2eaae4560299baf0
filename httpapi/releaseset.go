package httpapi

import (
	"net/http"

	"stratum/releaseset"
)

func (a *API) describeReleaseSet(w http.ResponseWriter, r *http.Request, _ *call) error {
	ans, err := a.ReleaseSet.Answer()
	if err != nil {
		return err
	}
	// Once the body started, a failed write can only be logged.
	if err := writeAnswer(w, r, ans); err != nil {
		a.log.Debug("release set answer cut", "err", err)
	}
	return nil
}

func (a *API) setAdmissionRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	var req releaseset.SetAdmissionRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	v, err := a.ReleaseSet.SetAdmission(c.principal.Subject, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// recordRelease records a node's release, from the node itself or a
// bearer token (c.actor names which).
func (a *API) recordRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, RecordBodyLimit)
	if err != nil {
		return err
	}
	req, err := releaseset.DecodeRecordRequest(body)
	if err != nil {
		return err
	}
	if err := a.ReleaseSet.Record(c.actor, c.params.ByName("nodeId"), req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
