package planner

import (
	"context"
	"testing"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustProfile(t testing.TB, name string) cost.Model {
	m, ok := cost.Profile(name)
	require.True(t, ok, name)
	return m
}

// TestNodeCuts: on a GPU model each axis that crosses nodes is cut where a node ends,
// whatever its prime factors; axes inside a node, axes whose stride spans whole nodes,
// axes that do not line up with nodes and TPU models get no cut.
func TestNodeCuts(t *testing.T) {
	cases := []struct {
		mesh, model string
		want        map[string]int
	}{
		{"x=80", "h100", map[string]int{"x": 10}},     // 10 nodes of 8: x:(10)8 is a node
		{"x=24", "h100", map[string]int{"x": 3}},      // 3 nodes
		{"x=40,y=2", "h100", map[string]int{"x": 10}}, // x's stride 2: 4 of x per node
		{"x=20,y=4", "b200", map[string]int{"x": 10}}, // stride 4: 2 of x per node
		{"x=8", "h100", nil},                          // one node
		{"a=10,b=8", "h100", nil},                     // b is a node, a's stride spans nodes
		{"x=12", "h100", nil},                         // 1.5 nodes: no boundary lines up
		{"x=80", "tpu-v5p", nil},                      // no nodes
		{"x=144", "gb200-nvl72", map[string]int{"x": 2}},
	}
	for _, c := range cases {
		t.Run(c.mesh+"/"+c.model, func(t *testing.T) {
			got := nodeCuts(mustMesh(t, c.mesh), mustProfile(t, c.model))
			assert.Equal(t, c.want, got)
		})
	}
}

// TestNodeCutsSpace: the planning space of an 80-rank axis on nodes of 8 has a run of
// atoms that is exactly one node (x:(10)8) and one that is the axis across nodes
// (x:(1)10); without nodes (tpu-v5p) the prime atoms put 5 minor-most and neither run
// exists. A cut that fits no common factorisation with the shardings' own boundaries
// is left out, never refused.
func TestNodeCutsSpace(t *testing.T) {
	m := mustMesh(t, "x=80")
	shape := []int64{80 * 1024, 64}
	node := sharding.AxisRef{Name: "x", Pre: 10, Size: 8, Of: 80}
	across := sharding.AxisRef{Name: "x", Pre: 1, Size: 10, Of: 80}
	isRun := func(sp *space, ref sharding.AxisRef) bool {
		ids := sp.atomsOf([]sharding.AxisRef{ref})
		n := 1
		for _, id := range ids {
			n *= sp.atoms[id].Size
		}
		return len(ids) > 0 && n == ref.Size
	}
	for _, c := range []struct {
		model string
		cut   bool
	}{{"h100", true}, {"tpu-v5p", false}} {
		r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Model: mustProfile(t, c.model),
			Source: mustSharding(t, m, shape, `[["x"], null]`), Target: mustSharding(t, m, shape, `[null, null]`)}
		for _, maxPrime := range []int{0, maxPrimeAtoms, completeMaxPrime} {
			sp, ok := reqSpace(r, true, maxPrime)
			require.True(t, ok)
			if maxPrime == 0 && !c.cut {
				continue // one whole-axis atom
			}
			assert.Equal(t, c.cut, isRun(sp, node), "%s maxPrime %d: %v", c.model, maxPrime, sp.atoms)
			assert.Equal(t, c.cut, isRun(sp, across), "%s maxPrime %d: %v", c.model, maxPrime, sp.atoms)
		}
	}
	// A power-of-two axis keeps its atoms and units: its prime split has the node's
	// boundary already.
	m16 := mustMesh(t, "x=16")
	r16 := &Request{Mesh: m16, Shape: []int64{1024}, ElemBits: 32, Model: mustProfile(t, "h100"),
		Source: mustSharding(t, m16, []int64{1024}, `[["x"]]`), Target: mustSharding(t, m16, []int64{1024}, `[null]`)}
	for _, maxPrime := range []int{0, completeMaxPrime} {
		cut, ok := reqSpace(r16, true, maxPrime)
		require.True(t, ok)
		plain, ok := newSpaceOf(m16, r16.Shape, 32, true, maxPrime, r16.Source, r16.Target)
		require.True(t, ok)
		assert.Equal(t, plain.atoms, cut.atoms)
	}
	// x:(1)16 and a cut at 10 share no factorisation: the shardings' boundary wins.
	r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Model: mustProfile(t, "h100"),
		Source: mustSharding(t, m, shape, `[["x:(1)16"], null]`), Target: mustSharding(t, m, shape, `[null, null]`)}
	sp, ok := reqSpace(r, true, completeMaxPrime)
	require.True(t, ok)
	assert.False(t, isRun(sp, node))
	assert.True(t, isRun(sp, sharding.AxisRef{Name: "x", Pre: 1, Size: 16, Of: 80}))
}

// TestNodeCutsPlan: on 10 nodes of 8 the planner can stop inside a node. Gathering a
// tensor sharded over all 80 ranks onto each node (the target keeps it sharded over
// the node's 8 GPUs, named only as x:(10)8) and then onward to replicated: the plans
// replay exactly and the cut's units carry the node-level state.
func TestNodeCutsPlan(t *testing.T) {
	m := mustMesh(t, "x=80")
	shape := []int64{640, 16}
	model := mustProfile(t, "h100")
	for _, tgt := range []string{`[["x:(10)8"], null]`, `[null, null]`, `[null, ["x"]]`} {
		r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Model: model,
			Source: mustSharding(t, m, shape, `[["x"], null]`), Target: mustSharding(t, m, shape, tgt)}
		p, err := Reshard(context.Background(), r)
		require.NoError(t, err, tgt)
		replay(t, p)
		assert.False(t, p.Summary.FullRematerialization, tgt)
		assert.GreaterOrEqual(t, p.Summary.TimeUS, p.Summary.TimeLowerBoundUS*(1-1e-9), tgt)
	}
}
