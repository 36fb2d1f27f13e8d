package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/shardplan/shardplan/internal/sharding"
)

// Bounded answers. Whatever a request asks for, the encoded answer is at most
// Limits.MaxAnswerBytes (SHARDPLAN_MAX_ANSWER_BYTES); above it the answer is a 422
// response-too-large naming the answer's largest part and the include entry or request
// field that shrinks it. The per-device lists are refused earlier, from estimates, before
// they are built (budget.go); this bound holds for everything else an answer grows with
// (a graph of 50,000 operands lists every reshard, a module of 100,000 instructions
// every site).
//
// The bound is enforced twice: where an answer is computed for the memo (answerPlanned,
// so that an answer over it is never stored), and for every /v1 route at the moment the
// answer is written (boundAnswers), whatever route, media type or memo it came from.

// answerPart is what shrinks one top-level member of a route's JSON answer: the request
// field (an include entry, or the input that makes it long) and how.
type answerPart struct {
	field, fix string
}

// answerParts maps a route's answer members to their remedies; a member not listed gets
// the route's fallback (the "" entry).
var answerParts = map[string]map[string]answerPart{
	"/v1/reshard": {
		"tiles":     {"include", `leave "tiles" out of include`},
		"transfers": {"include", `leave "transfers" out of include`},
		"diagram":   {"include", `leave "diagram" out of include`},
		"schedule":  {"include", `leave "schedule" out of include, or fetch one rank's from GET /v1/plans/{plan_id}/schedule?rank=N`},
		"steps":     {"include", `leave "pairs" out of include (steps then list compact runs), or use a smaller mesh`},
		"":          {"mesh", "use a smaller mesh or a coarser sharding"},
	},
	"/v1/graph": {
		"ops":         {"include", `leave "ops" out of include`},
		"collectives": {"ops", `plan fewer reshards per request: split the graph, or leave "pairs" out of include`},
		"shardings":   {"tensors", "send fewer tensors per request: split the graph"},
		"explain":     {"tensors", "send fewer tensors per request: split the graph"},
		"":            {"ops", "send a smaller graph or module per request"},
	},
	"/v1/audit": {
		"":           {"module", "audit a smaller program (or module) per request"},
		"sites":      {"module", "audit a smaller program per request: every communication site is listed"},
		"memory":     {"module", "audit a smaller program per request: the memory timeline has a point per op"},
		"opaque_ops": {"module", "audit a smaller program per request"},
	},
	"/v1/tiles": {
		"devices": {"devices", "give devices (the ids to list) to list fewer"},
		"":        {"mesh", "use a smaller mesh"},
	},
	"/v1/transfer": {
		"tensors":  {"include", `leave "tensors" out of include`},
		"schedule": {"include", `leave "schedule" out of include, or move fewer tensors per request`},
		"groups":   {"include", `leave "transfers" out of include, or move fewer tensors per request`},
		"":         {"tensors", "move fewer tensors per request"},
	},
	"/v1/plans/{plan_id}": {
		"": {"plan_id", "ask the plan again with less (its include entries) under the current limit"},
	},
	"/v1/plans/{plan_id}/schedule": {
		"": {"rank", "ask for one rank's schedule (?rank=N)"},
	},
}

// answerTooLarge is the 422 of an answer of size bytes on route when it is over the
// limit, nil otherwise. body is the answer (JSON or text), read for its largest member.
func (s *Server) answerTooLarge(route string, body []byte, size int64) *Problem {
	limit := s.limits.MaxAnswerBytes
	if limit <= 0 || size <= limit {
		return nil
	}
	parts := answerParts[route]
	part, ok := parts[""]
	if !ok {
		part = answerPart{"", "ask for less per request"}
	}
	largest, largestBytes := largestMember(body)
	what := "the answer"
	if largest != "" {
		if p, ok := parts[largest]; ok {
			part = p
		}
		what = "its largest part is " + strconv.Quote(largest) + " (" + mib(largestBytes) + ")"
	}
	fe := sharding.Fieldf(part.field, "the answer would be %s, over the answer limit of %s (SHARDPLAN_MAX_ANSWER_BYTES); %s; %s",
		mib(size), mib(limit), what, part.fix)
	if part.field == "" {
		fe = &sharding.FieldError{Message: fe.Message}
	}
	p := Invalid(slugResponseTooLarge, "Response too large", fe)
	p.Status = http.StatusUnprocessableEntity
	return p
}

// boundPlanned is answerTooLarge for an answer computed under ctx (its route is the one
// withRoute put in ctx).
func (s *Server) boundPlanned(ctx context.Context, body []byte) error {
	if p := s.answerTooLarge(routeOf(ctx), body, int64(len(body))); p != nil {
		return p
	}
	return nil
}

// routeKey is the context key of the route pattern a computation answers.
type routeKey struct{}

// withRoute is r's context carrying r's route pattern as a value of its own. A
// computation may outlive its request (the memo detaches it, and other callers may wait
// for it), and once the request ends chi hands its route context to the next request:
// what the computation needs of the route is read here, on the request's goroutine,
// before it detaches.
func withRoute(r *http.Request) context.Context {
	return context.WithValue(r.Context(), routeKey{}, chiRoute(r.Context()))
}

// routeOf is the route pattern withRoute put in ctx, "" when none.
func routeOf(ctx context.Context) string {
	route, _ := ctx.Value(routeKey{}).(string)
	return route
}

// chiRoute is the route pattern of the request ctx belongs to, read from chi's route
// context: only valid while that request is being served.
func chiRoute(ctx context.Context) string {
	if rc := chi.RouteContext(ctx); rc != nil {
		return rc.RoutePattern()
	}
	return ""
}

// largestMember is the name and encoded size of the largest member of body when body is
// a JSON object, ("", 0) otherwise. It reads body once, token by token at depth one.
func largestMember(body []byte) (string, int64) {
	if len(body) == 0 || body[0] != '{' {
		return "", 0
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		return "", 0
	}
	var name string
	var size int64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return name, size
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return name, size
		}
		if n := int64(len(value)); n > size {
			name, size = key, n
		}
	}
	return name, size
}

// boundAnswers holds every 200 answer of the routes it wraps to MaxAnswerBytes: an
// answer over it (known from its Content-Length, which every answer sets) is replaced by
// the 422 before anything of it is written.
func (s *Server) boundAnswers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.limits.MaxAnswerBytes <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		g := &answerGuard{ResponseWriter: w, s: s, r: r}
		next.ServeHTTP(g, r)
		if g.held && !g.done {
			g.refuse(nil) // an over-limit header with no body written
		}
	})
}

// answerGuard is the ResponseWriter of boundAnswers.
type answerGuard struct {
	http.ResponseWriter
	s    *Server
	r    *http.Request
	size int64
	held bool // a 200 over the limit: its header is held back
	done bool // the 422 was written
}

func (g *answerGuard) WriteHeader(code int) {
	if code == http.StatusOK && !g.held {
		if n, err := strconv.ParseInt(g.Header().Get("Content-Length"), 10, 64); err == nil && n > g.s.limits.MaxAnswerBytes {
			g.held, g.size = true, n
			return
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *answerGuard) Write(b []byte) (int, error) {
	if !g.held {
		return g.ResponseWriter.Write(b)
	}
	if !g.done {
		g.refuse(b)
	}
	return len(b), nil // the answer goes nowhere
}

// refuse writes the 422 in place of the held answer (body: its first write).
func (g *answerGuard) refuse(body []byte) {
	g.done = true
	h := g.Header()
	for _, k := range []string{"Content-Length", "Content-Type", "X-Cache"} {
		h.Del(k)
	}
	p := g.s.answerTooLarge(chiRoute(g.r.Context()), body, g.size)
	if p == nil { // cannot happen: held means over the limit
		p = NewProblem(http.StatusUnprocessableEntity, slugResponseTooLarge, "Response too large", "the answer is over SHARDPLAN_MAX_ANSWER_BYTES")
	}
	g.s.writeProblem(g.ResponseWriter, g.r, p)
}

// Unwrap lets http.ResponseController reach the connection.
func (g *answerGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }
