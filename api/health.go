package api

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Health is the body of GET /healthz.
type Health struct {
	Status string `json:"status" example:"ok"`
} // @name Health

// Readiness is the body of GET /readyz when ready. Checks maps each dependency to "ok"
// or what is wrong with it.
type Readiness struct {
	Status string            `json:"status" example:"ready"`
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

// readyz godoc
//
//	@Summary		Readiness
//	@Description	Answers 200 when the service takes traffic: not draining, and every dependency check (e.g. the cache) passes. Otherwise 503 problem+json with the same `checks` object.
//	@Tags			ops
//	@Produce		json
//	@Produce		application/problem+json
//	@Success		200	{object}	Readiness
//	@Failure		503	{object}	Problem
//	@Router			/readyz [get]
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	checks := map[string]string{"draining": "ok"}
	ready := true
	if s.draining.Load() {
		checks["draining"] = "shutting down"
		ready = false
	}
	names := make([]string, 0, len(s.checks))
	for name := range s.checks {
		names = append(names, name)
	}
	sort.Strings(names)
	results := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), readyCheckTimeout)
			defer cancel()
			results[i] = s.checks[name](ctx)
		})
	}
	wg.Wait()
	for i, name := range names {
		if results[i] != nil {
			checks[name] = results[i].Error()
			ready = false
		} else {
			checks[name] = "ok"
		}
	}
	if !ready {
		return NewProblem(http.StatusServiceUnavailable, slugNotReady, "Not ready",
			"the service is not taking traffic; see checks").With("checks", checks).WithHeader("Retry-After", "5")
	}
	return writeJSON(w, http.StatusOK, Readiness{Status: "ready", Checks: checks})
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
