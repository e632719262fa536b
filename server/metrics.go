package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/runtimectl/runtimectl/session"
)

// metrics are the server's Prometheus collectors, on a registry of its own.
type metrics struct {
	reg      *prometheus.Registry
	execs    *prometheus.CounterVec
	latency  prometheus.Histogram
	bytes    *prometheus.CounterVec
	requests *prometheus.CounterVec
	handler  http.Handler
}

func newMetrics(c *session.Client) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtimectl_executions_total",
			Help: "Executions through the server by status (ok, error, timeout, interrupted, crashed; detached when the stream ended first, failed when the runtime failed).",
		}, []string{"status"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "runtimectl_exec_duration_seconds",
			Help:    "Time from an execution's request to its result, as the server saw it.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtimectl_streamed_bytes_total",
			Help: "Bytes of output that executions produced, by stream.",
		}, []string{"stream"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtimectl_http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
	}
	m.reg.MustRegister(m.execs, m.latency, m.bytes, m.requests, sessionCollector{c}, egressCollector{c},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// serveMetrics needs an admin token: the figures cover the whole engine and every token.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, tok Token) {
	if !tok.Admin {
		writeError(w, http.StatusForbidden, "admin_only", "/metrics covers every token's sessions and executions: it needs an admin token (`TOKEN NAME admin` in the token file)")
		return
	}
	s.metrics.handler.ServeHTTP(w, r)
}

// sessionCollector counts the engine's session containers by state when scraped.
type sessionCollector struct{ c *session.Client }

var sessionsDesc = prometheus.NewDesc("runtimectl_sessions", "Session containers on the engine by state (running, exited, created, ...).", []string{"state"}, nil)

func (sc sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (sc sessionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := sc.c.Runtimes().List(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		return
	}
	counts := map[string]int{"running": 0, "exited": 0}
	for _, ci := range list {
		if ci.Session != "" {
			counts[strings.ToLower(string(ci.State))]++
		}
	}
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), st)
	}
}
