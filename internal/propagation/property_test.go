package propagation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPropertiesOnRandomGraphs(t *testing.T) {
	meshes := []string{"a=2,b=2,c=4", "a=4,b=2", "a=8", "a=3,b=2"}
	for seed := range 120 {
		for _, strategy := range []string{Aggressive, Basic} {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			m := testMesh(t, meshes[seed%len(meshes)])
			g := randomGraph(t, rng, m, 5+rng.IntN(40))
			opts := Options{ConflictResolution: strategy, OpPriority: seed%3 != 0}
			name := fmt.Sprintf("seed%d/%s", seed, strategy)
			res, err := Propagate(context.Background(), g, m, opts)
			require.NoError(t, err, name)
			checkResult(t, name, g, m, res)
			// Propagating again from the result changes nothing.
			g2 := &Graph{Tensors: map[string]*Tensor{}, Ops: g.Ops}
			for n, tt := range g.Tensors {
				sh := res.Shardings[n]
				g2.Tensors[n] = &Tensor{Shape: tt.Shape, ElemBits: tt.ElemBits, Sharding: &sh}
			}
			res2, err := Propagate(context.Background(), g2, m, opts)
			require.NoError(t, err, name)
			for n := range g.Tensors {
				if !assert.Equal(t, res.Shardings[n].Body(), res2.Shardings[n].Body(), "%s: %s changed on a second run", name, n) {
					return
				}
			}
		}
	}
}

func checkResult(t *testing.T, name string, g *Graph, m *sharding.Mesh, res *Result) {
	t.Helper()
	for n, tt := range g.Tensors {
		got, ok := res.Shardings[n]
		require.True(t, ok, "%s: no sharding for %s", name, n)
		// every invariant: re-parse the printed form against the mesh and shape
		_, err := sharding.ParseText(got.Body(), m, tt.Shape, n)
		require.NoError(t, err, "%s: %s = %s", name, n, got.Body())
		if tt.Sharding == nil {
			continue
		}
		ann := *tt.Sharding
		for d, ad := range ann.Dims {
			gd := got.Dims[d]
			if !ad.Open {
				assert.Equal(t, ad.Axes, gd.Axes, "%s: closed dim %d of %s changed", name, d, n)
			} else {
				assert.True(t, isPrefixOrEqual(ad.Axes, gd.Axes), "%s: open dim %d of %s lost axes: %v -> %v", name, d, n, ad.Axes, gd.Axes)
			}
			for _, a := range gd.Axes {
				for _, r := range ann.Replicated {
					assert.False(t, a.Overlaps(r), "%s: %s uses replicated axis %s", name, n, r)
				}
			}
		}
		assert.Equal(t, ann.Replicated, got.Replicated, "%s: %s replicated set", name, n)
	}
	for _, rs := range res.Reshards {
		shape := g.Tensors[rs.Tensor].Shape
		for _, s := range []sharding.Sharding{rs.From, rs.To} {
			_, err := sharding.ParseText(s.Body(), m, shape, "reshard")
			require.NoError(t, err, "%s: reshard %s of %s: %s", name, rs.Op, rs.Tensor, s.Body())
		}
		assert.False(t, rs.From.SameLayout(rs.To), "%s: no-op reshard", name)
	}
	for _, red := range res.Reductions {
		assert.NotEmpty(t, red.Axes, name)
	}
}

// TestSettledSkipChangesNothing: skipping the visits of settled nodes (a node whose last
// visit changed nothing, with no tensor changed since and the same directions) gives
// the same shardings, explanations and statistics as projecting every visit, on random
// graphs under every strategy, with and without op priorities (dropping the skip's
// direction check fails it).
func TestSettledSkipChangesNothing(t *testing.T) {
	meshes := []string{"a=2,b=2,c=4", "a=4,b=2", "a=8", "a=3,b=2"}
	for seed := range 80 {
		for _, strategy := range []string{Aggressive, Basic, BasicThenAggressive} {
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			m := testMesh(t, meshes[seed%len(meshes)])
			g := randomGraph(t, rng, m, 5+rng.IntN(60))
			opts := Options{ConflictResolution: strategy, OpPriority: seed%3 != 0}
			name := fmt.Sprintf("seed%d/%s/priority=%v", seed, strategy, opts.OpPriority)
			fast, err := Propagate(context.Background(), g, m, opts)
			require.NoError(t, err, name)
			opts.revisitSettled = true
			full, err := Propagate(context.Background(), g, m, opts)
			require.NoError(t, err, name)
			require.Equal(t, full, fast, name)
		}
	}
}
