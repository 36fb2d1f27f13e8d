package api

import (
	"context"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardplan/shardplan/internal/planner"
)

// sanitizeRequestID drops an incoming X-Request-Id that is too long or has characters
// outside [A-Za-z0-9._:/-], so chi's RequestID generates one instead of echoing junk
// into logs and problem instances.
func sanitizeRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(middleware.RequestIDHeader); id != "" && !validRequestID(id) {
			r.Header.Del(middleware.RequestIDHeader)
		}
		next.ServeHTTP(w, r)
	})
}

func validRequestID(id string) bool {
	if len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:/-", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// echoRequestID returns the request id in the X-Request-Id response header.
func echoRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(middleware.RequestIDHeader, middleware.GetReqID(r.Context()))
		next.ServeHTTP(w, r)
	})
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// plan is the planning inside a request that missed the plan cache (the planner
	// alone for a reshard; propagation and every reshard's planning for a graph), to
	// tell it from the rest of the request's time.
	plan *prometheus.HistogramVec
	// checkUp is each readiness check's outcome (1 ok, 0 failing) and degraded whether
	// the service is ready without an optional dependency, as last checked (by /readyz
	// or a scrape: readinessCollector).
	checkUp  *prometheus.GaugeVec
	degraded prometheus.Gauge
}

// observePlan records a planning of endpoint under strategy that began at start.
func (m *httpMetrics) observePlan(endpoint string, strategy planner.Strategy, start time.Time) {
	m.plan.WithLabelValues(endpoint, string(strategy)).Observe(time.Since(start).Seconds())
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardplan_http_requests_total",
			Help: "HTTP requests by chi route pattern, method and status code.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shardplan_http_request_duration_seconds",
			Help:    "HTTP request durations by chi route pattern and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
		plan: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shardplan_plan_duration_seconds",
			Help:    "Planning time of the requests that missed the plan cache, by endpoint (reshard, graph) and strategy.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"endpoint", "strategy"}),
		checkUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardplan_readiness_check_up",
			Help: "Each readiness check's outcome, checked at each scrape and each GET /readyz: 1 passing, 0 failing.",
		}, []string{"check"}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardplan_degraded",
			Help: "1 when the service answers without an optional dependency (the plan cache; checked at each scrape and each GET /readyz): every answer is computed.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.plan} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return m, nil
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// observe records the access log line and the request metrics. The route pattern is read
// after next returns (only then is it complete); unmatched requests are labelled
// "unmatched" so labels stay bounded.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		d := time.Since(start)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		route := ""
		if rc := chi.RouteContext(r.Context()); rc != nil {
			route = rc.RoutePattern()
		}
		if route == "" || status == http.StatusNotFound && route == "/*" {
			route = "unmatched"
		}
		method := methodLabel(r.Method)
		s.metrics.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
		s.metrics.duration.WithLabelValues(route, method).Observe(d.Seconds())
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		s.log.LogAttrs(r.Context(), level, "request",
			slog.String("request_id", middleware.GetReqID(r.Context())),
			slog.String("route", route),
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Duration("duration", d),
			slog.Int("bytes", ww.BytesWritten()),
			slog.String("cache", ww.Header().Get("X-Cache")),
		)
	})
}

// recoverer turns a panic into a logged stack and a problem+json 500 (when nothing has
// been written yet). http.ErrAbortHandler is re-panicked, as net/http expects.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler { //nolint:errorlint // sentinel value comparison, as net/http does
				panic(rec)
			}
			s.log.LogAttrs(r.Context(), slog.LevelError, "panic",
				slog.String("request_id", middleware.GetReqID(r.Context())),
				slog.Any("panic", rec), slog.String("stack", string(debug.Stack())))
			if ww, ok := w.(middleware.WrapResponseWriter); ok && ww.Status() != 0 {
				return // headers already sent; nothing sane to add
			}
			s.writeProblem(w, r, fmt.Errorf("panic: %v", rec))
		}()
		next.ServeHTTP(w, r)
	})
}

// timeout puts the request deadline (Limits.RequestTimeout) on the context. It cannot
// pre-empt work: handlers and the planners poll ctx, and a returned
// context.DeadlineExceeded renders as 503 "timeout".
func (s *Server) timeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.limits.RequestTimeout <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.limits.RequestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// limitBody rejects a declared Content-Length over max with 413 and caps the body with
// http.MaxBytesReader (the decode helper maps its error to 413). max <= 0: no limit.
func (s *Server) limitBody(max int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return s.limitBodyTo(max, next)
	}
}

func (s *Server) limitBodyTo(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if max > 0 && r.Body != nil && r.Body != http.NoBody {
			if r.ContentLength > max {
				s.writeProblem(w, r, bodyTooLarge(max))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON answers 415 to a POST/PUT/PATCH whose Content-Type is not JSON
// (application/json or any +json type). A missing Content-Type is taken as JSON.
func (s *Server) requireJSON(next http.Handler) http.Handler { return s.requireMedia()(next) }

// requireMedia is requireJSON that also accepts the media types in extra.
func (s *Server) requireMedia(extra ...string) func(http.Handler) http.Handler {
	accepted := strings.Join(append([]string{"application/json"}, extra...), ", ")
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch:
				if ct := r.Header.Get("Content-Type"); ct != "" {
					mt, _, err := mime.ParseMediaType(ct)
					if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json") && !slices.Contains(extra, mt)) {
						detail := "Content-Type %q is not supported; send the body as JSON with Content-Type: application/json"
						if mt == hloMediaType {
							detail = "Content-Type %q is a compiled HLO module, which POST /v1/audit takes; send StableHLO here as application/mlir"
						}
						s.writeProblem(w, r, NewProblem(http.StatusUnsupportedMediaType, slugUnsupportedMedia, "Unsupported media type", detail, ct).
							WithHeader("Accept-Post", accepted))
						return
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}
