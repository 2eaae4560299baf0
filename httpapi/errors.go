// Package httpapi is the HTTP layer: routes, request decoding and limits,
// authentication, and the mapping of domain errors to the error envelope.
// Handlers decode, call the domain, encode; the rules live elsewhere.
package httpapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"stratum/apierr"
	"stratum/release"
	"stratum/release/repo"
	"stratum/store"
)

// statusOf maps every error code to its HTTP status (SPEC section 2).
var statusOf = map[apierr.Code]int{
	apierr.InvalidInput:         http.StatusBadRequest,
	apierr.InvalidPolicy:        http.StatusBadRequest,
	apierr.Unauthenticated:      http.StatusUnauthorized,
	apierr.JoinTokenInvalid:     http.StatusUnauthorized,
	apierr.Forbidden:            http.StatusForbidden,
	apierr.NotFound:             http.StatusNotFound,
	apierr.MethodNotAllowed:     http.StatusMethodNotAllowed,
	apierr.ReleaseMismatch:      http.StatusConflict,
	apierr.JoinApprovalRefused:  http.StatusConflict,
	apierr.Conflict:             http.StatusConflict,
	apierr.PayloadTooLarge:      http.StatusRequestEntityTooLarge,
	apierr.RangeNotSatisfiable:  http.StatusRequestedRangeNotSatisfiable,
	apierr.TooManyRequests:      http.StatusTooManyRequests,
	apierr.UnsupportedMediaType: http.StatusUnsupportedMediaType,
	apierr.Internal:             http.StatusInternalServerError,
	apierr.NotImplemented:       http.StatusNotImplemented,
	apierr.ReleaseBusy:          http.StatusServiceUnavailable,
	apierr.ReleaseCorrupt:       http.StatusServiceUnavailable,
	apierr.Unavailable:          http.StatusServiceUnavailable,
	apierr.OpenBaoRootToken:     http.StatusConflict,
}

// StatusOf returns the HTTP status for code.
func StatusOf(code apierr.Code) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// writeError answers with the envelope. An error that is not an
// *apierr.Error is logged with the request id and answered as INTERNAL
// with no detail, so no internal text (or secret) reaches the client.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var badFile *release.FileError
	var diskErr *repo.IOError
	e, ok := apierr.As(err)
	switch {
	case ok:
	case errors.As(err, &badFile):
		// A release that fails verification: the file and why are what
		// the operator needs, and they hold no secret.
		e = apierr.WithFields(apierr.InvalidInput, "release not imported: "+badFile.Error(),
			[]apierr.FieldError{{Field: cmp.Or(badFile.Path, "path"), Message: badFile.Reason}})
	case errors.As(err, &diskErr):
		// The founder's own disk, not the request: logged with the
		// request id, no path in the answer.
		log.Error("the founder's disk failed", "requestId", w.Header().Get("X-Request-Id"), "method", r.Method, "path", r.URL.Path, "err", err)
		e = apierr.New(apierr.Internal, "the founder's own disk failed; its log has the details under this request id")
	default:
		if errors.Is(err, store.ErrClosed) {
			e = apierr.New(apierr.Unavailable, "Upstream temporarily unavailable: the founder is shutting down")
		} else if errors.Is(err, store.ErrUnavailable) {
			// A replica that lost its database (a failover) answers 503
			// until its pool reconnects.
			log.Warn("store unavailable", "requestId", w.Header().Get("X-Request-Id"), "err", err)
			e = apierr.New(apierr.Unavailable, "Upstream temporarily unavailable: the founder lost its database; retry shortly")
			e.RetryAfter = 1
		} else {
			log.Error("internal error", "requestId", w.Header().Get("X-Request-Id"), "method", r.Method, "path", r.URL.Path, "err", err)
			e = apierr.New(apierr.Internal, "internal error; the founder's log has the details under this request id")
		}
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, StatusOf(e.Code), e)
}

// writeJSON encodes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
