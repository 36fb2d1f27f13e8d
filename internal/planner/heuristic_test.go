package planner

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// bruteOverlap is E[ov] by definition: the average, over every assignment of coordinates
// to the atoms ids or g use, of the overlap of the two ranges those coordinates pick.
func bruteOverlap(sp *space, D int64, ids, g []uint8) float64 {
	var rel []uint8
	var seen uint64
	for _, a := range append(append([]uint8{}, ids...), g...) {
		if seen&(1<<a) == 0 {
			rel = append(rel, a)
			seen |= 1 << a
		}
	}
	coords := make([]int64, len(sp.atoms))
	index := func(l []uint8) int64 {
		v := int64(0)
		for _, a := range l {
			v = v*int64(sp.atoms[a].Size) + coords[a]
		}
		return v
	}
	ts, tt := sharding.CeilDiv(D, int64(sp.count(ids))), sharding.CeilDiv(D, int64(sp.count(g)))
	var sum, n float64
	var walk func(k int)
	walk = func(k int) {
		if k < len(rel) {
			for c := range int64(sp.atoms[rel[k]].Size) {
				coords[rel[k]] = c
				walk(k + 1)
			}
			return
		}
		x, y := index(ids), index(g)
		s0, t0 := min(x*ts, D), min(y*tt, D)
		if ov := min(s0+ts, t0+tt, D) - max(s0, t0); ov > 0 {
			sum += float64(ov)
		}
		n++
	}
	walk(0)
	return sum / n
}

// TestOverlapMatchesDefinition checks the heuristic's per-dim overlap (the closed form
// for nested tilings and the interval walk otherwise) against the definition, on random
// atom lists of sizes 2, 3 and 5 and on even and uneven dims.
func TestOverlapMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	sizes := []int{2, 2, 3, 2, 5, 2, 3}
	sp := &space{}
	for i, q := range sizes {
		sp.atoms = append(sp.atoms, sharding.AxisRef{Name: string(rune('a' + i)), Pre: 1, Size: q, Of: q})
	}
	pick := func() []uint8 {
		perm := rng.Perm(len(sizes))
		out := make([]uint8, 0, 4)
		for _, a := range perm[:rng.IntN(5)] {
			out = append(out, uint8(a))
		}
		return out
	}
	closed := 0
	for range 4000 {
		ids, g := pick(), pick()
		if rng.IntN(3) == 0 && len(ids) > 0 {
			g = append(g[:0:0], ids...) // share a prefix, then diverge
			g = g[:rng.IntN(len(g)+1)]
		}
		D := int64(1 + rng.IntN(400))
		if rng.IntN(2) == 0 {
			D = int64(sp.count(ids)*sp.count(g)) * int64(1+rng.IntN(3))
		}
		b := &bound{sp: sp}
		want := bruteOverlap(sp, D, ids, g)
		got := b.averageOverlap(D, ids, g)
		require.InDelta(t, want, got, 1e-9*math.Max(1, want), "walk D=%d ids=%v g=%v", D, ids, g)
		if v, ok := b.nestedOverlap(D, ids, g); ok {
			closed++
			require.InDelta(t, want, v, 1e-9*math.Max(1, want), "closed form D=%d ids=%v g=%v", D, ids, g)
		}
	}
	t.Logf("closed form applied to %d of 4000", closed)
}
