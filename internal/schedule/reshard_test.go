package schedule

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// reshardCase is one random reshard and how it is planned.
type reshardCase struct {
	mesh     *sharding.Mesh
	meshText string
	shape    []int64
	src, tgt sharding.Sharding
	strategy planner.Strategy
	ops      []planner.Op
	model    string
}

func (c reshardCase) String() string {
	return fmt.Sprintf("%s %v %s -> %s (%s, ops %v, %s)", c.meshText, c.shape, c.src, c.tgt, c.strategy, c.ops, c.model)
}

// opSets are the allowed ops the random cases are planned under: all of them, and sets
// that force permutes, all_to_all_v and all-to-alls.
var opSets = [][]planner.Op{
	nil,
	{planner.OpSlice, planner.OpAllGather, planner.OpAllToAll, planner.OpReduceScatter, planner.OpAllReduce},
	{planner.OpSlice, planner.OpCollectivePermute, planner.OpAllGather, planner.OpAllReduce},
	{planner.OpSlice, planner.OpAllToAllV, planner.OpAllReduce},
}

// randomReshard draws a reshard on a mesh of 2 to 16 devices: axes of sizes 2 and 4,
// each axis (or, for a size-4 axis, one half) on a random dim or none, the source
// sometimes with a partial sum that the target sometimes keeps, dims often uneven.
func randomReshard(rng *rand.Rand) reshardCase {
	meshes := []string{"x=2,y=2", "x=4,y=2", "x=2,y=2,z=2", "x=8", "x=4,y=4", "x=2,y=4,z=2", "x=4"}
	for {
		text := meshes[rng.IntN(len(meshes))]
		m, err := sharding.ParseMeshString(text, "mesh")
		if err != nil {
			panic(err)
		}
		rank := 1 + rng.IntN(3)
		shape := make([]int64, rank)
		for d := range shape {
			if rng.IntN(3) == 0 {
				shape[d] = int64(1 + rng.IntN(13))
			} else {
				shape[d] = int64(m.NumDevices() * (1 + rng.IntN(2)))
			}
		}
		src := randomSharding(rng, m, rank, true)
		tgt := randomSharding(rng, m, rank, false)
		if len(src.Unreduced) > 0 && rng.IntN(3) == 0 {
			keep := src.Unreduced[0]
			if !slices.ContainsFunc(tgt.UsedAxes(), func(a sharding.AxisRef) bool { return a.Name == keep.Name }) {
				tgt.Unreduced = []sharding.AxisRef{keep}
			}
		}
		if src.SameLayout(tgt) {
			continue
		}
		c := reshardCase{mesh: m, meshText: text, shape: shape, src: src, tgt: tgt, strategy: planner.Optimal, model: []string{"tpu-v5p", "h100"}[rng.IntN(2)]}
		if rng.IntN(4) == 0 {
			c.strategy = planner.XLA
		} else {
			c.ops = opSets[rng.IntN(len(opSets))]
		}
		return c
	}
}

func randomSharding(rng *rand.Rand, m *sharding.Mesh, rank int, withUnreduced bool) sharding.Sharding {
	s := sharding.Replicated(rank)
	for _, i := range rng.Perm(len(m.Axes)) {
		ax := m.Axes[i]
		ref := sharding.FullAxis(ax)
		if ax.Size == 4 && rng.IntN(3) == 0 {
			ref = ref.Sub(1+rng.IntN(2), 2) // the major or the minor half
		}
		switch k := rng.IntN(rank + 2); {
		case k < rank:
			s.Dims[k].Axes = append(s.Dims[k].Axes, ref)
		case k == rank && withUnreduced && len(s.Unreduced) == 0 && rng.IntN(2) == 0:
			s.Unreduced = append(s.Unreduced, ref)
		}
	}
	for d := range s.Dims {
		s.Dims[d].Axes = sharding.MergeAdjacent(s.Dims[d].Axes)
	}
	return s
}

// planCase plans c; ok is false when its allowed ops admit no plan.
func planCase(t testing.TB, c reshardCase) (*planner.Plan, bool) {
	model, ok := cost.Profile(c.model)
	require.True(t, ok, c.model)
	r := &planner.Request{Mesh: c.mesh, Shape: c.shape, ElemBits: 32, Source: c.src, Target: c.tgt, Model: model, AllowedOps: c.ops, Effort: planner.EffortFast}
	p, _, err := planner.ReshardWith(context.Background(), c.strategy, r)
	if err != nil {
		return nil, false
	}
	return p, true
}

// contributor is device id's partial sum of s: its coordinates on s's unreduced axes,
// mixed radix.
func contributor(m *sharding.Mesh, s sharding.Sharding, id int) int {
	c := m.Coords(m.PositionOf(id), nil)
	k := 0
	for _, r := range s.Unreduced {
		k = k*r.Size + r.Coord(c[m.AxisIndex(r.Name)])
	}
	return k
}

// wantParts is the partial sums device id's target tile adds up: those of every source
// device that agrees with it on the target's unreduced axes.
func wantParts(m *sharding.Mesh, src, tgt sharding.Sharding, id int) uint64 {
	c := m.Coords(m.PositionOf(id), nil)
	var out uint64
	for d := range m.NumDevices() {
		e := m.Coords(m.PositionOf(d), nil)
		same := true
		for _, r := range tgt.Unreduced {
			a := m.AxisIndex(r.Name)
			same = same && r.Coord(c[a]) == r.Coord(e[a])
		}
		if same {
			out |= 1 << contributor(m, src, d)
		}
	}
	return out
}

// runReshard runs s, the schedule of p, on symbolic tensors and fails unless every rank
// ends with exactly its target tile, every partial sum its target keeps added once.
func runReshard(t *testing.T, p *planner.Plan, s *Schedule) {
	t.Helper()
	r := p.Request
	m := r.Mesh
	states := map[int]state{}
	for _, rk := range s.Ranks {
		require.Len(t, rk.Phases, len(p.Steps))
		states[rk.Rank] = state{{0, BufTile, 0}: fill(rk.Buffers[0].Global, r.Shape, 1<<contributor(m, r.Source, rk.Rank))}
	}
	for i := range p.Steps {
		require.NoError(t, runPhase(s, states, func(r *Rank) *Phase { return &r.Phases[i] }), "step %d (%s)", i, p.Steps[i].Op)
		for _, rk := range s.Ranks {
			tile := states[rk.Rank][bufKey{0, BufTile, 0}]
			require.NoError(t, tile.check(r.Shape, 0, false), "step %d (%s): rank %d's tile", i, p.Steps[i].Op, rk.Rank)
		}
	}
	tl := sharding.NewLayout(m, r.Shape, r.Target)
	for _, rk := range s.Ranks {
		tile := states[rk.Rank][bufKey{0, BufTile, 0}]
		require.Equal(t, tileBox(tl, rk.Rank), tile.at, "rank %d ends with its target tile", rk.Rank)
		require.NoError(t, tile.check(r.Shape, wantParts(m, r.Source, r.Target, rk.Rank), true), "rank %d's target tile", rk.Rank)
	}
}

// kindOf names a step's kind (a halo collective_permute apart).
func kindOf(st *planner.Step) string {
	if st.Halo != nil {
		return "halo"
	}
	return string(st.Op)
}

// TestReshardReplay runs the schedules of random reshard plans (every strategy, several
// allowed-op sets, uneven dims, partial sums) on symbolic tensors: every rank ends with
// exactly its target tile, and every step kind occurs.
func TestReshardReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 1))
	kinds := map[string]int{}
	n := 400
	if testing.Short() {
		n = 100
	}
	for i := 0; i < n; i++ {
		c := randomReshard(rng)
		p, ok := planCase(t, c)
		if !ok {
			continue
		}
		s, err := Reshard(context.Background(), p)
		require.NoError(t, err, "%d: %s", i, c)
		for k := range p.Steps {
			kinds[kindOf(&p.Steps[k])]++
		}
		if !t.Run(fmt.Sprint(i), func(t *testing.T) { runReshard(t, p, s) }) {
			t.Fatalf("%d: %s: plan %v", i, c, describe(p))
		}
	}
	t.Logf("step kinds replayed: %v", kinds)
	for _, k := range []string{"slice", "all_gather", "all_to_all", "collective_permute", "halo", "all_to_all_v", "reduce_scatter", "all_reduce"} {
		require.Positive(t, kinds[k], "no %s step among the random plans", k)
	}
}

func describe(p *planner.Plan) []string {
	var out []string
	for _, st := range p.Steps {
		out = append(out, fmt.Sprintf("%s%v %s->%s", kindOf(&st), st.MeshAxes, st.Before, st.After))
	}
	return out
}
