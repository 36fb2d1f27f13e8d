package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// problem is one random reshard of TestPlansReplayOnRandomProblems.
type problem struct {
	mesh     *sharding.Mesh
	shape    []int64
	src, tgt sharding.Sharding
}

// randomProblems draws n seeded random reshards (meshes of up to 64 devices, ranks 1-3,
// small and uneven dims, some partial sums); TestPlansReplayOnRandomProblems and
// TestAStarMatchesDijkstra share them.
func randomProblems(t *testing.T, n int) []problem {
	rng := rand.New(rand.NewPCG(7, 11))
	out := make([]problem, 0, n)
	for range n {
		m := randomMesh(t, rng, 64)
		rank := 1 + rng.IntN(3)
		shape := make([]int64, rank)
		for d := range shape {
			shape[d] = int64(1 + rng.IntN(12))
		}
		pieces := randomPieces(rng, m)
		src := randomSharding(rng, m, rank, pieces, rng.IntN(4) == 0)
		tgt := randomSharding(rng, m, rank, randomPieces(rng, m), false)
		if len(src.Unreduced) > 0 && rng.IntN(2) == 0 {
			free := true
			for _, a := range tgt.UsedAxes() {
				if a.Overlaps(src.Unreduced[0]) {
					free = false
				}
			}
			if free {
				tgt.Unreduced = append(tgt.Unreduced, src.Unreduced[0])
			}
		}
		out = append(out, problem{m, shape, src, tgt})
	}
	return out
}

// TestAStarMatchesDijkstra is the checker of the A* heuristic: on the random problems
// (scaled up to realistic tensor sizes, where bandwidth terms matter) and on the corpus
// meshes, under models with a lower bound, planning with and without the heuristic
// gives plans of equal cost, and A* never expands more states than the budget allows
// Dijkstra.
func TestAStarMatchesDijkstra(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	tpu, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	h100, ok := cost.Profile("h100")
	require.True(t, ok)
	models := []struct {
		name  string
		model cost.Model
	}{{"uniform", cost.Uniform(100, 1)}, {"tpu-v5p", tpu}, {"h100", h100}, {"test", testModel{}}}
	n := underRace(300, 75)
	if !*long {
		n = 60
	}
	problems := randomProblems(t, n)
	var astar, dijkstra int
	for i, pb := range problems {
		for _, scale := range []int64{1, 1 << 10} {
			shape := make([]int64, len(pb.shape))
			for d, x := range pb.shape {
				shape[d] = x * scale
			}
			for _, md := range models {
				name := fmt.Sprintf("%d %s x%d %s %v %s->%s", i, md.name, scale, pb.mesh, shape, pb.src, pb.tgt)
				a := &Request{Mesh: pb.mesh, Shape: shape, ElemBits: 32, Source: pb.src, Target: pb.tgt, Model: md.model, MaxExpansions: 8000, allMoves: true, noComplete: true}
				d := *a
				d.noHeuristic = true
				pa, err := Reshard(context.Background(), a)
				require.NoError(t, err, name)
				pd, err := Reshard(context.Background(), &d)
				require.NoError(t, err, name)
				samePlanCost(t, name, pa, pd)
				astar += pa.Summary.SearchExpansions
				dijkstra += pd.Summary.SearchExpansions
			}
		}
	}
	// The benchmark grid: larger meshes, where the heuristic prunes the most.
	for _, g := range benchGrid {
		for _, md := range models {
			m := mustMesh(t, g.mesh)
			name := fmt.Sprintf("grid %s %s %v %s->%s", md.name, g.mesh, g.shape, g.src, g.tgt)
			a := &Request{Mesh: m, Shape: g.shape, ElemBits: 32, Source: mustSharding(t, m, g.shape, g.src), Target: mustSharding(t, m, g.shape, g.tgt), Model: md.model, MaxExpansions: 8000, allMoves: true, noComplete: true}
			d := *a
			d.noHeuristic = true
			pa, err := Reshard(context.Background(), a)
			require.NoError(t, err, name)
			pd, err := Reshard(context.Background(), &d)
			require.NoError(t, err, name)
			samePlanCost(t, name, pa, pd)
			astar += pa.Summary.SearchExpansions
			dijkstra += pd.Summary.SearchExpansions
		}
	}
	t.Logf("expansions: A* %d, Dijkstra %d; compared %d, cut by the budget %d", astar, dijkstra, compared, budgetCut)
	require.Greater(t, compared, 2*budgetCut, "most comparisons must run to completion")
}

// samePlanCost checks that the A* plan pa and the Dijkstra plan pd cost the same, and so
// do their search candidates (the search result may lose to another candidate, which
// would hide a difference in the final plans).
func samePlanCost(t *testing.T, name string, pa, pd *Plan) {
	t.Helper()
	if pa.search.ran && pd.search.ran && (!pa.search.exact || !pd.search.exact) {
		// A pass cut by its budget proves nothing; count it so the test notices when
		// budgets hide most of the comparisons.
		budgetCut++
		return
	}
	compared++
	// A search plan counts when it beats the plans that bound the search (it is a
	// candidate anyway, for its hybrids; the Dijkstra search has no weighted passes to
	// find a dearer one).
	search := func(p *Plan) (float64, bool) {
		for _, c := range p.Summary.Candidates {
			if c.Name == "search" && (!p.search.ran || p.search.cost < p.search.bound*(1-1e-9)) {
				return c.TimeUS, true
			}
		}
		return 0, false
	}
	// The searches agree on the cheapest path; merging adjacent permutes afterwards
	// never makes a plan dearer than that path.
	if _, found := search(pd); found && pa.search.ran && pd.search.ran {
		assert.InDelta(t, pd.search.cost, pa.search.cost, 1e-9*max(1, pd.search.cost), "%s: search cost", name)
	}
	assert.Equal(t, pd.Summary.FullRematerialization, pa.Summary.FullRematerialization, name)
	ta, oka := search(pa)
	td, okd := search(pd)
	require.Equal(t, okd, oka, "%s: search found a plan", name)
	if oka {
		assert.LessOrEqual(t, ta, pa.search.cost*(1+1e-9)+1e-9, "%s: A* plan after merging", name)
		assert.LessOrEqual(t, td, pd.search.cost*(1+1e-9)+1e-9, "%s: Dijkstra plan after merging", name)
	}
}

var compared, budgetCut int
