package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"stratum/wire"
)

type ctxKey int

const (
	keyRoute ctxKey = iota
)

// routeHolder lets the inner router tell the outer middleware which route
// matched, for metrics labels without unbounded cardinality.
type routeHolder struct{ route atomic.Value }

func setRoute(r *http.Request, route string) {
	if h, ok := r.Context().Value(keyRoute).(*routeHolder); ok {
		h.route.Store(route)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach deadlines and flushing.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// protocol is the wire protocol version every answer names.
var protocol = strconv.Itoa(wire.ProtocolVersion)

// wrap adds the request id, the protocol version, access log and metrics
// around a listener.
func (a *API) wrap(listener string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := newRequestID()
		w.Header().Set("X-Request-Id", id)
		w.Header().Set(wire.ProtocolHeader, protocol)
		holder := &routeHolder{}
		r = r.WithContext(context.WithValue(r.Context(), keyRoute, holder))
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route, _ := holder.route.Load().(string)
		if route == "" {
			route = "unmatched"
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		a.metrics.requests.WithLabelValues(listener, route, strconv.Itoa(status)).Inc()
		a.metrics.duration.WithLabelValues(listener, route).Observe(elapsed.Seconds())
		// The URL path only: query strings and bodies may carry tokens.
		a.log.Debug("request", "listener", listener, "requestId", id, "method", r.Method, "path", r.URL.Path, "status", status, "bytes", rec.bytes, "ms", elapsed.Milliseconds())
	})
}
