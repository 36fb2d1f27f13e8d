package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lookupMemo is a fakeMemo that also implements PlanLookup and reports a TTL.
type lookupMemo struct {
	fakeMemo
	down error // Lookup fails with it when set
}

func (l *lookupMemo) Lookup(_ context.Context, id string) ([]byte, bool, error) {
	if l.down != nil {
		return nil, false, l.down
	}
	b, ok := l.store[id]
	return b, ok, nil
}

func (l *lookupMemo) TTL() time.Duration { return time.Hour }

const planReq = `{"mesh":"x=2,y=4","shape":[64,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`

func TestPlanPermalink(t *testing.T) {
	memo := &lookupMemo{fakeMemo: fakeMemo{store: map[string][]byte{}}}
	s := newTestServer(t, func(d *Deps) { d.Memo = memo })

	rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "miss", rec.Header().Get("X-Cache"))
	var r struct {
		PlanID string `json:"plan_id"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	require.Len(t, r.PlanID, 64)

	got := do(t, s, http.MethodGet, "/v1/plans/"+r.PlanID, "", "")
	require.Equal(t, http.StatusOK, got.Code, got.Body.String())
	assert.Equal(t, "hit", got.Header().Get("X-Cache"))
	assert.Equal(t, "application/json", got.Header().Get("Content-Type"))
	assert.Equal(t, rec.Body.String(), got.Body.String(), "the permalink answers the same bytes")

	unknown := strings.Repeat("0", 64)
	p := requireProblem(t, do(t, s, http.MethodGet, "/v1/plans/"+unknown, "", ""), http.StatusNotFound, slugNotFound)
	assert.Contains(t, p.Detail, "no memoized plan with id "+unknown)
	assert.Contains(t, p.Detail, "SHARDPLAN_CACHE_TTL (1h0m0s)")

	for _, bad := range []string{"abc", strings.ToUpper(r.PlanID), r.PlanID + "0", strings.Repeat("g", 64)} {
		p := requireProblem(t, do(t, s, http.MethodGet, "/v1/plans/"+bad, "", ""), http.StatusBadRequest, slugInvalidRequest)
		assert.Contains(t, fields(p), "plan_id", bad)
	}
}

func TestPlanPermalinkWithoutLookup(t *testing.T) {
	s := newTestServer(t, nil) // NopMemo: nothing is kept
	p := requireProblem(t, do(t, s, http.MethodGet, "/v1/plans/"+strings.Repeat("a", 64), "", ""), http.StatusNotFound, slugNotFound)
	assert.Contains(t, p.Detail, "plans are kept for SHARDPLAN_CACHE_TTL")
}

func TestPlanPermalinkStoreUnavailable(t *testing.T) {
	memo := &lookupMemo{fakeMemo: fakeMemo{store: map[string][]byte{}}, down: errors.New("redis get: i/o timeout at 10.0.0.7:6379")}
	s := newTestServer(t, func(d *Deps) { d.Memo = memo })
	rec := do(t, s, http.MethodGet, "/v1/plans/"+strings.Repeat("a", 64), "", "")
	p := requireProblem(t, rec, http.StatusServiceUnavailable, slugStoreUnavailable)
	assert.Equal(t, "2", rec.Header().Get("Retry-After"))
	assert.Contains(t, p.Detail, "cannot be read now")
	assert.NotContains(t, rec.Body.String(), "10.0.0.7", "the store error is logged, not sent")
}

// TestExactMemoRefersToThePlan: with a memo that looks plans up, the exact-request memo
// keeps a reference to the plan memo's entry, not a second copy of the answer; a hit
// follows it; when the plan is gone or its store cannot be read, the full path answers
// the same bytes (and puts the plan back). Diagrams, which are not the plan's entry, and
// a memo that cannot look plans up keep the answer itself.
func TestExactMemoRefersToThePlan(t *testing.T) {
	memo := &lookupMemo{fakeMemo: fakeMemo{store: map[string][]byte{}}}
	s := newTestServer(t, func(d *Deps) { d.Memo = memo })
	first := do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	var r struct {
		PlanID string `json:"plan_id"`
	}
	require.NoError(t, json.Unmarshal(first.Body.Bytes(), &r))
	exact := exactKey("reshard", "application/json", []byte(planReq))
	assert.Equal(t, refPrefix+r.PlanID, string(memo.store[exact]), "the exact entry refers to the plan")
	assert.Equal(t, first.Body.String(), string(planEntryBody(memo.store[r.PlanID])), "the plan's entry holds the answer")

	hit := do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
	require.Equal(t, http.StatusOK, hit.Code)
	assert.Equal(t, "hit", hit.Header().Get("X-Cache"))
	assert.Equal(t, first.Body.String(), hit.Body.String())

	delete(memo.store, r.PlanID) // evicted
	again := do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
	require.Equal(t, http.StatusOK, again.Code, again.Body.String())
	assert.Equal(t, "miss", again.Header().Get("X-Cache"))
	assert.Equal(t, first.Body.String(), again.Body.String())
	assert.Equal(t, first.Body.String(), string(planEntryBody(memo.store[r.PlanID])), "the full path puts the plan back")

	memo.down = errors.New("redis get: i/o timeout")
	down := do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
	require.Equal(t, http.StatusOK, down.Code, down.Body.String())
	assert.Equal(t, first.Body.String(), down.Body.String())
	memo.down = nil

	req := httptest.NewRequest(http.MethodPost, "/v1/reshard", strings.NewReader(planReq))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/plain")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, rec.Body.String(), string(memo.store[exactKey("reshard", textMediaType, []byte(planReq))]), "a diagram is kept as it is")

	plain := &fakeMemo{store: map[string][]byte{}}
	s = newTestServer(t, func(d *Deps) { d.Memo = plain })
	first = do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
	require.Equal(t, http.StatusOK, first.Code)
	assert.Equal(t, first.Body.String(), string(plain.store[exact]), "without lookups the exact entry is the answer")
}
