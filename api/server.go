package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-playground/validator/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shardplan/shardplan/api/ui"
	"github.com/shardplan/shardplan/internal/planner"
)

// Limits bound what one request may ask for. Every limit is named (with its environment
// variable) in the 4xx a request over it gets.
type Limits struct {
	MaxBodyBytes    int64         // SHARDPLAN_MAX_BODY_BYTES
	MaxDevices      int           // SHARDPLAN_MAX_DEVICES
	MaxRank         int           // SHARDPLAN_MAX_RANK
	MaxMeshAxes     int           // SHARDPLAN_MAX_MESH_AXES
	ListDeviceLimit int           // SHARDPLAN_LIST_DEVICE_LIMIT: above it, step lists that do not compress into runs are left out unless asked for
	RequestTimeout  time.Duration // SHARDPLAN_REQUEST_TIMEOUT
	MaxInflight     int           // SHARDPLAN_MAX_INFLIGHT: /v1 requests computing or waiting to; more get 503
	// MaxCompute is how many requests compute at once (default GOMAXPROCS); the others
	// wait for a slot within their deadline. Cached answers take no slot.
	MaxCompute int // SHARDPLAN_MAX_COMPUTE
	// BodyReadTimeout bounds reading a request body, before any slot is taken (408 after).
	BodyReadTimeout time.Duration // SHARDPLAN_BODY_READ_TIMEOUT
	// RateLimit is each client's sustained requests/s to /v1 (0: off) and RateBurst its
	// bucket; over it, 429 with Retry-After.
	RateLimit float64 // SHARDPLAN_RATE_LIMIT
	RateBurst int     // SHARDPLAN_RATE_BURST
	// MaxResponseBytes bounds the estimated size of the per-device lists (transfers,
	// pairs, tiles) of one answer; over it, 422 response-too-large before they are built.
	MaxResponseBytes int64 // SHARDPLAN_MAX_RESPONSE_BYTES
	// MaxAnswerBytes bounds the encoded size of any one answer on every /v1 route; over
	// it, 422 response-too-large naming the include entry or field that shrinks it.
	MaxAnswerBytes int64 // SHARDPLAN_MAX_ANSWER_BYTES
	// MaxGraphDepth bounds how deep while ops nest in a graph (400 above).
	MaxGraphDepth int // SHARDPLAN_MAX_GRAPH_DEPTH
	// Graph limits (POST /v1/graph): body size, ops (regions included) and tensors.
	MaxGraphBodyBytes int64 // SHARDPLAN_MAX_GRAPH_BODY_BYTES
	MaxGraphOps       int   // SHARDPLAN_MAX_GRAPH_OPS
	MaxGraphTensors   int   // SHARDPLAN_MAX_GRAPH_TENSORS
	// MaxModuleDepth bounds the nesting of a StableHLO module (regions, attribute
	// brackets, inlined calls).
	MaxModuleDepth int // SHARDPLAN_MAX_MODULE_DEPTH
	// MaxJSONDepth bounds how deep a JSON body's arrays and objects nest (400 above),
	// checked in one pass before the body is decoded.
	MaxJSONDepth int // SHARDPLAN_MAX_JSON_DEPTH
	// MaxElements bounds the elements of any one tensor on every path (tiles, reshard,
	// graph tensors, module values); at most 2^55, so byte sizes stay inside int64.
	MaxElements int64 // SHARDPLAN_MAX_ELEMENTS
	// MaxTransferTensors bounds the tensors one /v1/transfer request stands for, repeats
	// counted (each repeat and repeat_j too); checked before any name is generated.
	MaxTransferTensors int // SHARDPLAN_MAX_TRANSFER_TENSORS
	// MaxTransferMoves bounds the moves a transfer plan makes for one tensor of every
	// group under every strategy priced; the builders stop at it.
	MaxTransferMoves int // SHARDPLAN_MAX_TRANSFER_MOVES
}

// DefaultLimits are the limits of a service started with no configuration.
func DefaultLimits() Limits {
	return Limits{
		MaxBodyBytes:    1 << 20,
		MaxDevices:      65536,
		MaxRank:         16,
		MaxMeshAxes:     8,
		ListDeviceLimit: 1024,
		RequestTimeout:  10 * time.Second,
		MaxInflight:     256,
		MaxCompute:      runtime.GOMAXPROCS(0),
		BodyReadTimeout: 10 * time.Second,
		RateBurst:       20,

		MaxResponseBytes: 64 << 20,
		MaxAnswerBytes:   64 << 20,
		MaxGraphDepth:    32,

		MaxGraphBodyBytes: 32 << 20,
		MaxGraphOps:       100000,
		MaxGraphTensors:   200000,

		MaxTransferTensors: 1 << 20,
		MaxTransferMoves:   1 << 22,
		MaxModuleDepth:     64,
		MaxJSONDepth:       256,
		MaxElements:        1 << 55,
	}
}

// Check is a readiness check: nil when the dependency is usable. It must return within
// its context's deadline.
type Check func(ctx context.Context) error

// Deps is everything a Server needs. Zero values get defaults: a discarding logger,
// DefaultLimits, a fresh private registry, NopMemo, planner memos of its own.
type Deps struct {
	Logger   *slog.Logger
	Limits   Limits
	Registry *prometheus.Registry
	// Memo memoizes encoded responses (internal/cache plugs in here).
	Memo Memo
	// PlannerMemos keep what planning computes from a cost model and a mesh alone,
	// shared by every request; their sizes are in the metrics.
	PlannerMemos *planner.Memos
	// Checks are readiness checks by name; /readyz runs them all and answers 503 when
	// one fails.
	Checks map[string]Check
	// Optional are readiness checks of dependencies the service answers without (e.g.
	// "cache": every answer can be computed): /readyz answers 200 "degraded" when one
	// fails, and shardplan_degraded is 1.
	Optional map[string]Check
	// OpenAPI is the Swagger 2.0 spec as swag writes it, served at GET /openapi2.json
	// (the /docs page reads it); OpenAPI3 its OpenAPI 3 conversion with the polymorphic
	// input fields as oneOf, served at GET /openapi.json (and /openapi3.json).
	OpenAPI  []byte
	OpenAPI3 []byte
	// Access is access control (API keys, CORS); the zero value is open.
	Access Access
}

// Server is shardplan's HTTP handler. Build it with New; it is safe for concurrent use.
type Server struct {
	log      *slog.Logger
	limits   Limits
	reg      *prometheus.Registry
	memo     Memo
	checks   map[string]Check
	optional map[string]Check
	// checkState is each readiness check's last outcome (true: failing), to log changes.
	checkState sync.Map
	openapi    []byte
	openapi3   []byte
	validate   *validator.Validate
	draining   atomic.Bool
	inflight   chan struct{} // requests computing or waiting to
	compute    chan struct{} // requests computing
	clients    *clientLimits // nil: no rate limits
	access     Access
	keys       keyHashes // of access.APIKeys
	metrics    *httpMetrics
	router     chi.Router

	planMemos *planner.Memos // every request's
}

// New builds a Server from deps.
func New(deps Deps) (*Server, error) {
	s := &Server{
		log:    deps.Logger,
		limits: deps.Limits,
		reg:    deps.Registry,
		memo:   deps.Memo,
		checks: deps.Checks, optional: deps.Optional,
		openapi: deps.OpenAPI, openapi3: deps.OpenAPI3,
		access: deps.Access,
		keys:   newKeyHashes(deps.Access.APIKeys),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.limits == (Limits{}) {
		s.limits = DefaultLimits()
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	if s.memo == nil {
		s.memo = NopMemo{}
	}
	if s.planMemos = deps.PlannerMemos; s.planMemos == nil {
		s.planMemos = planner.NewMemos(planner.MemoLimits{})
	}
	if s.limits.MaxInflight > 0 {
		s.inflight = make(chan struct{}, s.limits.MaxInflight)
	}
	if s.limits.MaxCompute > 0 {
		s.compute = make(chan struct{}, s.limits.MaxCompute)
	}
	s.clients = newClientLimits(s.limits.RateLimit, s.limits.RateBurst)
	s.validate = newValidator()
	m, err := newHTTPMetrics(s.reg)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if err := s.reg.Register(readinessCollector{s}); err != nil {
		return nil, fmt.Errorf("register readiness metrics: %w", err)
	}
	if err := s.registerSlotGauges(s.reg); err != nil {
		return nil, err
	}
	if err := s.registerMemoMetrics(s.reg); err != nil {
		return nil, err
	}
	s.router = s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Metrics is the Prometheus handler of the server's registry, for a separate listener
// (Access.MetricsElsewhere).
func (s *Server) Metrics() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})
}

// SetDraining flips readiness: while draining, /readyz answers 503 so load balancers
// stop sending traffic before the listener closes.
func (s *Server) SetDraining(v bool) { s.draining.Store(v) }

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(sanitizeRequestID, middleware.RequestID, echoRequestID, s.observe, s.recoverer, s.cors, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, NewProblem(http.StatusNotFound, slugNotFound, "Not found",
			"no route %s %s; see GET /openapi.json for the routes", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// chi sets Allow only in its default 405 handler; find the methods ourselves.
		allowed := s.allowedMethods(r.URL.Path)
		s.writeProblem(w, r, NewProblem(http.StatusMethodNotAllowed, slugMethodNotAllowed, "Method not allowed",
			"%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allowed, ", ")).
			WithHeader("Allow", strings.Join(allowed, ", ")))
	})

	jsonOnly := s.offers("application/json")
	r.With(jsonOnly).Get("/healthz", s.handle(s.healthz))
	r.With(jsonOnly).Get("/readyz", s.handle(s.readyz))
	if !s.access.MetricsElsewhere {
		// On the API's address, /metrics needs a key when keys are on.
		r.With(s.requireAPIKey, s.offers(textMediaType, "application/openmetrics-text")).Method(http.MethodGet, "/metrics", s.Metrics())
	}
	r.With(jsonOnly).Get("/openapi.json", s.handle(s.openAPI3))
	r.With(jsonOnly).Get("/openapi3.json", s.handle(s.openAPI3))
	r.With(jsonOnly).Get("/openapi2.json", s.handle(s.openAPI))
	r.With(s.offers(htmlMediaType)).Get("/docs", s.handle(s.docs))
	assets := s.offers("text/javascript", "text/css", svgMediaType)
	r.With(assets).Get("/docs/{asset}", s.handle(pageAssets("/docs", ui.Docs)))
	r.With(s.offers(htmlMediaType)).Get("/explore", s.handle(s.explore))
	r.With(assets).Get("/explore/{asset}", s.handle(pageAssets("/explore", ui.Explore)))
	// Like every /v1 route, the cost models need a key when keys are on, and count
	// against the client's rate limit.
	r.With(s.requireAPIKey, s.rateLimit, jsonOnly).Get("/v1/cost-models", s.handle(s.costModels))
	r.With(s.requireAPIKey, s.rateLimit, jsonOnly).Get("/v1/cost-models/{name}", s.handle(s.costModel))

	// The API routes. An inline group (not a sub-router) so its middleware runs after
	// routing and the route pattern is complete even for a 413/415/503 it answers.
	// Admission (admission.go): rate limit, then the body under its own deadline, then
	// the request deadline; slots are taken only by work that computes.
	r.Group(func(r chi.Router) {
		r.Use(s.requireAPIKey, s.rateLimit, s.requireJSON, s.limitBody(s.limits.MaxBodyBytes), s.bufferBody, s.timeout, s.boundAnswers)
		r.With(s.offers("application/json", svgMediaType), s.throttle).Post("/v1/tiles", s.handle(s.tiles))
		r.With(jsonOnly, s.throttle).Post("/v1/cost-models/fit", s.handle(s.fitCostModel))
		// A drawing is made from the JSON answer; the exact-request memo answers a body it
		// has answered before; reshard decodes and keys the rest for the plan memo.
		r.With(s.offers("application/json", textMediaType, svgMediaType)).Post("/v1/reshard", s.handle(s.drawnReshard(s.exact("reshard", textMediaType, s.reshard))))
		r.With(jsonOnly).Get("/v1/plans/{plan_id}", s.handle(s.plan))
		r.With(jsonOnly).Get("/v1/plans/{plan_id}/schedule", s.handle(s.planSchedule))
		r.With(s.offers("application/json", textMediaType, svgMediaType), s.throttle).Post("/v1/transfer", s.handle(s.transferRequest))
	})
	// Graphs are bigger than single reshards: their own body limit.
	r.Group(func(r chi.Router) {
		r.Use(s.requireAPIKey, s.rateLimit, s.requireMedia(mlirMediaType), s.limitBody(s.limits.MaxGraphBodyBytes), s.bufferBody, s.timeout, s.boundAnswers)
		r.With(s.offers("application/json", mlirMediaType)).Post("/v1/graph", s.handle(writeAnswer(s.exact("graph", mlirMediaType, s.graph))))
	})
	r.Group(func(r chi.Router) {
		r.Use(s.requireAPIKey, s.rateLimit, s.requireMedia(mlirMediaType, hloMediaType), s.limitBody(s.limits.MaxGraphBodyBytes), s.bufferBody, s.timeout, s.boundAnswers)
		r.With(s.offers("application/json", textMediaType)).Post("/v1/audit", s.handle(writeAnswer(s.exact("audit", textMediaType, s.audit))))
	})
	return r
}

// allowedMethods lists the methods some route answers on path.
func (s *Server) allowedMethods(path string) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if s.router.Match(chi.NewRouteContext(), m, path) {
			out = append(out, m)
		}
	}
	return out
}

// handlerFunc is the signature of every shardplan handler: it writes a success response
// itself (usually through writeJSON) or returns an error that writeProblem renders.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts a handlerFunc to http.HandlerFunc.
func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeProblem(w, r, err)
		}
	}
}

// writeJSON encodes v, then writes status and the bytes (no half-written 200s).
func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := encodeJSON(v)
	if err != nil {
		return err
	}
	writeBody(w, status, "application/json", body)
	return nil
}

// encodeJSON marshals v without HTML escaping (shardings print "<" and ">").
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
