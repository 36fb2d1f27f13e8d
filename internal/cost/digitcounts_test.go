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

// countedFabrics are one fabric per routed topology of ici, with axis a1 on a one-way
// dcn ring.
func countedFabrics(t *testing.T) []*Fabric {
	var fabrics []*Fabric
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "torus"} {
		fabrics = append(fabrics, mustResolve(t, fmt.Sprintf(`{"axis_links":{"a1":"dcn"},"links":{
			"ici":{"bandwidth_gbps":40,"latency_us":0.7,"topology":%q},
			"dcn":{"bandwidth_gbps":5,"latency_us":3.3,"topology":"ring_uni"}}}`, topo)).(*Fabric))
	}
	return fabrics
}

// randomAxis is one axis of a random digit map, as digitLinkLoad sees it.
type randomAxis struct {
	i      int // the case
	r      *Router
	p      DigitPermutation
	onAxis [][]int
	sSet   []uint64
	ax     int
	S      []int
	lSet   uint64
}

func (a randomAxis) String() string {
	return fmt.Sprintf("%d axis %d topology %d %s %+v", a.i, a.ax, a.r.rt[a.ax].topo, a.r.m, a.p)
}

// eachRandomAxis draws cases random digit maps on meshes of axisSizes (every third one
// of binary digits, every other one an exchange, draw's last say) on countedFabrics and
// calls fn with every axis that has digits.
func eachRandomAxis(t *testing.T, rng *rand.Rand, cases int, axisSizes []int, draw func(i int, p DigitPermutation) DigitPermutation, fn func(a randomAxis)) {
	fabrics := countedFabrics(t)
	for i := range cases {
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
		p = draw(i, p)
		r := fabrics[i%len(fabrics)].NewRouter(m)
		onAxis := make([][]int, len(m.Axes))
		if !r.digitsOnAxes(p, onAxis) {
			continue
		}
		sSet := make([]uint64, len(m.Axes))
		segmentSets(p, onAxis, sSet)
		for ax := range onAxis {
			S := bitsOf(sSet[ax], len(p.Digits))
			if len(onAxis[ax]) == 0 || assignments(p.Digits, S) > maxDigitEnum {
				continue
			}
			fn(randomAxis{i: i, r: r, p: p, onAxis: onAxis, sSet: sSet, ax: ax, S: S, lSet: lineSet(p, onAxis, ax)})
		}
	}
}

func asDrawn(_ int, p DigitPermutation) DigitPermutation { return p }

// TestLineLoadsCountedIsTheEnumeration holds lineLoadsCounted to routing every transfer
// (lineLoadsRouted), bit for bit down to the busiest link's place and the transfers
// counted, on every axis of random digit permutations and exchanges of every routed
// topology, with starting busiest links from none to above every line's.
func TestLineLoadsCountedIsTheEnumeration(t *testing.T) {
	defer func(v bool) { countsAlways = v }(countsAlways)
	countsAlways = true
	rng := rand.New(rand.NewPCG(44, 9))
	counted, turned := 0, 0
	eachRandomAxis(t, rng, 1500, []int{2, 3, 4, 5, 6, 8, 12, 16, 32, 64}, asDrawn, func(a randomAxis) {
		wgt := float64(1 + rng.IntN(1000))
		rt := a.r.rt[a.ax]
		for _, start := range []worstRes{{}, {time: 1e-9}, {time: 1e9}} {
			want, got := start, start
			wantCalls := lineLoadsRouted(&want, a.ax, a.p, a.onAxis[a.ax], a.S, a.lSet, rt, wgt)
			gotCalls, ok := lineLoadsCounted(&got, a.ax, a.p, a.onAxis[a.ax], a.S, a.lSet, rt, wgt)
			if !ok {
				continue
			}
			require.Equal(t, want, got, a.String())
			require.Equal(t, wantCalls, gotCalls, a.String())
			counted++
			if rt.topo != line {
				turned++
			}
		}
	})
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
	checked := 0
	eachRandomAxis(t, rng, 1500, []int{2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 64}, asDrawn, func(a randomAxis) {
		got, ok := a.r.axisLongestHops(a.p, a.onAxis[a.ax], a.S, a.ax)
		if !ok {
			return
		}
		rm := &routeMax{r: a.r, p: a.p, onAxis: a.onAxis, axes: []int{a.ax}, digits: a.S, val: make([]int, len(a.p.Digits))}
		rm.prepare()
		require.Equal(t, plainBranch(rm, func(int) float64 { return 1 }), float64(got), a.String())
		checked++
	})
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
	withSame := func(i int, p DigitPermutation) DigitPermutation {
		if i%2 == 0 {
			p = randomExchangeDigits(rng, p)
		}
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
		return p
	}
	counted, turned, leftOut := 0, 0, 0
	eachRandomAxis(t, rng, 1500, []int{2, 3, 4, 5, 6, 8, 12, 16, 32}, withSame, func(a randomAxis) {
		ex, ok := excludedOf(a.p, classesOf(a.p), a.S, a.lSet)
		if !ok {
			return
		}
		mult := 1.0
		for k, d := range a.p.Digits {
			if (a.sSet[a.ax]|a.lSet)&(1<<k) == 0 {
				mult *= float64(d.Size)
			}
		}
		bytes := float64([]int{1, 3, 1024}[rng.IntN(3)])
		want := a.r.axisLoadExcludingRouted(a.ax, a.p, a.onAxis[a.ax], a.lSet, bytes, mult, ex)
		got, ok := a.r.axisLoadExcludingCounted(a.ax, a.p, a.onAxis[a.ax], a.S, a.lSet, bytes, mult, ex)
		if !ok {
			return
		}
		require.Equal(t, want, got, "%s mult %v left %v", a, mult, ex.left)
		counted++
		if a.r.rt[a.ax].topo != line {
			turned++
		}
		if len(ex.checks) > 0 {
			leftOut++
		}
	})
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
	fabrics := routeMaxFabrics(t)
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
			requireRunIsBranch(t, r, p, onAxis, g.axes, D, fmt.Sprintf("%d %s %+v", i, m, p))
			rm := &routeMax{r: r, p: p, onAxis: onAxis, axes: g.axes, digits: D, val: make([]int, len(p.Digits))}
			rm.prepare()
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
