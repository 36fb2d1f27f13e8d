package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/shardplan/shardplan/internal/cache"
	"github.com/shardplan/shardplan/internal/sharding"
)

// plan godoc
//
//	@Summary		Fetch a memoized plan (permalink)
//	@Description	Returns the response of an earlier POST /v1/reshard by its `plan_id` (the SHA-256 hex of the canonical request), byte for byte, while it is in the plan cache: plans are kept for SHARDPLAN_CACHE_TTL (in-process, or in Redis shared by every replica when REDIS_URL is set). 404 once it has expired or been evicted; POST the request again to recompute it.
//	@Tags			reshard
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			plan_id	path		string	true	"plan id: 64 lowercase hex digits"	minlength(64)	maxlength(64)
//	@Success		200		{object}	ReshardResponse
//	@Header			200		{string}	X-Cache	"always hit"
//	@Failure		400		{object}	Problem	"malformed plan id"
//	@Failure		404		{object}	Problem	"no memoized plan with this id"
//	@Failure		401		{object}	Problem	"no or a wrong API key (when SHARDPLAN_API_KEYS is set)"
//	@Failure		429		{object}	Problem	"over the per-client rate limit (SHARDPLAN_RATE_LIMIT; Retry-After)"
//	@Failure		503		{object}	Problem	"overloaded, timed out, or the plan store (Redis) is unavailable (with Retry-After)"
//	@Router			/v1/plans/{plan_id} [get]
func (s *Server) plan(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "plan_id")
	if !cache.ValidPlanID(id) {
		return Invalid(slugInvalidRequest, "Invalid plan id",
			sharding.Fieldf("plan_id", "%q is not a plan id: want the 64 lowercase hex digits of a response's plan_id", truncate(id, 80)))
	}
	if pl, ok := s.memo.(PlanLookup); ok {
		body, ok, err := pl.Lookup(r.Context(), id)
		switch {
		case err != nil && r.Context().Err() != nil:
			return r.Context().Err()
		case err != nil:
			p := NewProblem(http.StatusServiceUnavailable, slugStoreUnavailable, "Plan store unavailable",
				"the plan store cannot be read now, so whether plan %s exists is unknown; retry after the Retry-After seconds, or POST the request to /v1/reshard again to recompute it", id).
				WithHeader("Retry-After", strconv.Itoa(storeRetryAfterSeconds))
			p.cause = err // logged, never sent
			return p
		case ok:
			w.Header().Set("X-Cache", "hit")
			writeBody(w, http.StatusOK, "application/json", planEntryBody(body))
			return nil
		}
	}
	kept := "SHARDPLAN_CACHE_TTL"
	if t, ok := s.memo.(interface{ TTL() time.Duration }); ok {
		kept = fmt.Sprintf("SHARDPLAN_CACHE_TTL (%s)", t.TTL())
	}
	return NewProblem(http.StatusNotFound, slugNotFound, "Plan not found",
		"no memoized plan with id %s; plans are kept for %s, POST the request to /v1/reshard again to recompute it", id, kept)
}

// storeRetryAfterSeconds is the Retry-After of a permalink whose store is unavailable.
const storeRetryAfterSeconds = 2

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
