package cost

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// plainBranch is routeMax.run as it was before eliminate: the branch and bound from
// nothing, which is the largest sum over every assignment, added in level order.
func plainBranch(rm *routeMax, perHop func(axis int) float64) float64 {
	rm.setWeights(perHop)
	return rm.branchFrom(-1)
}

// randomDigits splits each axis of m into digits (sizes multiplying to the axis',
// weights in mixed radix, most significant first) and draws Src among digits of equal
// size.
func randomDigits(rng *rand.Rand, m *sharding.Mesh) DigitPermutation {
	var p DigitPermutation
	for i, a := range m.Axes {
		var parts []int
		for rest := a.Size; rest > 1; {
			f := rest
			for _, d := range []int{2, 3, 4} {
				if rest%d == 0 && rest > d && rng.IntN(2) == 0 {
					f = d
					break
				}
			}
			parts = append(parts, f)
			rest /= f
		}
		w := a.Size
		for _, s := range parts {
			w /= s
			p.Digits = append(p.Digits, Digit{Axis: i, Size: s, Weight: w})
		}
	}
	p.Src = make([]int, len(p.Digits))
	for k := range p.Src {
		p.Src[k] = k
	}
	for range 2 * len(p.Src) {
		x, y := rng.IntN(len(p.Src)), rng.IntN(len(p.Src))
		if p.Digits[p.Src[x]].Size == p.Digits[p.Src[y]].Size {
			p.Src[x], p.Src[y] = p.Src[y], p.Src[x]
		}
	}
	p.Bytes = 1024
	return p
}

// TestRouteMaxEliminationIsExact holds routeMax.run (max-plus elimination, then for
// latencies the branch and bound from just below its answer) to the branch and bound
// from nothing, bit for bit, on random digit permutations over coupled axes of every
// routed topology, with one and several latencies per hop.
func TestRouteMaxEliminationIsExact(t *testing.T) {
	defer func(n int) { eliminateAbove = n }(eliminateAbove)
	eliminateAbove = 0
	rng := rand.New(rand.NewPCG(7, 12))
	fabrics := routeMaxFabrics(t)
	axisSizes := []int{2, 3, 4, 6, 8, 12, 16}
	checked := 0
	for i := range 400 {
		m := randomMeshOf(t, rng, 2, 4, axisSizes)
		p := randomDigits(rng, m)
		f := fabrics[i%len(fabrics)]
		r := f.NewRouter(m)
		onAxis := make([][]int, len(m.Axes))
		require.True(t, r.digitsOnAxes(p, onAxis))
		sSet := make([]uint64, len(m.Axes))
		segmentSets(p, onAxis, sSet)
		var union uint64
		var axesOf []int
		for a := range m.Axes {
			if sSet[a] != 0 {
				union |= sSet[a]
				axesOf = append(axesOf, a)
			}
		}
		D := bitsOf(union, len(p.Digits))
		if len(axesOf) == 0 || assignments(p.Digits, D) > maxDigitEnum {
			continue
		}
		// Every axis with digits in one group (the coupled case and beyond: terms over
		// disjoint digits are maximised together too).
		requireRunIsBranch(t, r, p, onAxis, axesOf, D, fmt.Sprintf("%d %s %+v", i, m, p))
		checked++
	}
	require.Greater(t, checked, 300)
}

// routeMaxFabrics are one fabric per routed topology of ici, at latencies of 0.7 and 1
// per hop, with axes a1 and a3 on a one-way dcn ring.
func routeMaxFabrics(t *testing.T) []*Fabric {
	var fabrics []*Fabric
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "torus"} {
		for _, lat := range []string{"0.7", "1"} {
			fabrics = append(fabrics, mustResolve(t, fmt.Sprintf(`{"axis_links":{"a1":"dcn","a3":"dcn"},"links":{
				"ici":{"bandwidth_gbps":40,"latency_us":%s,"topology":%q},
				"dcn":{"bandwidth_gbps":5,"latency_us":3.3,"topology":"ring_uni"}}}`, lat, topo)).(*Fabric))
		}
	}
	return fabrics
}

// requireRunIsBranch holds routeMax.run over the group of axes (digits D) to the branch
// and bound from nothing, for hops and for latencies.
func requireRunIsBranch(t *testing.T, r *Router, p DigitPermutation, onAxis [][]int, axes, D []int, name string) {
	t.Helper()
	newRM := func() *routeMax {
		rm := &routeMax{r: r, p: p, onAxis: onAxis, axes: axes, digits: D, val: make([]int, len(p.Digits))}
		rm.prepare()
		return rm
	}
	for _, perHop := range []func(int) float64{
		func(int) float64 { return 1 },
		func(a int) float64 { return r.rt[a].lat },
	} {
		require.Equal(t, plainBranch(newRM(), perHop), newRM().run(perHop), name)
	}
}

// TestDigitPermutationMemoIsExact: a Router that prices many permutations of the same
// digits (its per-axis loads memoized, axisLoad) answers each as a fresh Router does,
// down to the busiest link's name. TestDigitPermutationPricingIsExact (planner) holds a
// fresh Router's answer to routing every transfer.
func TestDigitPermutationMemoIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var fabrics []*Fabric
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "torus"} {
		fabrics = append(fabrics, mustResolve(t, fmt.Sprintf(`{"axis_links":{"a1":"dcn"},"links":{
			"ici":{"bandwidth_gbps":40,"latency_us":0.7,"topology":%q},
			"dcn":{"bandwidth_gbps":5,"latency_us":3.3,"topology":"ring_bidi"}}}`, topo)).(*Fabric))
	}
	axisSizes := []int{2, 4, 6, 8, 16}
	hits := 0
	for i := range 60 {
		m := randomMeshOf(t, rng, 2, 4, axisSizes)
		f := fabrics[i%len(fabrics)]
		shared := f.NewRouter(m)
		p := randomDigits(rng, m)
		for j := range 30 {
			q := p
			q.Src = slices.Clone(p.Src)
			for range len(q.Src) {
				x, y := rng.IntN(len(q.Src)), rng.IntN(len(q.Src))
				if q.Digits[q.Src[x]].Size == q.Digits[q.Src[y]].Size {
					q.Src[x], q.Src[y] = q.Src[y], q.Src[x]
				}
			}
			q.Bytes = int64(1+rng.IntN(2)) << 10
			before := len(shared.axisLoads)
			got, ok1 := shared.PriceDigitPermutation(q)
			want, ok2 := f.NewRouter(m).PriceDigitPermutation(q)
			name := fmt.Sprintf("%d/%d %s %+v", i, j, m, q)
			require.Equal(t, ok2, ok1, name)
			require.Equal(t, want.Estimate, got.Estimate, name)
			require.Equal(t, want.MaxLinkBytes, got.MaxLinkBytes, name)
			require.Equal(t, want.MaxHops, got.MaxHops, name)
			require.Equal(t, want.Bytes, got.Bytes, name)
			require.Equal(t, want.Resource(), got.Resource(), name)
			if len(shared.axisLoads) == before {
				hits++
			}
		}
	}
	require.Greater(t, hits, 300, "the memo answers")
}
