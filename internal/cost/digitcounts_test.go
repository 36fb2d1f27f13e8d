package cost

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// randomExchangeDigits is randomDigits with free digits (axis -1) and, per axis digit,
// an image drawn among the digits of its size (so not always a permutation, as an
// exchange's holders are): the maps PriceDigitExchange prices.
func randomExchangeDigits(rng *rand.Rand, p DigitPermutation) DigitPermutation {
	free := rng.IntN(4)
	for range free {
		d := p.Digits[rng.IntN(len(p.Digits))]
		p.Digits = append(p.Digits, Digit{Axis: -1, Size: d.Size})
	}
	src := make([]int, len(p.Digits))
	for k, d := range p.Digits {
		src[k] = k
		if d.Axis < 0 || rng.IntN(3) == 0 {
			continue
		}
		var same []int
		for j, e := range p.Digits {
			if e.Size == d.Size {
				same = append(same, j)
			}
		}
		src[k] = same[rng.IntN(len(same))]
	}
	p.Src = src
	return p
}

// TestLineLoadsCountedIsTheEnumeration holds lineLoadsCounted to routing every transfer
// (lineLoadsRouted), bit for bit down to the busiest link's place and the transfers
// counted, on every axis of random digit permutations and exchanges of every routed
// topology, with starting busiest links from none to above every line's.
func TestLineLoadsCountedIsTheEnumeration(t *testing.T) {
	defer func(v bool) { countsAlways = v }(countsAlways)
	countsAlways = true
	rng := rand.New(rand.NewPCG(44, 9))
	var fabrics []*Fabric
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "torus"} {
		fabrics = append(fabrics, mustResolve(t, fmt.Sprintf(`{"axis_links":{"a1":"dcn"},"links":{
			"ici":{"bandwidth_gbps":40,"latency_us":0.7,"topology":%q},
			"dcn":{"bandwidth_gbps":5,"latency_us":3.3,"topology":"ring_uni"}}}`, topo)).(*Fabric))
	}
	axisSizes := []int{2, 3, 4, 5, 6, 8, 12, 16, 32, 64}
	counted, turned := 0, 0
	for i := range 1500 {
		m := randomMeshOf(t, rng, 1, 4, axisSizes)
		p := randomDigits(rng, m)
		if i%3 == 0 {
			p.Digits = binaryDigitsOrWhole(rng, m)
			p.Src = rng.Perm(len(p.Digits))
			for k := range p.Src { // a binary split keeps sizes; a whole axis maps to itself
				if p.Digits[p.Src[k]].Size != p.Digits[k].Size {
					p.Src[k] = k
				}
			}
		}
		if i%2 == 1 {
			p = randomExchangeDigits(rng, p)
		}
		r := fabrics[i%len(fabrics)].NewRouter(m)
		onAxis := make([][]int, len(m.Axes))
		if !r.digitsOnAxes(p, onAxis) {
			continue
		}
		sSet := make([]uint64, len(m.Axes))
		segmentSets(p, onAxis, sSet)
		for ax := range onAxis {
			if len(onAxis[ax]) == 0 {
				continue
			}
			S := bitsOf(sSet[ax], len(p.Digits))
			if assignments(p.Digits, S) > maxDigitEnum {
				continue
			}
			lSet := lineSet(p, onAxis, ax)
			wgt := float64(1 + rng.IntN(1000))
			for _, start := range []worstRes{{}, {time: 1e-9}, {time: 1e9}} {
				want, got := start, start
				wantCalls := lineLoadsRouted(&want, ax, p, onAxis[ax], S, lSet, r.rt[ax], wgt)
				gotCalls, ok := lineLoadsCounted(&got, ax, p, onAxis[ax], S, lSet, r.rt[ax], wgt)
				if !ok {
					continue
				}
				name := fmt.Sprintf("%d axis %d topology %d %s %+v", i, ax, r.rt[ax].topo, m, p)
				require.Equal(t, want, got, name)
				require.Equal(t, wantCalls, gotCalls, name)
				counted++
				if r.rt[ax].topo != line {
					turned++
				}
			}
		}
	}
	t.Logf("%d axis loads counted, %d on rings", counted, turned)
	require.Greater(t, counted, 500)
	require.Greater(t, turned, 300)
}

// binaryDigitsOrWhole splits each axis whose size is a power of two into binary digits
// (or, at random, keeps it whole), and keeps other axes whole.
func binaryDigitsOrWhole(rng *rand.Rand, m *sharding.Mesh) []Digit {
	var ds []Digit
	for i, a := range m.Axes {
		if a.Size&(a.Size-1) != 0 || rng.IntN(4) == 0 {
			ds = append(ds, Digit{Axis: i, Size: a.Size, Weight: 1})
			continue
		}
		for w := a.Size / 2; w >= 1; w /= 2 {
			ds = append(ds, Digit{Axis: i, Size: 2, Weight: w})
		}
	}
	return ds
}

// TestAxisLongestHopsIsTheEnumeration holds axisLongestHops to the branch and bound
// over every assignment (routeMax from nothing) on the single axes of random digit
// permutations and exchanges of every routed topology.
func TestAxisLongestHopsIsTheEnumeration(t *testing.T) {
	defer func(v bool) { countsAlways = v }(countsAlways)
	countsAlways = true
	rng := rand.New(rand.NewPCG(45, 10))
	var fabrics []*Fabric
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "torus"} {
		fabrics = append(fabrics, mustResolve(t, fmt.Sprintf(`{"links":{"ici":{"bandwidth_gbps":40,"latency_us":0.7,"topology":%q}}}`, topo)).(*Fabric))
	}
	axisSizes := []int{2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 64}
	checked := 0
	for i := range 1500 {
		m := randomMeshOf(t, rng, 1, 4, axisSizes)
		p := randomDigits(rng, m)
		if i%3 == 0 {
			p.Digits = binaryDigitsOrWhole(rng, m)
			p.Src = rng.Perm(len(p.Digits))
			for k := range p.Src {
				if p.Digits[p.Src[k]].Size != p.Digits[k].Size {
					p.Src[k] = k
				}
			}
		}
		if i%2 == 1 {
			p = randomExchangeDigits(rng, p)
		}
		r := fabrics[i%len(fabrics)].NewRouter(m)
		onAxis := make([][]int, len(m.Axes))
		if !r.digitsOnAxes(p, onAxis) {
			continue
		}
		sSet := make([]uint64, len(m.Axes))
		segmentSets(p, onAxis, sSet)
		for ax := range onAxis {
			D := bitsOf(sSet[ax], len(p.Digits))
			if len(onAxis[ax]) == 0 || assignments(p.Digits, D) > maxDigitEnum {
				continue
			}
			got, ok := r.axisLongestHops(p, onAxis[ax], D, ax)
			if !ok {
				continue
			}
			rm := &routeMax{r: r, p: p, onAxis: onAxis, axes: []int{ax}, digits: D, val: make([]int, len(p.Digits))}
			rm.prepare()
			want := plainBranch(rm, func(int) float64 { return 1 })
			require.Equal(t, want, float64(got), "%d axis %d topology %d %s %+v", i, ax, r.rt[ax].topo, m, p)
			checked++
		}
	}
	t.Logf("%d single-axis groups checked", checked)
	require.Greater(t, checked, 1000)
}

// TestAxisLoadExcludingCountedIsTheEnumeration holds axisLoadExcludingCounted to
// routing every transfer it keeps (axisLoadExcludingRouted), bit for bit down to the
// busiest link's place and the transfers counted, on every axis of random exchanges
// that leave out the transfers whose digits Same ties are equal, on every routed
// topology, at several byte counts.
func TestAxisLoadExcludingCountedIsTheEnumeration(t *testing.T) {
	defer func(v bool) { countsAlways = v }(countsAlways)
	countsAlways = true
	rng := rand.New(rand.NewPCG(46, 11))
	var fabrics []*Fabric
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "torus"} {
		fabrics = append(fabrics, mustResolve(t, fmt.Sprintf(`{"axis_links":{"a1":"dcn"},"links":{
			"ici":{"bandwidth_gbps":40,"latency_us":0.7,"topology":%q},
			"dcn":{"bandwidth_gbps":5,"latency_us":3.3,"topology":"ring_uni"}}}`, topo)).(*Fabric))
	}
	axisSizes := []int{2, 3, 4, 5, 6, 8, 12, 16, 32}
	counted, turned, leftOut := 0, 0, 0
	for i := range 1500 {
		m := randomMeshOf(t, rng, 1, 4, axisSizes)
		p := randomDigits(rng, m)
		if i%3 == 0 {
			p.Digits = binaryDigitsOrWhole(rng, m)
			p.Src = rng.Perm(len(p.Digits))
			for k := range p.Src {
				if p.Digits[p.Src[k]].Size != p.Digits[k].Size {
					p.Src[k] = k
				}
			}
		}
		p = randomExchangeDigits(rng, p)
		p.Same = make([]int, len(p.Digits))
		for k := range p.Same {
			switch rng.IntN(4) {
			case 0:
				p.Same[k] = -1
			case 1: // a digit of the same size
				j := rng.IntN(len(p.Digits))
				p.Same[k] = -1
				if p.Digits[j].Size == p.Digits[k].Size {
					p.Same[k] = j
				}
			default:
				p.Same[k] = p.Src[k]
			}
		}
		r := fabrics[i%len(fabrics)].NewRouter(m)
		onAxis := make([][]int, len(m.Axes))
		if !r.digitsOnAxes(p, onAxis) {
			continue
		}
		sSet := make([]uint64, len(m.Axes))
		segmentSets(p, onAxis, sSet)
		cls := classesOf(p)
		for ax := range onAxis {
			if len(onAxis[ax]) == 0 {
				continue
			}
			S := bitsOf(sSet[ax], len(p.Digits))
			lSet := lineSet(p, onAxis, ax)
			ex, ok := excludedOf(p, cls, S, lSet)
			if !ok {
				continue
			}
			mult := 1.0
			for k, d := range p.Digits {
				if (sSet[ax]|lSet)&(1<<k) == 0 {
					mult *= float64(d.Size)
				}
			}
			bytes := float64([]int{1, 3, 1024}[rng.IntN(3)])
			want := r.axisLoadExcludingRouted(ax, p, onAxis[ax], lSet, bytes, mult, ex)
			got, ok := r.axisLoadExcludingCounted(ax, p, onAxis[ax], S, lSet, bytes, mult, ex)
			if !ok {
				continue
			}
			require.Equal(t, want, got, "%d axis %d topology %d %s %+v mult %v left %v", i, ax, r.rt[ax].topo, m, p, mult, ex.left)
			counted++
			if r.rt[ax].topo != line {
				turned++
			}
			if len(ex.checks) > 0 {
				leftOut++
			}
		}
	}
	t.Logf("%d axis loads counted, %d on rings, %d with checks", counted, turned, leftOut)
	require.Greater(t, counted, 1000)
	require.Greater(t, turned, 700)
	require.Greater(t, leftOut, 500)
}

// TestMergedEliminationIsExact holds routeMax.run, whose elimination merges the digits
// its tables cannot tell apart (mergeDigits), to the branch and bound from nothing on
// random permutations and exchanges of binary digits over coupled axes, where runs of
// digits that map to runs merge.
func TestMergedEliminationIsExact(t *testing.T) {
	defer func(n int) { eliminateAbove = n }(eliminateAbove)
	eliminateAbove = 0
	rng := rand.New(rand.NewPCG(47, 12))
	var fabrics []*Fabric
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "torus"} {
		for _, lat := range []string{"0.7", "1"} {
			fabrics = append(fabrics, mustResolve(t, fmt.Sprintf(`{"axis_links":{"a1":"dcn"},"links":{
				"ici":{"bandwidth_gbps":40,"latency_us":%s,"topology":%q},
				"dcn":{"bandwidth_gbps":5,"latency_us":3.3,"topology":"ring_uni"}}}`, lat, topo)).(*Fabric))
		}
	}
	checked, merged := 0, 0
	for i := range 400 {
		m := randomMeshOf(t, rng, 2, 3, []int{2, 4, 8, 16})
		var p DigitPermutation
		p.Digits = binaryDigitsOrWhole(rng, m)
		// Runs: each axis' digits map, in order, to another axis' of as many digits.
		p.Src = make([]int, len(p.Digits))
		for k := range p.Src {
			p.Src[k] = k
		}
		byAxis := map[int][]int{}
		for k, d := range p.Digits {
			byAxis[d.Axis] = append(byAxis[d.Axis], k)
		}
		for a := range m.Axes {
			b := rng.IntN(len(m.Axes))
			if len(byAxis[a]) == len(byAxis[b]) {
				for x, k := range byAxis[a] {
					if p.Digits[byAxis[b][x]].Size == p.Digits[k].Size {
						p.Src[k] = byAxis[b][x]
					}
				}
			}
		}
		if i%2 == 1 {
			p = randomExchangeDigits(rng, p)
			// randomExchangeDigits redraws images; keep some runs
			for k := range p.Src {
				if p.Digits[k].Axis >= 0 && rng.IntN(2) == 0 && k+1 < len(p.Digits) && p.Src[k]+1 < len(p.Digits) &&
					p.Digits[k+1].Axis == p.Digits[k].Axis && p.Digits[p.Src[k]+1].Size == p.Digits[k+1].Size {
					p.Src[k+1] = p.Src[k] + 1
				}
			}
		}
		f := fabrics[i%len(fabrics)]
		r := f.NewRouter(m)
		onAxis := make([][]int, len(m.Axes))
		if !r.digitsOnAxes(p, onAxis) {
			continue
		}
		sSet := make([]uint64, len(m.Axes))
		segmentSets(p, onAxis, sSet)
		for _, g := range routeGroups(sSet, coupledAxes(sSet)) {
			D := bitsOf(g.union, len(p.Digits))
			if assignments(p.Digits, D) > maxDigitEnum {
				continue
			}
			newRM := func() *routeMax {
				rm := &routeMax{r: r, p: p, onAxis: onAxis, axes: g.axes, digits: D, val: make([]int, len(p.Digits))}
				rm.prepare()
				return rm
			}
			for _, perHop := range []func(int) float64{
				func(int) float64 { return 1 },
				func(a int) float64 { return r.rt[a].lat },
			} {
				name := fmt.Sprintf("%d %s %+v", i, m, p)
				require.Equal(t, plainBranch(newRM(), perHop), newRM().run(perHop), name)
			}
			rm := newRM()
			rm.setWeights(func(int) float64 { return 1 })
			rm.eliminate()
			if slices.ContainsFunc(D, func(d int) bool { return rm.size[d] != p.Digits[d].Size }) {
				merged++
			}
			checked++
		}
	}
	t.Logf("%d groups checked, %d with merged digits", checked, merged)
	require.Greater(t, checked, 300)
	require.Greater(t, merged, 100)
}
