package planner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// newTestMemos is a test's own memos: what it plans is not warmed by another test, and
// what it counts is its own.
func newTestMemos(tb testing.TB) *Memos {
	tb.Helper()
	return NewMemos(MemoLimits{})
}

// TestMemosWhateverTheyHold: the random set's first reshards plan alike without memos
// (each call its own), with the zero value, with shared memos cold and warm, and with
// memos bounded so tightly that they start over all the time; the bounded memos stay
// within their limits, the shared ones serve the second round, and a request without
// memos is left without.
func TestMemosWhateverTheyHold(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	set := randomSet(t)[:underRace(24, 12)]
	f, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	plan := func(pb problem, m *Memos) string {
		r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f, Memos: m}
		p, err := Reshard(context.Background(), r)
		require.NoError(t, err)
		require.Same(t, m, r.Memos, "the caller's request keeps its memos")
		return planFingerprint(p)
	}
	shared := newTestMemos(t)
	tight := NewMemos(MemoLimits{GroupBounds: 1, HopBounds: 8, HopFamilies: 1,
		Cost: cost.CacheLimits{Routers: 1, RouterMemo: 4, Units: 8, UnitKeys: 1}})
	for round := range 2 {
		for i, pb := range set {
			want := plan(pb, nil)
			assert.Equal(t, want, plan(pb, &Memos{}), "case %d: zero value", i)
			assert.Equal(t, want, plan(pb, shared), "case %d round %d: shared", i, round)
			assert.Equal(t, want, plan(pb, tight), "case %d round %d: tight", i, round)
		}
	}
	st := shared.Stats()
	assert.Positive(t, st.GroupBounds)
	assert.Positive(t, st.GroupHits)
	assert.Positive(t, st.HopBounds)
	assert.Positive(t, st.HopHits)
	assert.Positive(t, st.Cost.RouterHits)
	assert.Positive(t, st.Cost.IdleRouters)
	assert.Positive(t, st.Cost.Units)
	assert.Positive(t, st.Cost.UnitHits)

	st = tight.Stats()
	assert.LessOrEqual(t, st.GroupBounds, 1)
	assert.LessOrEqual(t, st.HopBounds, 8)
	assert.LessOrEqual(t, st.HopFamilies, 1)
	assert.LessOrEqual(t, st.Cost.IdleRouters, 1)
	assert.LessOrEqual(t, st.Cost.Units, 8)
	assert.LessOrEqual(t, st.Cost.UnitKeys, 1)

	var none *Memos
	assert.Equal(t, MemoStats{}, none.Stats())
}
