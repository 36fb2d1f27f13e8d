package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"

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

// Exact-request memo: the fast path of a cached answer. A request's canonical key (its
// plan id) needs the body decoded, validated and parsed, which costs more than the
// lookup itself. respondExact first looks up the hash of the exact bytes (route, body,
// the answer's media type, planner version) and, on a hit, writes what was answered to
// the same bytes before without decoding anything. Only 200 answers are stored there:
// errors and 422s (whose body carries the request id) always take the full path.

// exactKey hashes the exact request. The "exact-" prefix keeps these keys apart from
// plan ids (GET /v1/plans never serves them).
func exactKey(route string, text bool, body []byte) string {
	h := sha256.New()
	h.Write([]byte(planner.Version))
	h.Write([]byte{0})
	h.Write([]byte(route))
	if text {
		h.Write([]byte("\x00text/plain"))
	} else {
		h.Write([]byte("\x00application/json"))
	}
	h.Write(body)
	return "exact-" + hex.EncodeToString(h.Sum(nil))
}

// respondExact answers from the exact-request memo, or runs compute (the full path),
// which returns the 200 body and whether the canonical plan was a hit. offersText says
// whether the route answers text/plain to an Accept asking for it; compute is told which
// to produce. X-Cache is hit when either memo answered.
//
// When compute's body is the plan memo's entry itself (compute sets ref to its plan id)
// and the memo can look plans up, the exact-request memo stores a reference to the plan
// instead of a second copy of the body (refPrefix, then the plan id): a large answer is
// sealed and kept once, not twice. A reference whose plan is gone (evicted, expired, or
// its store unreachable) is answered by the full path.
func (s *Server) respondExact(w http.ResponseWriter, r *http.Request, route string, body []byte, offersText bool,
	compute func(ctx context.Context, text bool, ref *string) (out []byte, planHit bool, err error)) error {
	text := offersText && wantsText(r)
	lookup, canRef := s.memo.(PlanLookup)
	full := func(ctx context.Context) (out []byte, planHit bool, ref string, err error) {
		// Only work that is not answered from the memo takes slots (admission.go).
		release, err := s.admit(ctx)
		if err != nil {
			return nil, false, "", err
		}
		defer release()
		out, planHit, err = compute(ctx, text, &ref)
		return out, planHit, ref, err
	}
	var fresh []byte
	var planHit bool
	stored, hit, err := s.memo.Do(r.Context(), exactKey(route, text, body), func(ctx context.Context) ([]byte, error) {
		out, h, ref, err := full(ctx)
		if err != nil {
			return nil, err
		}
		fresh, planHit = out, h
		if canRef && ref != "" {
			return append([]byte(refPrefix), ref...), nil
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	answer := stored
	switch id, isRef := bytes.CutPrefix(stored, []byte(refPrefix)); {
	case fresh != nil:
		answer = fresh // this request computed it
	case isRef:
		b, ok, lerr := lookup.Lookup(r.Context(), string(id))
		if lerr != nil || !ok {
			var ferr error
			if b, planHit, _, ferr = full(r.Context()); ferr != nil {
				return ferr
			}
			hit = false
		}
		answer = b
	}
	w.Header().Set("X-Cache", map[bool]string{true: "hit", false: "miss"}[hit || planHit])
	ct := "application/json"
	if text {
		ct = "text/plain; charset=utf-8"
	}
	writeBody(w, http.StatusOK, ct, answer)
	return nil
}

// refPrefix starts an exact-request memo entry that refers to a plan memo entry; no
// answer (JSON or a diagram) starts with a NUL byte.
const refPrefix = "\x00plan:"

// readBody reads r's body (capped by limitBody), mapping the cap to 413.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, emptyBody()
	}
	if bb, ok := r.Body.(*bufferedBody); ok {
		if body, ok := bb.take(); ok {
			return body, nil
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyTooLarge(mbe.Limit)
		}
		return nil, NewProblem(http.StatusBadRequest, slugInvalidJSON, "Malformed JSON", "could not read the request body: %v", err)
	}
	return body, nil
}
