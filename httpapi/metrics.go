package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stratum_http_requests_total", Help: "HTTP requests by listener, route and status.",
		}, []string{"listener", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "stratum_http_request_duration_seconds", Help: "HTTP request duration by listener and route (long-polls included).",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 15, 30, 61},
		}, []string{"listener", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	// Registering twice on a shared registry is a programming error; the
	// standard collectors are only added to a fresh one.
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
