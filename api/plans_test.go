package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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
