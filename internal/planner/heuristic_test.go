package planner

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
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

// TestPropertyCutBoundPerStep is the checker of the heuristic's cut bound: every step of
// every plan (the search's moves, the greedy plan's, the direct exchange and
// gather-then-slice) is priced at or above the cut bound of its own move, computed by
// the heuristic with the step's after state as the goal, and bound.moveTime (the lazy
// permutes' price from below) equals that bound. If one step were cheaper, the
// heuristic could overestimate a path through it. The meshes mix wrapped tori
// (tpu-v4's cube rule), lines, sub-axes and uneven dims.
func TestPropertyCutBoundPerStep(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	rng := rand.New(rand.NewPCG(12, 2026))
	models := map[string]cost.Model{}
	for _, name := range []string{"tpu-v5p", "tpu-v4", "tpu-v5e"} {
		f, ok := cost.Profile(name)
		require.True(t, ok)
		models[name] = f
	}
	meshes := []string{"x=4,y=4,z=4", "a=2,b=2,c=4,d=4,e=4", "x=8,y=8", "x=16,y=4", "x=4,y=2", "x=6,y=4", "x=2", "x=2,y=3"}
	n := underRace(400, 100)
	if !*long {
		n = 80
	}
	checked, cutting := 0, 0
	for i := range n {
		m, shape := randomMeshShape(t, rng, meshes, 3, []int64{64, 96, 100, 256, 1024, 12, 9, 7})
		rank := len(shape)
		src := randomSharding(rng, m, rank, randomPieces(rng, m), false)
		tgt := randomSharding(rng, m, rank, randomPieces(rng, m), false)
		for name, model := range models {
			r := &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: src, Target: tgt, Model: model}
			p, err := Reshard(context.Background(), r)
			if err != nil {
				continue
			}
			for _, c := range append([]*Plan{p}, p.candidates...) {
				for k, st := range c.Steps {
					if st.before == nil || st.after == nil || st.Op == OpSlice {
						continue
					}
					b := newBound(c.sp, r, st.after)
					if b == nil {
						continue
					}
					checked++
					// moveTime (the lazy permutes' bound) computes the same bound with
					// the move's after state given rather than as the goal.
					mt, worst := b.moveTime(st.before, st.after), 0.0
					for ci := range b.cuts {
						if x := b.cutBytes(st.before, &b.cuts[ci]); x > 0 {
							worst = max(worst, b.combine(b.latMin, x/b.cuts[ci].bw))
						}
					}
					require.InDelta(t, worst, mt, 1e-9*max(1, worst), "%d %s: moveTime of %s step %d", i, name, c.name, k)
					for ci := range b.cuts {
						x := b.cutBytes(st.before, &b.cuts[ci])
						if x == 0 {
							continue
						}
						cutting++
						if st.Op == OpAllToAllV {
							// Not a search move: the direct exchange may take data from
							// another copy (the nearest replica), so one copy's bytes.
							x /= float64(m.NumDevices() / prodAtoms(c.sp))
						}
						want := b.combine(b.latMin, x/b.cuts[ci].bw)
						require.LessOrEqual(t, want, st.Cost.TimeUS*(1+1e-9)+1e-9,
							"%d %s %s %v %s->%s: %s step %d %s over %v priced %.4f below its cut bound %.4f (cut of %v)",
							i, name, m, shape, src, tgt, c.name, k, st.Op, st.MeshAxes, st.Cost.TimeUS, want, c.sp.atoms[b.cuts[ci].atom])
						if b.additive {
							// The additive heuristic sums one latency per step and the
							// bandwidth bounds over the path: each term must hold alone.
							require.GreaterOrEqual(t, st.Cost.LatencyUS*(1+1e-9)+1e-9, b.latMin, "%d %s: %s step %d latency", i, name, c.name, k)
							require.GreaterOrEqual(t, st.Cost.BandwidthUS*(1+1e-9)+1e-9, x/b.cuts[ci].bw,
								"%d %s %s %v %s->%s: %s step %d %s over %v: bandwidth %.4f below its cut bound %.4f",
								i, name, m, shape, src, tgt, c.name, k, st.Op, st.MeshAxes, st.Cost.BandwidthUS, x/b.cuts[ci].bw)
						}
					}
				}
			}
		}
	}
	t.Logf("steps checked %d, cut bounds that bite %d", checked, cutting)
	require.Greater(t, cutting, checked/10, "the cut bound must bite on a good share of the steps")
}

// randomMeshShape draws one of meshes and a shape of rank 1 to maxRank whose dims are
// drawn from dims.
func randomMeshShape(t testing.TB, rng *rand.Rand, meshes []string, maxRank int, dims []int64) (*sharding.Mesh, []int64) {
	m := mustMesh(t, meshes[rng.IntN(len(meshes))])
	shape := make([]int64, 1+rng.IntN(maxRank))
	for d := range shape {
		shape[d] = dims[rng.IntN(len(dims))]
	}
	return m, shape
}

func prodAtoms(sp *space) int {
	n := 1
	for _, a := range sp.atoms {
		n *= a.Size
	}
	return n
}

// TestCrossClosedFormMatchesWalk checks the cut bound's closed form for even, nested
// tilings against the interval walk, on random mixed-radix lists that share the cut's
// atom (size 2) at random positions; the walk itself is checked against every element
// on small dims.
func TestCrossClosedFormMatchesWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 4))
	sizes := []int64{2, 2, 3, 2, 5, 2}
	list := func() (count, stride int64) {
		n := rng.IntN(4)
		pos := rng.IntN(n + 1)
		count, stride = 1, 1
		for i := 0; i <= n; i++ {
			q := sizes[rng.IntN(len(sizes))]
			if i == pos {
				q = 2
			}
			count *= q
			if i > pos {
				stride *= q
			}
		}
		return count, stride
	}
	closed := 0
	for range 5000 {
		cs, sStride := list()
		ct, tStride := list()
		D := cs / gcd(cs, ct) * ct * int64(1+rng.IntN(3))
		if rng.IntN(4) == 0 {
			D = int64(1 + rng.IntN(300)) // uneven: the closed form must decline
		}
		walk := walkCross(D, cs, ct, sStride, tStride, 2)
		if D <= 2000 {
			var brute [2]int64
			ts, tt := sharding.CeilDiv(D, cs), sharding.CeilDiv(D, ct)
			for e := range D {
				h, tg := (e/ts/sStride)%2, (e/tt/tStride)%2
				switch {
				case h == 1 && tg == 0:
					brute[0]++
				case h == 0 && tg == 1:
					brute[1]++
				}
			}
			require.InDelta(t, float64(brute[0])/float64(D), walk[0], 1e-12, "walk D=%d cs=%d ct=%d", D, cs, ct)
			require.InDelta(t, float64(brute[1])/float64(D), walk[1], 1e-12, "walk D=%d cs=%d ct=%d", D, cs, ct)
		}
		if v, ok := nestedCross(D, cs, ct, sStride, tStride, 2); ok {
			closed++
			require.InDelta(t, walk[0], v[0], 1e-12, "closed D=%d cs=%d/%d ct=%d/%d", D, cs, sStride, ct, tStride)
			require.InDelta(t, walk[1], v[1], 1e-12, "closed D=%d cs=%d/%d ct=%d/%d", D, cs, sStride, ct, tStride)
		}
	}
	t.Logf("closed form applied to %d of 5000", closed)
	require.Greater(t, closed, 1000)
}

// TestTimeOverPrunesAsTime: the heuristic computed part by part (timeOver) prunes a state
// exactly when the whole bound does (g + time > ub), and gives the whole bound when it
// does not, on random states and incumbents of random reshards under models with cuts,
// hops, both modes and none.
func TestTimeOverPrunesAsTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 31))
	models := []cost.Model{testModel{}}
	for _, name := range []string{"tpu-v5p", "h100", "tpu-v4"} {
		f, ok := cost.Profile(name)
		require.True(t, ok)
		models = append(models, f)
	}
	maxMode, err := cost.Resolve([]byte(`{"base":"tpu-v5p","mode":"max"}`), "cost_model")
	require.NoError(t, err)
	models = append(models, maxMode)
	pruned, kept := 0, 0
	for i := range 300 {
		m, shape, src, tgt := randomReshard(t, rng, 2, 256, []int64{1, 16, 128})
		r := &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: src, Target: tgt, Model: models[rng.IntN(len(models))]}
		sp, ok := newSpace(m, shape, 16, src, tgt)
		if !ok {
			continue
		}
		b := newBound(sp, r, sp.stateOf(tgt))
		if b == nil {
			continue
		}
		for _, st := range []state{sp.stateOf(src), sp.stateOf(randomSharding(rng, m, len(shape), randomPieces(rng, m), false))} {
			whole := b.time(st)
			g := rng.Float64() * 10
			for _, ub := range []float64{g + whole*0.5, g + whole*0.999, g + whole, g + whole*1.001, g + whole*2, math.Inf(1)} {
				h, over := b.timeOver(st, g, ub)
				require.Equal(t, g+whole > ub, over, "%d %s %v %s -> %s: g %v ub %v whole %v", i, m, shape, src, tgt, g, ub, whole)
				if over {
					pruned++
					require.LessOrEqual(t, h, whole)
				} else {
					kept++
					require.Equal(t, whole, h)
				}
			}
		}
	}
	t.Logf("pruned %d, kept %d", pruned, kept)
	require.Greater(t, pruned, 100)
}
