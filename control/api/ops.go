package api

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Probes, metrics and draining: what an orchestrator asks of control.
//
//   - /startupz: the first segment is loaded and the authority database
//     answers (Config.Startup). Before that no create could succeed.
//   - /readyz: not draining, and enough allocation runway (Config.Ready:
//     the runway gate with hysteresis). A database outage alone does not
//     make control unready: it keeps creating from the segments it holds
//     until the runway runs low.
//   - /livez: the process makes progress (Config.Live); it never asks the
//     database, so an outage does not get control restarted.

// drain tracks creates in flight and refuses new ones once draining.
type drain struct {
	mu       sync.Mutex
	draining bool
	inflight int
	idle     chan struct{} // closed when inflight reaches 0 while draining
}

func (d *drain) enter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return false
	}
	d.inflight++
	return true
}

func (d *drain) leave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inflight--
	if d.inflight == 0 && d.idle != nil {
		close(d.idle)
		d.idle = nil
	}
}

func (d *drain) start() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = true
	if d.idle != nil {
		return d.idle
	}
	ch := make(chan struct{})
	if d.inflight == 0 {
		close(ch)
	} else {
		d.idle = ch
	}
	return ch
}

func (d *drain) isDraining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}

// Drain starts the graceful shutdown of creates: from now on /readyz
// answers 503 and new creates 503 with Retry-After (another instance takes
// them), while creates already running go on. Drain returns once none is
// in flight, or with ctx's error. Other requests are served as before.
func (s *Server) Drain(ctx context.Context) error {
	select {
	case <-s.drain.start():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// InFlightCreates is how many creates are running now.
func (s *Server) InFlightCreates() int {
	s.drain.mu.Lock()
	defer s.drain.mu.Unlock()
	return s.drain.inflight
}

// creating wraps a create route: refused while draining, counted in flight
// otherwise.
func (s *Server) creating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.drain.enter() {
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, http.StatusServiceUnavailable, "this instance is shutting down; retry shortly")
			return
		}
		defer s.drain.leave()
		h(w, r)
	}
}

func (s *Server) livez(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Live != nil {
		if err := s.cfg.Live(); err != nil {
			s.log.Error("not live", "err", err)
			writeProblem(w, r, http.StatusServiceUnavailable, "not live: "+err.Error())
			return
		}
	}
	_, _ = io.WriteString(w, "ok\n")
}

func (s *Server) startupz(w http.ResponseWriter, r *http.Request) {
	s.probe(w, r, s.cfg.Startup, "not started")
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.drain.isDraining() {
		writeProblem(w, r, http.StatusServiceUnavailable, "not ready: draining for shutdown")
		return
	}
	s.probe(w, r, s.cfg.Ready, "not ready")
}

func (s *Server) probe(w http.ResponseWriter, r *http.Request, check func(context.Context) error, what string) {
	if check != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := check(ctx); err != nil {
			s.log.Warn(what, "err", err)
			writeProblem(w, r, http.StatusServiceUnavailable, what+": "+err.Error())
			return
		}
	}
	_, _ = io.WriteString(w, "ok\n")
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		writeProblem(w, r, http.StatusNotFound, "no metrics configured")
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// requestMetrics count the API's answers by route and status. The op label
// is the route table's pattern ("POST /api/v1/links"), never the path a
// client sent, so no code reaches a label.
type requestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	replays  *prometheus.CounterVec
	items    *prometheus.CounterVec
}

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	if reg == nil {
		return nil
	}
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "control_http_requests_total",
			Help: "API answers by route (op) and HTTP status; 201 on POST /api/v1/links is a created link.",
		}, []string{"op", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "control_http_request_duration_seconds",
			Help:    "API request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"op"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "control_idempotent_replays_total",
			Help: "Creates answered from an earlier request with the same idempotency key.",
		}, []string{"op"}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "control_batch_items_total",
			Help: "Items of create batches by their own status (201 created).",
		}, []string{"status"}),
	}
	reg.MustRegister(m.requests, m.duration, m.replays, m.items)
	return m
}

func (m *requestMetrics) instrument(op string, h http.HandlerFunc) http.HandlerFunc {
	if m == nil {
		return h
	}
	dur := m.duration.WithLabelValues(op)
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		dur.Observe(time.Since(start).Seconds())
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
		if sw.Header().Get("Idempotent-Replayed") == "true" {
			m.replays.WithLabelValues(op).Inc()
		}
	}
}

// batchItems counts n batch items answered status.
func (m *requestMetrics) batchItems(status, n int) {
	if m != nil && n > 0 {
		m.items.WithLabelValues(strconv.Itoa(status)).Add(float64(n))
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
