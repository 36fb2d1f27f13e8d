package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/shardplan/shardplan/internal/sharding"
)

// ProblemTypeBase prefixes every problem type URI: the slug follows it.
const ProblemTypeBase = "https://shardplan.dev/problems/"

// ProblemContentType is the media type of every error body (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details object, the body of every failure. It is also an
// error, so handlers return it and one renderer (writeProblem) writes it.
type Problem struct {
	// Type is a URI naming the kind of problem: https://shardplan.dev/problems/<slug>.
	Type string `json:"type" example:"https://shardplan.dev/problems/invalid-sharding"`
	// Title is constant per Type.
	Title string `json:"title" example:"Invalid sharding"`
	// Status equals the HTTP status code.
	Status int `json:"status" example:"400"`
	// Detail says what went wrong in this occurrence.
	Detail string `json:"detail,omitempty" example:"sharding[0]: unknown mesh axis \"q\" (mesh axes: x, y)"`
	// Instance is the request id of this occurrence.
	Instance string `json:"instance,omitempty" example:"host/abcdef-000001"`
	// Errors lists the invalid fields by wire path, for validation failures.
	Errors []FieldError `json:"errors,omitempty"`
	// MinBudget (memory-budget problems) is the smallest memory_budget_bytes_per_device
	// that admits a plan.
	MinBudget int64 `json:"min_budget_bytes_per_device,omitempty"`
	// MoreErrors (400s) counts the field errors left out of errors, which lists at most
	// 100.
	MoreErrors int `json:"more_errors,omitempty" example:"12"`
	// Checks (503 not-ready) is each readiness check's state: "ok", or why it fails.
	Checks map[string]string `json:"checks,omitempty"`
	// Violations (422 policy-violation) are the policies the answer breaks.
	Violations []Violation `json:"violations,omitempty"`
	// Plan (422 policy-violation) is the answer that breaks the policy, as the route
	// answers it without one (a ReshardResponse or a GraphResponse).
	Plan json.RawMessage `json:"plan,omitempty" swaggertype:"object"`
	// SuggestedConstraints (422 policy-violation of a reshard) are Suggestion objects:
	// the constraints that avoid the rematerialization (a graph's are per violation).
	SuggestedConstraints json.RawMessage `json:"suggested_constraints,omitempty" swaggertype:"array,object"`

	headers http.Header // extra response headers (Retry-After, Allow)
	cause   error       // internal cause, logged, never sent
} // @name Problem

// Error implements error.
func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Title + ": " + p.Detail
	}
	return p.Title
}

// Unwrap returns the internal cause, if any.
func (p *Problem) Unwrap() error { return p.cause }

// MarshalJSON writes the standard members in field order; a problem with any of the
// members after min_budget_bytes_per_device (its extensions) is written as one object
// with every member's key in sorted order.
func (p *Problem) MarshalJSON() ([]byte, error) {
	type plain Problem
	std := plain(*p)
	std.MoreErrors, std.Checks, std.Violations, std.Plan, std.SuggestedConstraints = 0, nil, nil, nil, nil
	b, err := encodeJSON(&std)
	ext := p.extensions()
	if err != nil || len(ext) == 0 {
		return b, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, err
	}
	for k, v := range members {
		ext[k] = v
	}
	return encodeJSON(ext)
}

// extensions are the extension members p carries, by key.
func (p *Problem) extensions() map[string]any {
	m := map[string]any{}
	if p.MoreErrors != 0 {
		m["more_errors"] = p.MoreErrors
	}
	if p.Checks != nil {
		m["checks"] = p.Checks
	}
	if p.Violations != nil {
		m["violations"] = p.Violations
	}
	if p.Plan != nil {
		m["plan"] = p.Plan
	}
	if p.SuggestedConstraints != nil {
		m["suggested_constraints"] = p.SuggestedConstraints
	}
	return m
}

// WithHeader returns p with a response header set.
func (p *Problem) WithHeader(key, value string) *Problem {
	if p.headers == nil {
		p.headers = http.Header{}
	}
	p.headers.Set(key, value)
	return p
}

// NewProblem builds a problem of the given status, slug and title; detail is formatted.
func NewProblem(status int, slug, title, format string, args ...any) *Problem {
	detail := format
	if len(args) > 0 {
		detail = fmt.Sprintf(format, args...)
	}
	return &Problem{Type: ProblemTypeBase + slug, Title: title, Status: status, Detail: detail}
}

// Invalid is a 400 listing field errors; detail joins them. At most maxListedErrors are
// listed (in "errors" and in detail), each field and message cut at maxErrorText bytes;
// the number left out is the "more_errors" member and the end of detail, so a body of
// many bad values gets a bounded answer.
func Invalid(slug, title string, errs ...*sharding.FieldError) *Problem {
	listed := errs
	if len(errs) > maxListedErrors {
		listed = errs[:maxListedErrors]
	}
	p := &Problem{Type: ProblemTypeBase + slug, Title: title, Status: http.StatusBadRequest, Errors: make([]FieldError, len(listed))}
	parts := make([]string, len(listed), len(listed)+1)
	for i, e := range listed {
		e = &sharding.FieldError{Field: cutText(e.Field), Message: cutText(e.Message)}
		p.Errors[i] = fieldErrorOf(e)
		parts[i] = e.Error()
	}
	if more := len(errs) - len(listed); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more errors (the first %d are listed; fix them and send the request again)", more, len(listed)))
		p.MoreErrors = more
	}
	p.Detail = strings.Join(parts, "; ")
	return p
}

// maxListedErrors is how many field errors a 400 lists; maxErrorText bounds each one's
// field and message (a path into a deeply nested body can be long).
const (
	maxListedErrors = 100
	maxErrorText    = 1024
)

// cutText cuts s to maxErrorText bytes at a rune boundary, marking the cut.
func cutText(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Problem slugs and titles used by shardplan.
const (
	slugInvalidJSON      = "invalid-json"
	slugInvalidRequest   = "invalid-request"
	slugInvalidMesh      = "invalid-mesh"
	slugInvalidSharding  = "invalid-sharding"
	slugInvalidGraph     = "invalid-graph"  // /v1/graph: ops, tensors, inputs, outputs
	slugInvalidModule    = "invalid-module" // /v1/graph: module, function (line and column named)
	slugNotAcceptable    = "not-acceptable"
	slugLimitExceeded    = "limit-exceeded"
	slugBodyTooLarge     = "body-too-large"
	slugUnsupportedMedia = "unsupported-media-type"
	slugNotFound         = "not-found"
	slugMethodNotAllowed = "method-not-allowed"
	slugOverloaded       = "overloaded"
	slugTimeout          = "timeout"
	slugNotReady         = "not-ready"
	slugPolicyViolation  = "policy-violation"   // 422, with "violations" and "plan" extensions
	slugRateLimited      = "rate-limited"       // 429, with Retry-After
	slugStoreUnavailable = "store-unavailable"  // 503 on a permalink while Redis cannot be read
	slugShuttingDown     = "shutting-down"      // 503: cut short by the shutdown timeout
	slugUnauthorized     = "unauthorized"       // 401: no or a wrong API key
	slugBodyTimeout      = "body-timeout"       // 408: the body did not arrive within SHARDPLAN_BODY_READ_TIMEOUT
	slugResponseTooLarge = "response-too-large" // 422: the lists asked for exceed SHARDPLAN_MAX_RESPONSE_BYTES
	slugBudgetExceeded   = "memory-budget"      // 422: no plan fits memory_budget_bytes_per_device; min_budget_bytes_per_device says what would
	slugInternal         = "internal"
	slugHeadersTooLarge  = "headers-too-large"  // 431: net/http refused the request's header fields (RefusedRequestProblem)
	slugRefused          = "unreadable-request" // 400, 501, 505: net/http could not read the request (RefusedRequestProblem)
)

// limitExceeded is a 400 naming the field, the limit and its value.
func limitExceeded(field, format string, args ...any) *Problem {
	return Invalid(slugLimitExceeded, "Request exceeds a limit", sharding.Fieldf(field, format, args...))
}

// problemFrom classifies any error a handler returns:
//   - *Problem as is;
//   - sharding field errors (sharding.FieldError / sharding.Errors) -> 400 invalid-sharding,
//     or invalid-mesh when every field is under "mesh";
//   - context.DeadlineExceeded -> 503 timeout;
//   - *http.MaxBytesError -> 413;
//   - anything else -> 500 with a generic detail (the cause is logged, never sent).
func (s *Server) problemFrom(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if fes, ok := sharding.AsFieldErrors(err); ok {
		slug, title := classifyFields(fes)
		return Invalid(slug, title, fes...)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return bodyTooLarge(mbe.Limit)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return s.timeoutProblem()
	}
	p = NewProblem(http.StatusInternalServerError, slugInternal, "Internal error", "the server failed to handle this request; quote the instance id when reporting it")
	p.cause = err
	return p
}

func bodyTooLarge(limit int64) *Problem {
	return NewProblem(http.StatusRequestEntityTooLarge, slugBodyTooLarge, "Request body too large",
		"the request body exceeds the limit of %d bytes (SHARDPLAN_MAX_BODY_BYTES; SHARDPLAN_MAX_GRAPH_BODY_BYTES for /v1/graph)", limit)
}

func (s *Server) timeoutProblem() *Problem {
	return NewProblem(http.StatusServiceUnavailable, slugTimeout, "Request timed out",
		"the request took longer than the limit of %s (SHARDPLAN_REQUEST_TIMEOUT); ask for less (fewer devices, smaller graph) or retry", s.limits.RequestTimeout).
		WithHeader("Retry-After", "1")
}

// writeProblem is the one renderer of failures: it classifies err, logs it (5xx at Error
// with the cause), and writes application/problem+json with instance = request id.
// Work cancelled with the request is the shutdown's 503 while draining (the shutdown
// timeout cancelled it: the client should go elsewhere), otherwise the client went away
// and nobody reads an answer (499, logged, no body).
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		if !s.draining.Load() {
			s.log.LogAttrs(r.Context(), slog.LevelDebug, "client gone", slog.String("request_id", middleware.GetReqID(r.Context())))
			w.WriteHeader(499)
			return
		}
		err = shuttingDown()
	}
	p := s.problemFrom(err)
	out := *p
	out.Instance = middleware.GetReqID(r.Context())
	if out.Status >= 500 {
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", out.Instance), slog.Int("status", out.Status),
			slog.String("type", out.Type), slog.Any("error", err))
	}
	body, mErr := encodeJSON(&out)
	if mErr != nil {
		body = []byte(`{"type":"` + ProblemTypeBase + slugInternal + `","title":"Internal error","status":500}`)
		out.Status = http.StatusInternalServerError
	}
	h := w.Header()
	for k, vs := range p.headers {
		h[k] = vs
	}
	h.Set("Content-Type", ProblemContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(out.Status)
	_, _ = w.Write(body)
}

// classifyFields picks the problem type of a list of field errors by the root of their
// paths: all under "mesh" -> invalid-mesh; all under a sharding-valued field (anything
// but the plain request fields) -> invalid-sharding; otherwise invalid-request.
func classifyFields(fes sharding.Errors) (slug, title string) {
	kinds := map[string]bool{}
	for _, fe := range fes {
		root := fe.Field
		if i := strings.IndexAny(root, ".["); i >= 0 {
			root = root[:i]
		}
		switch root {
		case "mesh":
			kinds[slugInvalidMesh] = true
		case "", "shape", "dtype", "element_bytes", "locate", "devices", "include", "cost_model", "strategy", "policy", "allowed_ops", "options", "memory_budget_bytes_per_device", "profile":
			kinds[slugInvalidRequest] = true
		case "ops", "inputs", "outputs":
			kinds[slugInvalidGraph] = true
		case "module", "function", "hlo_module":
			kinds[slugInvalidModule] = true
		case "tensors":
			if strings.Contains(fe.Field, ".sharding") {
				kinds[slugInvalidSharding] = true
			} else {
				kinds[slugInvalidGraph] = true
			}
		default:
			kinds[slugInvalidSharding] = true
		}
	}
	switch {
	case len(kinds) == 1 && kinds[slugInvalidMesh]:
		return slugInvalidMesh, "Invalid mesh"
	case len(kinds) == 1 && kinds[slugInvalidSharding]:
		return slugInvalidSharding, "Invalid sharding"
	case len(kinds) == 1 && kinds[slugInvalidModule]:
		return slugInvalidModule, "Invalid module"
	case len(kinds) == 1 && kinds[slugInvalidGraph]:
		return slugInvalidGraph, "Invalid graph"
	}
	return slugInvalidRequest, "Invalid request"
}

// RefusedRequestProblem is the problem+json body of a request Go's net/http refused
// before any handler saw it (header fields over headerLimit bytes, a malformed request
// line or header, an unsupported transfer encoding or protocol version): status is the
// status net/http gave it and reason net/http's text. It carries no instance: no request
// id was assigned.
func RefusedRequestProblem(status int, reason string, headerLimit int) []byte {
	slug, detail := slugRefused, "the request could not be read: "+reason+"; send a well-formed HTTP/1.1 request"
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		slug, detail = slugHeadersTooLarge, fmt.Sprintf("the request's header fields exceed the server's limit of %d bytes; send fewer or shorter headers (cookies included)", headerLimit)
	case http.StatusNotImplemented:
		detail = "the request could not be read: " + reason + "; send the body with Content-Length or chunked transfer encoding"
	case http.StatusHTTPVersionNotSupported:
		detail = "the request could not be read: " + reason + "; use HTTP/1.0, HTTP/1.1 or HTTP/2"
	}
	title := http.StatusText(status)
	if title == "" {
		title = "Refused request"
	}
	body, err := encodeJSON(NewProblem(status, slug, title, "%s", detail))
	if err != nil { // cannot happen: a Problem of strings encodes
		return []byte(`{"type":"` + ProblemTypeBase + slugRefused + `","status":` + strconv.Itoa(status) + `}`)
	}
	return body
}
