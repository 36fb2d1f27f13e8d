package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Health is the body of GET /healthz.
type Health struct {
	Status string `json:"status" example:"ok"`
} // @name Health

// Readiness is the body of GET /readyz when the service takes traffic: status "ready",
// or "degraded" when an optional dependency (the cache) fails and every request is still
// answered (computed). Checks maps each dependency to "ok" or what is wrong with it: the
// error itself to a request with a valid API key, "unavailable" to others (the error can
// name internal addresses).
type Readiness struct {
	Status string            `json:"status" example:"ready" enums:"ready,degraded"`
	Checks map[string]string `json:"checks"`
} // @name Readiness

// healthz godoc
//
//	@Summary		Liveness
//	@Description	Answers 200 while the process is alive.
//	@Tags			ops
//	@Produce		json
//	@Success		200	{object}	Health
//	@Router			/healthz [get]
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, Health{Status: "ok"})
}

// readyCheckTimeout bounds each readiness check.
const readyCheckTimeout = time.Second

// checkUnavailable is what a failing check says to a request without a valid API key.
const checkUnavailable = "unavailable"

// readyz godoc
//
//	@Summary		Readiness
//	@Description	Answers 200 when the service can answer: status `ready`, or `degraded` when an optional dependency (the plan cache) fails, since every answer can still be computed. 503 problem+json with the same `checks` object while draining or when a required check fails. A failing check's error (which may name internal addresses) is shown to requests with a valid API key; others read `unavailable`.
//	@Tags			ops
//	@Produce		json
//	@Produce		application/problem+json
//	@Success		200	{object}	Readiness
//	@Failure		503	{object}	Problem
//	@Router			/readyz [get]
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	st := s.runChecks(r.Context())
	checks := map[string]string{"draining": "ok"}
	if s.draining.Load() {
		checks["draining"] = "shutting down"
	}
	detail := s.keyHolder(r)
	for i, name := range st.names {
		switch err := st.results[i]; {
		case err == nil:
			checks[name] = "ok"
		case detail:
			checks[name] = err.Error()
		default:
			checks[name] = checkUnavailable
		}
	}
	if !st.ready {
		p := NewProblem(http.StatusServiceUnavailable, slugNotReady, "Not ready", "the service is not taking traffic; see checks")
		p.Checks = checks
		return p.WithHeader("Retry-After", "5")
	}
	status := "ready"
	if st.degraded {
		status = "degraded"
	}
	return writeJSON(w, http.StatusOK, Readiness{Status: status, Checks: checks})
}

// readiness is the outcome of every readiness check at one moment.
type readiness struct {
	names    []string // the checks, sorted
	results  []error  // each check's error, nil when it passes
	ready    bool     // not draining and every required check passes
	degraded bool     // ready, with an optional check failing
}

// runChecks runs every readiness check at once (each within readyCheckTimeout), logs
// the ones whose outcome changed and sets the readiness gauges. /readyz and every scrape
// of the metrics run it, so the gauges follow the dependencies whether or not anyone
// asks /readyz.
func (s *Server) runChecks(ctx context.Context) readiness {
	all := make(map[string]Check, len(s.checks)+len(s.optional))
	maps.Copy(all, s.checks)
	maps.Copy(all, s.optional)
	st := readiness{names: slices.Sorted(maps.Keys(all)), ready: !s.draining.Load()}
	st.results = make([]error, len(st.names))
	var wg sync.WaitGroup
	for i, name := range st.names {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
			defer cancel()
			st.results[i] = all[name](ctx)
		})
	}
	wg.Wait()
	for i, name := range st.names {
		err := st.results[i]
		s.metrics.checkUp.WithLabelValues(name).Set(boolGauge(err == nil))
		s.noteCheck(ctx, name, err)
		if err == nil {
			continue
		}
		if _, optional := s.optional[name]; optional {
			st.degraded = true
		} else {
			st.ready = false
		}
	}
	st.degraded = st.degraded && st.ready
	s.metrics.degraded.Set(boolGauge(st.degraded))
	return st
}

// readinessCollector exports the readiness gauges (shardplan_readiness_check_up,
// shardplan_degraded), running the checks at each scrape.
type readinessCollector struct{ s *Server }

func (c readinessCollector) Describe(ch chan<- *prometheus.Desc) {
	c.s.metrics.checkUp.Describe(ch)
	c.s.metrics.degraded.Describe(ch)
}

func (c readinessCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.runChecks(context.Background())
	c.s.metrics.checkUp.Collect(ch)
	c.s.metrics.degraded.Collect(ch)
}

// keyHolder reports whether r carries a valid API key (never when keys are off).
func (s *Server) keyHolder(r *http.Request) bool {
	key, ok := presentedKey(r)
	return ok && len(s.keys) > 0 && s.keys.match(key)
}

// noteCheck logs a readiness check when its outcome changes (the error in full: logs are
// the operator's).
func (s *Server) noteCheck(ctx context.Context, name string, err error) {
	failing := err != nil
	prev, seen := s.checkState.Swap(name, failing)
	if seen && prev.(bool) == failing || !seen && !failing {
		return
	}
	if failing {
		s.log.LogAttrs(ctx, slog.LevelWarn, "readiness check failing", slog.String("check", name), slog.String("error", err.Error()))
		return
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "readiness check passing again", slog.String("check", name))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// openAPI godoc
//
//	@Summary		OpenAPI 2.0 spec
//	@Description	The API as swag writes it (Swagger 2.0), from which /openapi.json is converted; the /docs page reads it.
//	@Tags			ops
//	@Produce		json
//	@Success		200	{object}	object
//	@Failure		406	{object}	Problem	"Accept admits no JSON"
//	@Router			/openapi2.json [get]
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	if len(s.openapi) == 0 {
		return NewProblem(http.StatusNotFound, slugNotFound, "Not found", "this build carries no OpenAPI spec")
	}
	writeBody(w, http.StatusOK, "application/json", s.openapi)
	return nil
}

// openAPI3 godoc
//
//	@Summary		OpenAPI 3 spec
//	@Description	The API in OpenAPI 3.0, with the fields a request may give in several forms (mesh, shardings, cost_model) described as oneOf, for client generators. Also at /openapi3.json; the Swagger 2.0 original is at /openapi2.json.
//	@Tags			ops
//	@Produce		json
//	@Success		200	{object}	object
//	@Failure		406	{object}	Problem	"Accept admits no JSON"
//	@Router			/openapi.json [get]
//	@Router			/openapi3.json [get]
func (s *Server) openAPI3(w http.ResponseWriter, _ *http.Request) error {
	if len(s.openapi3) == 0 {
		return NewProblem(http.StatusNotFound, slugNotFound, "Not found", "this build carries no OpenAPI 3 spec")
	}
	writeBody(w, http.StatusOK, "application/json", s.openapi3)
	return nil
}
