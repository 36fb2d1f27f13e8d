package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/planner"
)

// TestPlannerMemoMetrics: the memos a server is given serve its requests, /metrics
// reports their sizes and lookups, and another server's memos are its own.
func TestPlannerMemoMetrics(t *testing.T) {
	memos := planner.NewMemos(planner.MemoLimits{})
	s := newTestServer(t, func(d *Deps) { d.PlannerMemos = memos })
	other := newTestServer(t, nil)

	reshard := `{"mesh": "x=4,y=4,z=4", "shape": [64, 64], "dtype": "f32", "source": ["x", "y"], "target": ["y", "x"], "cost_model": "tpu-v5p"}`
	for range 2 {
		require.Equal(t, http.StatusOK, do(t, s, http.MethodPost, "/v1/reshard", "application/json", reshard).Code)
	}
	st := memos.Stats()
	require.Positive(t, st.GroupBounds)
	require.Positive(t, st.GroupHits, "the second request finds the first's bounds")
	require.Positive(t, st.Cost.RouterHits+st.Cost.RouterMisses, "the reshard routes")

	body := do(t, s, http.MethodGet, "/metrics", "", "").Body.String()
	assert.Contains(t, body, fmt.Sprintf(`shardplan_planner_memo_entries{memo="group_bounds"} %d`, st.GroupBounds))
	assert.Contains(t, body, fmt.Sprintf(`shardplan_planner_memo_hits_total{memo="group_bounds"} %d`, st.GroupHits))
	assert.Contains(t, body, fmt.Sprintf(`shardplan_planner_memo_misses_total{memo="routers"} %d`, st.Cost.RouterMisses))
	for _, memo := range []string{"group_bounds", "hop_bounds", "routers", "digit_units"} {
		assert.Contains(t, body, `shardplan_planner_memo_entries{memo="`+memo+`"}`)
	}

	body = do(t, other, http.MethodGet, "/metrics", "", "").Body.String()
	assert.Contains(t, body, `shardplan_planner_memo_entries{memo="group_bounds"} 0`, "another server's memos are its own")
	assert.Contains(t, body, `shardplan_planner_memo_misses_total{memo="routers"} 0`)
}
