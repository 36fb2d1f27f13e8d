package planner

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// bruteHops is the hop bound by its definition: over every device q and every element
// e of q's goal tile that q lacks, the hop latency from the nearest device holding e in
// st; the largest of these.
func bruteHops(sp *space, hops []cost.AxisHop, st, goal state) float64 {
	m := sp.mesh
	n := m.NumDevices()
	coords := make([][]int, n)
	for dev := range n {
		c := make([]int, len(m.Axes))
		x := dev
		for i := len(m.Axes) - 1; i >= 0; i-- {
			c[i] = x % m.Axes[i].Size
			x /= m.Axes[i].Size
		}
		coords[dev] = c
	}
	// tile is dim d's range of the device under atom list ids.
	tile := func(dev, d int, ids []uint8) (int64, int64) {
		x := int64(0)
		for _, a := range ids {
			ref := sp.atoms[a]
			digit := coords[dev][m.AxisIndex(ref.Name)] / ref.Minor() % ref.Size
			x = x*int64(ref.Size) + int64(digit)
		}
		D := sp.shape[d]
		t := sharding.CeilDiv(D, int64(sp.count(ids)))
		return min(x*t, D), min((x+1)*t, D)
	}
	hopsBetween := func(p, q int) float64 {
		sum := 0.0
		for i, h := range hops {
			sum += h.LatencyUS * float64(h.Distance(coords[p][i], coords[q][i]))
		}
		return sum
	}
	rank := len(goal)
	worst := 0.0
	lo, hi, e := make([]int64, rank), make([]int64, rank), make([]int64, rank)
	for q := range n {
		empty := false
		for d := range rank {
			lo[d], hi[d] = tile(q, d, goal[d])
			empty = empty || lo[d] >= hi[d]
		}
		if empty {
			continue
		}
		copy(e, lo)
		for {
			nearest := -1.0
			for p := range n {
				holds := true
				for d := range rank {
					a, b := tile(p, d, st[d])
					if e[d] < a || e[d] >= b {
						holds = false
						break
					}
				}
				if x := hopsBetween(p, q); holds && (nearest < 0 || x < nearest) {
					nearest = x
				}
			}
			worst = max(worst, nearest)
			d := rank - 1
			for ; d >= 0; d-- {
				if e[d]++; e[d] < hi[d] {
					break
				}
				e[d] = lo[d]
			}
			if d < 0 {
				break
			}
		}
	}
	return worst
}

// clean reports whether every dim of st tiles evenly under both lists and their atom
// sizes agree position by position: where the hop bound's labels are exact.
func clean(sp *space, st, goal state) bool {
	for d, ids := range st {
		g := goal[d]
		if sp.shape[d]%int64(sp.count(ids)) != 0 || sp.shape[d]%int64(sp.count(g)) != 0 {
			return false
		}
		for k := range min(len(ids), len(g)) {
			if sp.atoms[ids[k]].Size != sp.atoms[g[k]].Size {
				return false
			}
		}
	}
	return true
}

// TestHopBoundMatchesDefinition holds the hop bound to its definition (bruteHops) on
// random states of small meshes, lines and wrapped rings (x=4,y=4,z=4 is whole cubes on
// tpu-v5p): never above it (the heuristic must stay a lower bound), and equal to it where
// the labels are exact. Both models plan on the same meshes and atoms, and one Memos
// keeps bounds across requests: a family that left the model out would answer one's
// bounds for the other (the test fails so).
func TestHopBoundMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 11))
	tpu, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	ring, err := cost.Resolve([]byte(`{"links":{"ici":{"bandwidth_gbps":45,"latency_us":0.5,"topology":"ring_uni"}}}`), "cost_model")
	require.NoError(t, err)
	meshes := []string{"x=4,y=2", "x=2,y=2,z=2", "x=8", "x=4,y=4,z=4", "x=2,y=3", "x=8,y=2"}
	n := 300
	if !*long {
		n = 60
	}
	memos := newTestMemos(t)
	exact, positive := 0, 0
	for i := range n {
		m, shape := randomMeshShape(t, rng, meshes, 2, []int64{4, 8, 16, 6, 3, 12})
		rank := len(shape)
		if m.NumDevices() > 16 && rank == 2 {
			shape[1] = 4 // keep the brute force small on 64 devices
		}
		src := randomSharding(rng, m, rank, randomPieces(rng, m), false)
		tgt := randomSharding(rng, m, rank, randomPieces(rng, m), false)
		model := cost.Model(tpu)
		if rng.IntN(4) == 0 {
			model = ring
		}
		sp, ok := newSpace(m, shape, 16, src, tgt)
		if !ok {
			continue
		}
		r := &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: src, Target: tgt, Model: model, Memos: memos}
		st, goal := sp.stateOf(src), sp.stateOf(tgt)
		hb := newHopBound(sp, r, goal)
		if hb == nil {
			continue
		}
		got := hb.dist(st)
		want := bruteHops(sp, model.(*cost.Fabric).AxisHops(m), st, goal)
		require.LessOrEqual(t, got, want+1e-9, "%d %s %v %s -> %s: bound above the definition", i, m, shape, src, tgt)
		if clean(sp, st, goal) {
			exact++
			require.InDelta(t, want, got, 1e-9, "%d %s %v %s -> %s: exact labels", i, m, shape, src, tgt)
		}
		if got > 0 {
			positive++
		}
	}
	t.Logf("cases %d, exact %d, positive %d", n, exact, positive)
	require.Greater(t, exact, n/4)
	require.Greater(t, positive, n/4)
	require.Positive(t, memos.Stats().HopHits, "requests met on families")
}
