package graphplan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/shardplan/shardplan/internal/planner"
)

// TestShareBudget: a reshard's planning budget is the request's, at most its share of
// the time left before the graph's planning end over the rounds the reshards not yet
// started take.
func TestShareBudget(t *testing.T) {
	s := time.Second
	cases := []struct {
		name             string
		budget, left     time.Duration
		hasEnd           bool
		pending, workers int
		want             time.Duration
	}{
		{"no budget", 0, 10 * s, true, 5, 1, 0},
		{"no end", 2 * s, 0, false, 100, 1, 2 * s},
		{"budget within the share", 2 * s, 10 * s, true, 1, 1, 2 * s},
		{"one round of two workers", 20 * s, 10 * s, true, 2, 2, 10 * s},
		{"five rounds", 20 * s, 10 * s, true, 5, 1, 2 * s},
		{"rounds round up", 20 * s, 9 * s, true, 5, 2, 3 * s},
		{"many reshards", 2 * s, 10 * s, true, 1000, 1, 10 * time.Millisecond},
		{"end passed", 2 * s, -s, true, 3, 1, 1},
		{"no pending or workers counted", 20 * s, 10 * s, true, 0, 0, 10 * s},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, shareBudget(tc.budget, tc.left, tc.hasEnd, tc.pending, tc.workers))
		})
	}
	// Reshards planned one after another (or two at a time), each spending its whole
	// share, end by the planning end.
	for _, workers := range []int{1, 2} {
		left, spent := 10*s, time.Duration(0)
		for pending := 41; pending > 0; pending -= workers {
			spent += shareBudget(planner.DefaultExhaustiveBudget, left-spent, true, pending, workers)
		}
		assert.LessOrEqual(t, spent, left, workers)
	}
}

// TestRequestBudget: effort exhaustive's default budget applies when the request names
// none.
func TestRequestBudget(t *testing.T) {
	assert.Equal(t, planner.DefaultExhaustiveBudget, (&Request{Effort: planner.EffortExhaustive}).budget())
	assert.Equal(t, 50*time.Millisecond, (&Request{Effort: planner.EffortExhaustive, PlanningBudget: 50 * time.Millisecond}).budget())
	assert.Equal(t, 50*time.Millisecond, (&Request{PlanningBudget: 50 * time.Millisecond}).budget())
	assert.Zero(t, (&Request{Effort: planner.EffortFast}).budget())
}
