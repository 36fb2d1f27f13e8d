package planner

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// hogReshard is a reshard whose steps route billions of transfers: a prime or
// near-prime axis of tens of thousands of devices, so no factorisation shortens the
// complete pass's exchanges (each routed transfer by transfer) or its all_gathers.
type hogReshard struct {
	name, mesh, src, tgt string
	shape                []int64
	effort               Effort
	remat                bool
	strategy             Strategy
}

var hogReshards = []hogReshard{
	{name: "x=65521 gather", mesh: "x=65521", shape: []int64{196563}, src: `[["x"]]`, tgt: `[null]`},
	{name: "x=65521 gather fast", mesh: "x=65521", shape: []int64{196563}, src: `[["x"]]`, tgt: `[null]`, effort: EffortFast},
	{name: "x=65521 gather remat", mesh: "x=65521", shape: []int64{196563}, src: `[["x"]]`, tgt: `[null]`, remat: true},
	{name: "x=32749 gather", mesh: "x=32749", shape: []int64{65498}, src: `[["x"]]`, tgt: `[null]`},
	{name: "x=2,y=32749 transpose", mesh: "x=2,y=32749", shape: []int64{65498}, src: `[["x","y"]]`, tgt: `[["y","x"]]`},
	{name: "x=2,y=32749 transpose fast", mesh: "x=2,y=32749", shape: []int64{65498}, src: `[["x","y"]]`, tgt: `[["y","x"]]`, effort: EffortFast},
	{name: "x=2,y=32749 transpose xla", mesh: "x=2,y=32749", shape: []int64{65498}, src: `[["x","y"]]`, tgt: `[["y","x"]]`, strategy: XLA},
}

func (h hogReshard) request(t testing.TB) *Request {
	t.Helper()
	m, err := sharding.ParseMeshString(h.mesh, "mesh")
	require.NoError(t, err)
	src, err := sharding.Parse(json.RawMessage(h.src), m, h.shape, "source")
	require.NoError(t, err)
	tgt, err := sharding.Parse(json.RawMessage(h.tgt), m, h.shape, "target")
	require.NoError(t, err)
	f, ok := cost.Profile(cost.DefaultProfile)
	require.True(t, ok)
	return &Request{Mesh: m, Shape: h.shape, ElemBits: 32, Source: src, Target: tgt, Model: f,
		Effort: h.effort, AllowFullRemat: h.remat, Memos: newTestMemos(t)}
}

// hogBudget is how long a cancelled plan may take to come back before the test calls
// it held: generous (a stopped request returns in milliseconds; one that does not stop
// runs for minutes), so no clock is raced.
const hogBudget = time.Minute

// returnsWithin runs fn on its own goroutine and fails the test when it has not
// returned within hogBudget; it returns fn's error.
func returnsWithin(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hogBudget):
		t.Fatalf("still planning %v after its context was cancelled", hogBudget)
		return nil
	}
}

// doneAfter is a cancelled context whose Err says nil the first live times it is asked:
// a deadline that passes once the work has started, without a clock.
type doneAfter struct {
	context.Context
	live atomic.Int64
}

func newDoneAfter(ctx context.Context, live int64) *doneAfter {
	c := &doneAfter{Context: ctx}
	c.live.Store(live)
	return c
}

func (c *doneAfter) Err() error {
	if c.live.Add(-1) >= 0 {
		return nil
	}
	return c.Context.Err()
}

// TestCancelledHogsReturnTheContextError: a reshard whose context is cancelled returns
// the context's error, and promptly, however many transfers its steps would route:
// the routers pricing its steps watch the context (cost.Router.Watch). Each request
// is planned with a context that is cancelled once planning has started, then its
// complete pass (where these inputs spent minutes routing) alone.
func TestCancelledHogsReturnTheContextError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, h := range hogReshards {
		t.Run(h.name, func(t *testing.T) {
			r := h.request(t)
			err := returnsWithin(t, func() error {
				// Both look at ctx before they start: let them start.
				if h.strategy == XLA {
					_, _, err := ReshardXLA(newDoneAfter(ctx, 1), r)
					return err
				}
				_, err := Reshard(newDoneAfter(ctx, 1), r)
				return err
			})
			require.ErrorIs(t, err, context.Canceled)
			if h.strategy == XLA {
				return
			}
			err = returnsWithin(t, func() error {
				rr := r.withMemos().withDone(ctx)
				rr.MaxExpansions = DefaultMaxExpansions
				_, _, err := completePass(ctx, rr, nil, 0)
				return err
			})
			assert.ErrorIs(t, err, context.Canceled)
		})
	}
}
