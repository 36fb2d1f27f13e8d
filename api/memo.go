package api

import (
	"context"
	"net/http"
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
// returns the bytes memoized under the plan id, false when absent, expired, malformed or
// when the store fails. A Memo without it (NopMemo) answers 404 to every plan id.
// *cache.Cache implements both.
type PlanLookup interface {
	Lookup(ctx context.Context, planID string) ([]byte, bool)
}

// NopMemo memoizes nothing: every call computes.
type NopMemo struct{}

// Do runs compute.
func (NopMemo) Do(ctx context.Context, _ string, compute func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	b, err := compute(ctx)
	return b, false, err
}

var _ Memo = NopMemo{}

// respondMemo answers 200 with the memoized JSON encoding of compute's result under key,
// setting X-Cache: hit|miss. Handlers of cacheable endpoints return it.
func (s *Server) respondMemo(w http.ResponseWriter, r *http.Request, key string, compute func(context.Context) (any, error)) error {
	body, hit, err := s.memo.Do(r.Context(), key, func(ctx context.Context) ([]byte, error) {
		v, err := compute(ctx)
		if err != nil {
			return nil, err
		}
		return encodeJSON(v)
	})
	if err != nil {
		return err
	}
	if hit {
		w.Header().Set("X-Cache", "hit")
	} else {
		w.Header().Set("X-Cache", "miss")
	}
	writeBody(w, http.StatusOK, "application/json", body)
	return nil
}
