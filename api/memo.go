package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	"github.com/shardplan/shardplan/internal/planner"
)

// Memo memoizes encoded responses by key. Do returns the bytes stored under key (hit
// true), or runs compute, stores its bytes and returns them (hit false). compute's
// errors are returned and never stored. An implementation must treat its own failures
// (e.g. Redis down) as a miss and still return compute's result: a cache never fails a
// request. internal/cache plugs in here.
type Memo interface {
	Do(ctx context.Context, key string, compute func(context.Context) ([]byte, error)) (body []byte, hit bool, err error)
}

// KeyVersion is the planner version the memo keys of this server's answers carry (plan
// ids and exact-request keys hash it in): a store that also namespaces its keys by a
// version uses this one, so that a new planner never serves an old plan.
const KeyVersion = planner.Version

// PlanLookup is the optional read side of a Memo, for GET /v1/plans/{plan_id}: Lookup
// returns the bytes memoized under the plan id, false when absent, expired or malformed,
// and an error when the store cannot be read now (the handler answers 503 with
// Retry-After, not 404). A Memo without it (NopMemo) answers 404 to every plan id.
// *cache.Cache implements both.
type PlanLookup interface {
	Lookup(ctx context.Context, planID string) ([]byte, bool, error)
}

// NopMemo memoizes nothing: every call computes.
type NopMemo struct{}

// Do runs compute.
func (NopMemo) Do(ctx context.Context, _ string, compute func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	b, err := compute(ctx)
	return b, false, err
}

var _ Memo = NopMemo{}

// The exact-request memo: the fast path of a cached answer. A request's canonical key
// (its plan id) needs the body decoded, validated and parsed, which costs more than the
// lookup itself. exact wraps a route's computation: it first looks up the hash of the
// exact request (route, body, content type, query, the answer's media type, planner
// version) and, on a hit, answers what was answered to the same request before without
// decoding anything. Only 200 answers are stored there: errors and 422s (whose body
// carries the request id) always take the full path.
//
//	request ─► exact key ─ hit ─► the stored bytes (or the plan entry they refer to)
//	             └─ miss ─► admit ─► compute ─► 200 answer, stored under the exact key
//
// When the computed answer is a plan memo entry's (answerPlanned returns its plan id)
// and the memo can look plans up, the exact entry is a reference to the plan (refPrefix, then the plan id)
// instead of a second copy of the body: a large answer is sealed and kept once, not
// twice. A reference whose plan is gone (evicted, expired, or its store unreachable) is
// answered by the full path.

// exactKey hashes the exact request: route (with the body's media type and the query when
// they are not plain JSON without one), the answer's media type and the body. The
// "exact-" prefix keeps these keys apart from plan ids (GET /v1/plans never serves them).
func exactKey(route, answer string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(KeyVersion))
	h.Write([]byte{0})
	h.Write([]byte(route))
	h.Write([]byte{0})
	h.Write([]byte(answer))
	h.Write([]byte{0})
	h.Write(body)
	return "exact-" + hex.EncodeToString(h.Sum(nil))
}

// exactRoute is route qualified by what of r besides its body its answer depends on: a
// body that is not JSON (its media type), and the query.
func exactRoute(route string, r *http.Request) string {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt != "application/json" {
		route += "\x00" + mt
	}
	if q := r.URL.Query(); len(q) > 0 {
		route += "\x00" + q.Encode() // sorted by key
	}
	return route
}

// answerMedia is the media type h answers r in: alt (the route's answer besides JSON,
// or "") when r asks for it, else JSON.
func answerMedia(r *http.Request, alt string) string {
	switch {
	case alt == textMediaType && wantsText(r), alt == mlirMediaType && wantsMLIR(r):
		return alt
	}
	return "application/json"
}

// answerContentType is the Content-Type of an answer in media.
func answerContentType(media string) string {
	if media == "application/json" {
		return media
	}
	return media + "; charset=utf-8"
}

// answer is a route's 200 answer.
type answer struct {
	body        []byte
	contentType string
	// hit says a memo answered (the X-Cache header).
	hit bool
	// planID names the plan memo entry whose answer body is; "" when it is none.
	planID string
}

// write writes a with status 200 and its X-Cache header.
func (a *answer) write(w http.ResponseWriter) {
	w.Header().Set("X-Cache", cacheStatus(a.hit))
	writeBody(w, http.StatusOK, a.contentType, a.body)
}

// computeFunc computes the answer to r, whose body is body, within ctx.
type computeFunc func(ctx context.Context, r *http.Request, body []byte) (*answer, error)

// answerFunc answers a request (computeFunc behind the exact-request memo).
type answerFunc func(r *http.Request) (*answer, error)

// writeAnswer is the handler that writes what answerOf answers.
func writeAnswer(answerOf answerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		a, err := answerOf(r)
		if err != nil {
			return err
		}
		a.write(w)
		return nil
	}
}

// exact puts the exact-request memo in front of compute, which answers route in JSON or
// in alt (text/plain, application/mlir, or "" for none) as answerMedia says. Only work
// that is not answered from the memo takes slots (admission.go). The answer is hit when
// either memo answered.
func (s *Server) exact(route, alt string, compute computeFunc) answerFunc {
	return func(r *http.Request) (*answer, error) {
		body, err := readBody(r)
		if err != nil {
			return nil, err
		}
		media := answerMedia(r, alt)
		ctx := withRoute(r) // the computation may outlive r
		lookup, canRef := s.memo.(PlanLookup)
		full := func(ctx context.Context) (*answer, error) {
			release, err := s.admit(ctx)
			if err != nil {
				return nil, err
			}
			defer release()
			a, err := compute(ctx, r, body)
			if err != nil {
				return nil, err
			}
			if err := s.boundPlanned(ctx, a.body); err != nil {
				return nil, err // never stored
			}
			return a, nil
		}
		var fresh *answer
		stored, hit, err := s.memo.Do(ctx, exactKey(exactRoute(route, r), media, body), func(ctx context.Context) ([]byte, error) {
			a, err := full(ctx)
			if err != nil {
				return nil, err
			}
			fresh = a
			if canRef && a.planID != "" {
				return append([]byte(refPrefix), a.planID...), nil
			}
			return a.body, nil
		})
		if err != nil {
			return nil, err
		}
		out := &answer{body: stored, hit: hit}
		switch id, isRef := bytes.CutPrefix(stored, []byte(refPrefix)); {
		case fresh != nil: // this request computed it
			out = fresh
		case isRef:
			entry, ok, lerr := lookup.Lookup(ctx, string(id))
			if lerr == nil && ok {
				out.body, out.planID = planEntryBody(entry), string(id)
				break
			}
			if out, err = full(ctx); err != nil {
				return nil, err
			}
		}
		out.contentType = answerContentType(media)
		return out, nil
	}
}

// cacheStatus is the X-Cache header of an answer.
func cacheStatus(hit bool) string {
	if hit {
		return "hit"
	}
	return "miss"
}

// refPrefix starts an exact-request memo entry that refers to a plan memo entry; no
// answer (JSON or a diagram) starts with a NUL byte.
const refPrefix = "\x00plan:"

// The plan memo: an answer planned under its plan id (reshard and graph requests). A
// route decodes and keys the request, then hands answerPlanned a function that plans
// and renders the answer. The answer is encoded once and stored with its verdict (what
// the policy check and the text answer read of it) in one entry under the plan id:
//
//	plan id ─► memo.Do ─ miss ─► plan, render ─► verdict + encoded answer ─► entry
//	             └─ hit ─► entry ─► verdict, answer (no decoding, no planning)
//
// An entry is "\x00verdict1 <length of the verdict's JSON>\n<verdict JSON><answer>". A
// stored answer without a verdict in front of it (or whose verdict does not read) still
// gets its policy check: its bytes are decoded then.

// planEntryMagic starts a plan entry; no answer starts with a NUL byte.
const planEntryMagic = "\x00verdict1 "

// verdict is what the policy check and the text answer read from a planned answer.
type verdict struct {
	// Violated says the answer breaks forbid_full_rematerialization; Detail and
	// Violations are then the policy-violation problem's.
	Violated   bool        `json:"violated,omitempty"`
	Detail     string      `json:"detail,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
	// SuggestedConstraints is a reshard's top-level member of the problem (the answer's
	// suggested_constraints); nil for a graph, whose are per violation.
	SuggestedConstraints json.RawMessage `json:"suggested_constraints,omitempty"`
	// Diagram is a reshard's text answer (include "diagram").
	Diagram string `json:"diagram,omitempty"`
}

// newPlanEntry is the plan memo entry of body, the encoded answer, and v, its verdict.
func newPlanEntry(v *verdict, body []byte) ([]byte, error) {
	vb, err := encodeJSON(v)
	if err != nil {
		return nil, err
	}
	n := strconv.Itoa(len(vb))
	entry := make([]byte, 0, len(planEntryMagic)+len(n)+1+len(vb)+len(body))
	entry = append(entry, planEntryMagic...)
	entry = append(entry, n...)
	entry = append(entry, '\n')
	entry = append(entry, vb...)
	return append(entry, body...), nil
}

// openPlanEntry splits a plan memo entry into the answer and its verdict; v is nil when
// the entry holds an answer alone, or a verdict that does not read. body aliases entry.
func openPlanEntry(entry []byte) (body []byte, v *verdict) {
	rest, ok := bytes.CutPrefix(entry, []byte(planEntryMagic))
	if !ok {
		return entry, nil
	}
	head, rest, ok := bytes.Cut(rest, []byte{'\n'})
	n, err := strconv.Atoi(string(head))
	if !ok || err != nil || n < 0 || n > len(rest) {
		return entry, nil
	}
	body = rest[n:]
	v = new(verdict)
	if json.Unmarshal(rest[:n], v) != nil {
		return body, nil
	}
	return body, v
}

// planEntryBody is the answer of a plan memo entry.
func planEntryBody(entry []byte) []byte {
	body, _ := openPlanEntry(entry)
	return body
}

// answerPlanned answers with the plan memo's entry under key (the plan id), computing it
// with plan on a miss (the encoded answer and its verdict): the JSON answer (whose plan
// id is key), or its diagram when text. With policy forbidding full rematerialization,
// an answer that rematerializes is a 422 carrying it. readVerdict reads the verdict of
// an answer stored without one. The answer is hit when the memo had the entry.
func (s *Server) answerPlanned(ctx context.Context, key string, policy *Policy, text bool,
	plan func(context.Context) (body []byte, v *verdict, err error), readVerdict func(body []byte) (*verdict, error)) (*answer, error) {
	var fresh *verdict
	entry, hit, err := s.memo.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
		body, v, err := plan(ctx)
		if err != nil {
			return nil, err
		}
		if err := s.boundPlanned(ctx, body); err != nil {
			return nil, err // never stored
		}
		fresh = v
		return newPlanEntry(v, body)
	})
	if err != nil {
		return nil, err
	}
	body, v := openPlanEntry(entry)
	if fresh != nil {
		v = fresh
	}
	checks := policy.forbidsRemat()
	if v == nil && (checks || text) {
		if v, err = readVerdict(body); err != nil {
			return nil, err
		}
	}
	if checks && v.Violated {
		return nil, v.problem(body)
	}
	if text {
		return &answer{body: []byte(v.Diagram), contentType: answerContentType(textMediaType), hit: hit}, nil
	}
	return &answer{body: body, contentType: "application/json", hit: hit, planID: key}, nil
}

// rawJSON encodes v for a json.RawMessage member (as the answer encodes it).
func rawJSON(v any) (json.RawMessage, error) {
	b, err := encodeJSON(v)
	return json.RawMessage(b), err
}
