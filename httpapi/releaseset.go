package httpapi

import (
	"net/http"
	"strconv"
	"sync"

	"stratum/apierr"
	"stratum/releaseset"
	"stratum/wire"
)

// describeReleaseSet answers the whole set (the seed's answer), its
// summary (?view=summary: no nodes[]) or a page of nodes[]
// (?limit=N[&after=NODEID]), each with its own ETag.
func (a *API) describeReleaseSet(w http.ResponseWriter, r *http.Request, _ *call) error {
	q := r.URL.Query()
	var ans *releaseset.Answer
	var err error
	switch view, limit := q.Get("view"), q.Get("limit"); {
	case view != "" && view != "summary" && view != "full":
		var f apierr.Fields
		f.Add("view", "must be summary or full")
		return f.Err("the release set query is not valid; see fields")
	case view == "summary" && (limit != "" || q.Has("after")):
		var f apierr.Fields
		f.Add("view", "summary has no nodes to page: drop limit and after")
		return f.Err("the release set query is not valid; see fields")
	case view == "summary":
		ans, err = a.ReleaseSet.SummaryAnswer()
	case limit != "" || q.Has("after"):
		n, perr := strconv.Atoi(limit)
		if perr != nil {
			var f apierr.Fields
			f.Add("limit", "must be a number between 1 and %d", releaseset.MaxPageLimit)
			return f.Err("the release set query is not valid; see fields")
		}
		ans, err = a.ReleaseSet.Page(q.Get("after"), n)
	default:
		ans, err = a.ReleaseSet.Answer()
	}
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
	var req wire.SetAdmissionRequest
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

// recordBodies holds the buffers record bodies are read into: thousands
// of nodes record about 11 KB each, decoded and dropped at once.
var recordBodies = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledRecordBody: a larger body's buffer is left to the collector.
const maxPooledRecordBody = 64 << 10

// recordRelease records a node's release, from the node itself or a
// bearer token (c.actor names which).
func (a *API) recordRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	buf := recordBodies.Get().(*[]byte)
	body, err := readBodyInto(r, RecordBodyLimit, *buf)
	if err != nil {
		recordBodies.Put(buf)
		return err
	}
	// The body goes back to the pool once the record is stored: the
	// request may take its encoding from it (releaseset.Request).
	defer func() {
		if cap(body) <= maxPooledRecordBody {
			*buf = body[:0]
		}
		recordBodies.Put(buf)
	}()
	req, err := releaseset.DecodeRecordRequest(body)
	if err != nil {
		return err
	}
	if err := a.ReleaseSet.RecordDecoded(c.actor, c.params.ByName("nodeId"), req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
