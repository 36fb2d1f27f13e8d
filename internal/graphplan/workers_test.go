package graphplan_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/api"
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/sharding"
)

// constraints is a graph of n sharding constraints on mesh x=4,y=4,z=4, each replicating
// a tensor of its own shape sharded over x, y and z: n distinct reshards.
func constraints(n int) string {
	var ts, ops []string
	for i := range n {
		ts = append(ts, fmt.Sprintf(`"a%d":{"shape":[%d],"dtype":"f32","sharding":[["x","y","z"]]},"b%d":{"shape":[%d],"dtype":"f32","sharding":[null]}`, i, 64*(i+1), i, 64*(i+1)))
		ops = append(ops, fmt.Sprintf(`{"name":"c%d","op":"sharding_constraint","operands":["a%d"],"results":["b%d"]}`, i, i, i))
	}
	return `{"tensors":{` + strings.Join(ts, ",") + `},"ops":[` + strings.Join(ops, ",") + `]}`
}

func constraintRequest(t *testing.T, n int) *graphplan.Request {
	t.Helper()
	m, err := sharding.ParseMeshString("x=4,y=4,z=4", "mesh")
	require.NoError(t, err)
	g, opts, err := api.DecodeGraph([]byte(constraints(n)), m)
	require.NoError(t, err)
	model, _ := cost.Profile(cost.DefaultProfile)
	return &graphplan.Request{Graph: g, Mesh: m, Options: opts, Model: model}
}

// TestWorkersAreLent: Workers asks the lender for the cores that would help beyond the
// caller's (one per distinct reshard, at most GOMAXPROCS in all) and uses what it lends.
func TestWorkersAreLent(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name       string
		jobs, lend int
		lender     bool
	}{
		{name: "no lender", jobs: 9},
		{name: "one job", jobs: 1, lender: true, lend: 3},
		{name: "lends none", jobs: 9, lender: true},
		{name: "lends one", jobs: 9, lend: 1, lender: true},
		{name: "lends too many", jobs: 2, lend: 50, lender: true},
	} {
		helps := min(tc.jobs, procs) - 1 // the cores beyond the caller's that would help
		want, workers := -1, 1           // the cores asked for (-1: the lender is not asked)
		if tc.lender && helps > 0 {
			want, workers = helps, 1+min(tc.lend, helps)
		}
		t.Run(tc.name, func(t *testing.T) {
			asked, released := -1, 0
			var cores func(int) (int, func())
			if tc.lender {
				cores = func(want int) (int, func()) {
					asked = want
					return tc.lend, func() { released++ }
				}
			}
			w, release := graphplan.Workers(cores, tc.jobs)
			assert.Equal(t, workers, w)
			assert.Equal(t, want, asked)
			release()
			if asked >= 0 {
				assert.Equal(t, 1, released, "the lent cores go back once")
			}
		})
	}
}

// TestPlanGivesBackTheCoresItIsLent: a graph planned on lent cores gives every one back
// and plans as it does on one.
func TestPlanGivesBackTheCoresItIsLent(t *testing.T) {
	r := constraintRequest(t, 12)
	one, err := graphplan.Plan(context.Background(), r)
	require.NoError(t, err)
	require.Equal(t, 12, one.Summary.UniquePlans)
	lent, back := 0, 0
	r.Cores = func(want int) (int, func()) {
		lent += want
		return want, func() { back += want }
	}
	many, err := graphplan.Plan(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, lent, back)
	assert.Equal(t, one.Summary, many.Summary)
}

// TestPlanStopsWhenItsContextEnds: a graph of 3,000 distinct reshards whose context is
// cancelled as its planning starts (by the lender, so no clock is raced) returns the
// context's error well within a generous budget (planning them all takes seconds).
func TestPlanStopsWhenItsContextEnds(t *testing.T) {
	r := constraintRequest(t, 3000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Cores = func(int) (int, func()) {
		cancel()
		return 0, func() {}
	}
	done := make(chan error, 1)
	go func() {
		_, err := graphplan.Plan(ctx, r)
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("still planning a minute after the context was cancelled")
	}
}
