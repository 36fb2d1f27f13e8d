package cost

import (
	"encoding/binary"
	"math"
	"slices"
)

// Digit is one factor of a mesh axis' coordinate: coordinate on Axis = sum over its digits
// of value x Weight, the value in [0, Size).
type Digit struct {
	Axis   int
	Size   int
	Weight int
}

// DigitPermutation is a collective_permute in which device r receives Bytes from the
// device whose digit k is r's digit Src[k] (Src a permutation of the digits, sizes
// preserved); mesh axes no digit covers are not involved. Devices with Src-image equal to
// themselves keep their buffer. PriceDigitExchange reads it as an all_to_all_v: Src
// need not be a permutation there, and digits on axis -1 are free (every value of them
// is a transfer of its own).
type DigitPermutation struct {
	Digits []Digit
	Src    []int
	Bytes  int64
	// Same, when set (PriceDigitExchange only), leaves out the transfers whose digits
	// k and Same[k] are equal for every k with Same[k] >= 0: those move nothing (a
	// receiver's own tile, which the exchange does not send).
	Same []int
}

// maxDigitEnum caps the digit assignments PriceDigitPermutation enumerates per axis or
// per coupled group of axes.
const maxDigitEnum = 1 << 16

// maxExchangeRouteEnum caps the assignments of a coupled group of axes whose longest
// route PriceDigitExchange finds: maxDigitEnum, or up to this many when the exchange
// lists more transfers (every digit's assignment is one, moving or not). A group's
// digits are some of the exchange's, so the branch and bound never visits more
// assignments than there are transfers, each at a fraction of the cost of routing one,
// which is what the caller would do instead.
const maxExchangeRouteEnum = 1 << 22

// PriceDigitPermutation prices p exactly as Price would price its transfers listed one
// by one, in time that depends on the digits of each axis and their images (at most
// n_axis² assignments per axis) rather than on the device count. On a GPU model it
// counts port and NIC loads from the digits instead (digitswitch.go). ok is false when
// it does not apply: a torus model with switched axes, a GPU model with axis_links on
// the mesh or a node boundary inside a digit, or digit groups too large to enumerate;
// the caller then routes the transfers.
//
// Why it is exact. Under dimension-ordered routing the segment a transfer rides on axis
// μ runs from the holder's coordinate h_μ to the receiver's r_μ, on the line fixed by the
// receiver's coordinates on the axes before μ and the holder's on the axes after it. With
// h's digit k equal to r's digit Src[k], the segment depends on r's digits S_μ (μ's digits
// and their images), the line on r's digits L_μ; every assignment of the other digits
// repeats the same segment on the same line. So the load of a link on a line is the bytes
// times the number of those other assignments times the number of assignments of S_μ \
// L_μ whose segment crosses it, with the S_μ ∩ L_μ digits those of the line; the busiest
// line is the worst assignment of S_μ ∩ L_μ. The longest route is a sum over axes of
// per-axis hops, each a function of S_μ: axes whose S sets share digits are maximised
// together over the union of their digits, the groups independently.
func (r *Router) PriceDigitPermutation(p DigitPermutation) (TrafficEstimate, bool) {
	if r.f.gpusPerNode > 0 {
		moving := int64(math.Round(digitSent(p, r.n)))
		if moving == 0 {
			return TrafficEstimate{}, r.switchApplies()
		}
		return r.priceDigitsSwitched(p, CollectivePermute, moving, 1)
	}
	u := r.digitUnitOf(p, maxDigitEnum)
	if !u.loadOK {
		return TrafficEstimate{}, false
	}
	if !u.used {
		return TrafficEstimate{}, true // every device keeps its buffer
	}
	if !u.routeOK {
		return TrafficEstimate{}, false
	}
	w := u.worst(r, p)
	var out TrafficEstimate
	out.Bytes = int64(math.Round(u.sent * float64(p.Bytes)))
	out.MaxPeers = 1
	out.MaxHops = u.hops
	out.MaxLinkBytes = w.load
	out.BandwidthUS = w.time
	out.worst, out.router = w, r
	out.LatencyUS = u.base + u.lat
	out.TimeUS = r.f.combine(out.LatencyUS, out.BandwidthUS)
	out.Link = w.class.String()
	return out, true
}

// PriceDigitExchange prices an all_to_all_v whose transfers are a digit map with free
// digits: p's digits on axis -1 are free (every value of them is a transfer of its own,
// each p.Bytes), and the holder's digit k is the value of digit Src[k]. A transfer
// whose holder is its receiver moves nothing. The caller gives what the map's structure
// says of the transfers that move: how many (moving) and the most one device sends or
// receives (maxPeers). It prices exactly as Price would price the transfers listed one
// by one (TestPriceDigitExchangeIsExact, TestSwitchedDigitPricingIsExact), and ok is
// false where PriceDigitPermutation does not apply (or, on a GPU model, where a
// transfer is left out (Same) and the digits have more than 2^16 assignments).
func (r *Router) PriceDigitExchange(p DigitPermutation, maxPeers int, moving int64) (TrafficEstimate, bool) {
	if moving <= 0 {
		return TrafficEstimate{}, false
	}
	if r.f.gpusPerNode > 0 {
		return r.priceDigitsSwitched(p, AllToAllV, moving, maxPeers)
	}
	transfers := 1 // every assignment of the digits is a transfer, moving or not
	for _, d := range p.Digits {
		if transfers *= d.Size; transfers > maxExchangeRouteEnum {
			transfers = maxExchangeRouteEnum
			break
		}
	}
	u := r.digitUnitOf(p, max(maxDigitEnum, transfers))
	if !u.loadOK || !u.used || !u.routeOK {
		return TrafficEstimate{}, false
	}
	w := u.worst(r, p)
	alpha := math.Inf(1)
	for _, a := range u.axes {
		alpha = min(alpha, r.f.links[r.rt[a.axis].class].lat)
	}
	var out TrafficEstimate
	out.Bytes = moving * p.Bytes
	out.MaxPeers = maxPeers
	out.MaxHops = u.hops
	out.MaxLinkBytes = w.load
	out.BandwidthUS = w.time
	out.worst, out.router = w, r
	lat := u.lat
	if maxPeers > 1 && !math.IsInf(alpha, 0) {
		lat += float64(maxPeers-1) * alpha
	}
	out.LatencyUS = u.base + lat
	out.TimeUS = r.f.combine(out.LatencyUS, out.BandwidthUS)
	out.Link = w.class.String()
	return out, true
}

// digitUnit is what PriceDigitPermutation finds of a permutation whatever its bytes:
// whether it applies, the base latency, the longest route, the sends per byte, and per
// loaded axis its busiest link for one byte per device. A search prices one
// permutation on many buffer sizes; the loads scale with the bytes.
type digitUnit struct {
	loadOK, used, routeOK bool
	base, lat             float64
	hops                  int
	routeCap              int     // the cap the longest route was looked for under
	sent                  float64 // (devices - keepers) x others (digitBytes)
	axes                  []unitAxis
	// bound is at least every partial sum of the load arrays, per byte: while bound x
	// bytes stays below 2^40 every such sum, a multiple of half the weight, is exact,
	// so the per-byte load times the bytes is the very sum digitLinkLoad adds up, and
	// distinct loads keep distinct times (worst).
	bound float64
}

// unitAxis is an axis' busiest link for one byte per device (the first of equals).
type unitAxis struct {
	axis, x, dir int
	load         float64
}

// worst is digitLinkLoad's busiest link for p's bytes: the per-byte loads scaled when
// that is exact (bound), else digitLinkLoad itself.
func (u *digitUnit) worst(r *Router, p DigitPermutation) worstRes {
	b := float64(p.Bytes)
	var w worstRes
	if u.bound*b >= 1<<40 {
		onAxis, sSet := r.digitScratch()
		r.digitsOnAxes(p, onAxis)
		segmentSets(p, onAxis, sSet)
		w, _, _, _ = r.digitLinkLoad(p, onAxis, sSet, b, nil)
		return w
	}
	for _, a := range u.axes {
		rt := r.rt[a.axis]
		acc := a.load * b
		if tm := acc / rt.bw; tm > w.time {
			w = worstRes{time: tm, load: acc, class: rt.class, kind: resRing, axis: a.axis, line: -1, x: a.x, dir: a.dir}
		}
	}
	return w
}

// digitScratch returns the per-axis digit lists and segment sets of one
// PriceDigitPermutation call, empty, from buffers the router keeps (a search prices
// thousands of permutations).
func (r *Router) digitScratch() ([][]int, []uint64) {
	na := len(r.m.Axes)
	if r.dOnAxis == nil {
		r.dOnAxis, r.dSSet = make([][]int, na), make([]uint64, na)
	}
	for i := range na {
		r.dOnAxis[i], r.dSSet[i] = r.dOnAxis[i][:0], 0
	}
	return r.dOnAxis, r.dSSet
}

// digitUnitOf is p's digitUnit, memoized by p's digits and Src, its longest route looked
// for over at most limit assignments per coupled group of axes.
func (r *Router) digitUnitOf(p DigitPermutation, limit int) *digitUnit {
	b := r.dKey[:0]
	for k, d := range p.Digits {
		b = binary.AppendUvarint(b, uint64(d.Axis))
		b = binary.AppendUvarint(b, uint64(d.Size))
		b = binary.AppendUvarint(b, uint64(d.Weight))
		b = binary.AppendUvarint(b, uint64(p.Src[k]))
		if p.Same != nil {
			b = binary.AppendUvarint(b, uint64(p.Same[k]+1))
		}
	}
	r.dKey = b
	u, ok := r.digitUnits[string(b)]
	if !ok && r.memo != nil {
		if u, ok = r.memo.unit(b); ok {
			if r.digitUnits == nil {
				r.digitUnits = map[string]*digitUnit{}
			}
			r.digitUnits[string(b)] = u
		}
	}
	if ok && (u.routeOK || !u.loadOK || !u.used || u.routeCap >= limit) {
		return u
	}
	if ok {
		c := *u // published units are never changed
		u = &c
	}
	// New, or known with a longest route past a smaller cap than this call's: the loads
	// are computed once, the route again.
	onAxis, sSet := r.digitScratch()
	if r.digitsOnAxes(p, onAxis) {
		segmentSets(p, onAxis, sSet)
		if !ok {
			u = &digitUnit{}
			_, u.base, u.used, u.loadOK = r.digitLinkLoad(p, onAxis, sSet, 1, u)
		}
	} else if !ok {
		u = &digitUnit{}
	}
	if u.loadOK && u.used {
		u.lat, u.hops, u.routeOK = r.digitLongestRoute(p, onAxis, sSet, limit)
		u.routeCap = limit
		u.sent = digitSent(p, r.m.NumDevices())
	}
	if r.digitUnits == nil {
		r.digitUnits = map[string]*digitUnit{}
	}
	r.digitUnits[string(b)] = u
	if r.memo != nil {
		r.memo.putUnit(string(b), u)
	}
	return u
}

// digitsOnAxes lists in onAxis the digits of each mesh axis; false when an axis with
// digits is switched or its digits do not cover it.
func (r *Router) digitsOnAxes(p DigitPermutation, onAxis [][]int) bool {
	for k, d := range p.Digits {
		if d.Axis >= 0 { // a free digit (PriceDigitExchange) is on no axis
			onAxis[d.Axis] = append(onAxis[d.Axis], k)
		}
	}
	for i := range onAxis {
		if len(onAxis[i]) > 0 && (r.rt[i].topo == switched || r.rt[i].n != coverage(p.Digits, onAxis[i])) {
			return false
		}
	}
	return true
}

// segmentSets sets S_μ per axis in sSet (a bitmask over digits): the axis' digits and
// their images.
func segmentSets(p DigitPermutation, onAxis [][]int, sSet []uint64) {
	for i := range onAxis {
		for _, k := range onAxis[i] {
			sSet[i] |= 1<<k | 1<<p.Src[k]
		}
	}
}

// lineSet is L_μ of axis i: the receiver's digits on the axes before it and the
// holder's (their images) on the axes after it.
func lineSet(p DigitPermutation, onAxis [][]int, i int) uint64 {
	var lSet uint64
	for j := range onAxis {
		for _, k := range onAxis[j] {
			switch {
			case j < i:
				lSet |= 1 << k
			case j > i:
				lSet |= 1 << p.Src[k]
			}
		}
	}
	return lSet
}

// digitLinkLoad finds the busiest link over every axis and the largest base latency of
// the links used; used is false when every device keeps its buffer, ok false when an
// axis has too many assignments to enumerate.
//
// Each transfer weighs bytes. When u is not nil, digitLinkLoad also records in it each
// loaded axis' busiest link (the first of equals) and the bound on the partial sums.
func (r *Router) digitLinkLoad(p DigitPermutation, onAxis [][]int, sSet []uint64, bytes float64, u *digitUnit) (w worstRes, base float64, used, ok bool) {
	nd := len(p.Digits)
	var cls sameClasses
	if p.Same != nil {
		cls = classesOf(p)
	}
	for i := range onAxis {
		if len(onAxis[i]) == 0 || sSet[i] == 0 {
			continue
		}
		lSet := lineSet(p, onAxis, i)
		S := bitsOf(sSet[i], nd)
		if assignments(p.Digits, S) > maxDigitEnum {
			return w, 0, false, false
		}
		mult := 1.0
		for k := range nd {
			if (sSet[i]|lSet)&(1<<k) == 0 {
				mult *= float64(p.Digits[k].Size)
			}
		}
		rt := r.rt[i]
		var al axisLoadRes
		if p.Same != nil {
			var ok bool
			if al, ok = r.axisLoadExcluding(i, p, cls, onAxis[i], S, lSet, bytes, mult); !ok {
				return w, 0, false, false
			}
		} else {
			al = r.axisLoad(i, p, onAxis[i], S, lSet, bytes*mult)
		}
		if al.w.time > w.time {
			w = al.w // the first busiest over the axes, as one scan of them all keeps
		}
		if al.used {
			used = true
			base = max(base, r.f.links[rt.class].base)
			if u != nil {
				// A transfer adds at most four entries of its weight (addRun).
				u.axes = append(u.axes, unitAxis{axis: i, x: al.w.x, dir: al.w.dir, load: al.w.load})
				u.bound = max(u.bound, 4*float64(al.calls)*mult)
			}
		}
	}
	return w, base, used, true
}

// axisLoad is lineLoads' busiest link of axis (from none) and whether a transfer moves
// on it, memoized per Router: the search prices many permutations that move one axis'
// digits alike (a 65,536-device rank-3 reshard: 16 distinct of 30 per request). The key is all that lineLoads reads, with digits named by their place in
// S: the axis (its route), S's sizes and which of them L holds, each axis digit's and
// its image's places and its weight, and the bytes per transfer.
func (r *Router) axisLoad(axis int, p DigitPermutation, digits, S []int, lSet uint64, wgt float64) axisLoadRes {
	key := binary.AppendUvarint(r.loadKey[:0], uint64(axis))
	key = binary.AppendUvarint(key, math.Float64bits(wgt))
	key = append(key, byte(len(S)), byte(len(digits))) // at most 64 digits
	for _, k := range S {
		key = binary.AppendUvarint(key, uint64(p.Digits[k].Size)<<1|(lSet>>k&1))
	}
	for _, k := range digits {
		key = append(key, byte(slices.Index(S, k)), byte(slices.Index(S, p.Src[k])))
		key = binary.AppendUvarint(key, uint64(p.Digits[k].Weight))
	}
	r.loadKey = key
	if got, ok := r.axisLoads[string(key)]; ok {
		return got
	}
	if r.memo != nil {
		if got, ok := r.memo.load(key); ok {
			if r.axisLoads == nil {
				r.axisLoads = map[string]axisLoadRes{}
			}
			r.axisLoads[string(key)] = got
			return got
		}
	}
	var res axisLoadRes
	res.calls = lineLoads(&res.w, axis, p, digits, S, lSet, r.rt[axis], wgt)
	res.used = res.calls > 0
	if r.axisLoads == nil {
		r.axisLoads = map[string]axisLoadRes{}
	}
	r.axisLoads[string(key)] = res
	if r.memo != nil {
		r.memo.putLoad(string(key), res)
	}
	return res
}

// axisLoadRes is a memoized axisLoad: the axis' busiest link, whether a transfer moves
// on it, and how many transfers lineLoads added.
type axisLoadRes struct {
	w     worstRes
	used  bool
	calls int
}

// lineLoads routes axis' transfers, each weighing wgt, line class by line class (an
// assignment of S ∩ L), keeps in w the busiest link if busier, and returns the number
// of transfers it routed (0: none moves on the axis). digits are the axis' digits; S the digits its segments
// depend on. The assignments of S are enumerated with S ∩ L's digits most significant,
// so that each line class's come one after the other and one pair of difference arrays
// serves every class in turn: a map of arrays, one per class, was most of the time of
// pricing a 65,536-device permutation. A class's transfers are added in the
// same order as in an enumeration in digit order, so its sums are the same.
func lineLoads(w *worstRes, axis int, p DigitPermutation, digits, S []int, lSet uint64, rt axisRoute, wgt float64) (calls int) {
	if calls, ok := lineLoadsCounted(w, axis, p, digits, S, lSet, rt, wgt); ok {
		return calls
	}
	return lineLoadsRouted(w, axis, p, digits, S, lSet, rt, wgt)
}

// lineLoadsRouted is lineLoads by routing every transfer.
func lineLoadsRouted(w *worstRes, axis int, p DigitPermutation, digits, S []int, lSet uint64, rt axisRoute, wgt float64) (calls int) {
	n := rt.n
	order := make([]int, 0, len(S))
	for _, in := range [2]bool{true, false} {
		for _, k := range S {
			if (lSet&(1<<k) != 0) == in {
				order = append(order, k)
			}
		}
	}
	buf := make([]float64, 2*(n+1))
	val := make([]int, len(p.Digits))
	var class uint64
	routed := 0.0 // on the line class
	eachAssignment(p.Digits, order, val, func() {
		var key uint64
		for _, k := range order {
			if lSet&(1<<k) != 0 {
				key = key*uint64(p.Digits[k].Size) + uint64(val[k])
			}
		}
		if key != class && routed > 0 {
			busiestLink(w, axis, rt, buf, routed)
			clear(buf)
			routed = 0
		}
		class = key
		a, b := 0, 0 // holder's and receiver's coordinate on the axis
		for _, k := range digits {
			a += val[p.Src[k]] * p.Digits[k].Weight
			b += val[k] * p.Digits[k].Weight
		}
		if a == b {
			return
		}
		routeRing(buf, rt.topo, n, a, b, wgt)
		routed += wgt
		calls++
	})
	if routed > 0 {
		busiestLink(w, axis, rt, buf, routed)
	}
	return calls
}

// busiestLink keeps in w the busiest link of one line of axis (buf: its difference
// arrays) if busier: the first in direction then position order. routed is the bytes
// routed on the line, which no link's load exceeds: most lines are no busier than the
// busiest found, and that says so without the scan (a line of one transfer carries
// exactly its bytes; the slack covers rounding in the sums of many).
func busiestLink(w *worstRes, axis int, rt axisRoute, buf []float64, routed float64) {
	if routed*(1+1e-9)/rt.bw <= w.time {
		return
	}
	n := rt.n
	for dir := range 2 {
		acc := 0.0
		for x := range n {
			acc += buf[dir*(n+1)+x]
			if tm := acc / rt.bw; tm > w.time {
				*w = worstRes{time: tm, load: acc, class: rt.class, kind: resRing, axis: axis, line: -1, x: x, dir: dir}
			}
		}
	}
}

// digitLongestRoute is the latency and hops of the longest route: axes coupled through
// shared digits are maximised together, the groups independently. ok is false when a
// group has too many assignments to enumerate.
func (r *Router) digitLongestRoute(p DigitPermutation, onAxis [][]int, sSet []uint64, limit int) (lat float64, hops int, ok bool) {
	if p.Same != nil {
		if lat, hops, ok, done := r.digitLongestRouteExcluding(p, onAxis, sSet, limit); done {
			return lat, hops, ok
		}
	}
	for _, g := range routeGroups(sSet, coupledAxes(sSet)) {
		l, h, ok := r.groupLongestRoute(p, onAxis, g.axes, g.union, limit)
		if !ok {
			return 0, 0, false
		}
		lat += l
		hops += h
	}
	return lat, hops, true
}

// coupledAxes joins the axes whose segment digits share a digit.
func coupledAxes(sSet []uint64) UnionFind {
	comp := NewUnionFind(len(sSet))
	for i := range sSet {
		for j := i + 1; j < len(sSet); j++ {
			if sSet[i]&sSet[j] != 0 {
				comp.Union(i, j)
			}
		}
	}
	return comp
}

// routeGroup is a set of coupled axes with segment digits and the union of those digits.
type routeGroup struct {
	axes  []int
	union uint64
}

// routeGroups lists comp's sets of axes that have segment digits.
func routeGroups(sSet []uint64, comp UnionFind) []routeGroup {
	var out []routeGroup
	for root := range sSet {
		if comp.Find(root) != root {
			continue
		}
		var g routeGroup
		for i := range sSet {
			if comp.Find(i) == root && sSet[i] != 0 {
				g.union |= sSet[i]
				g.axes = append(g.axes, i)
			}
		}
		if len(g.axes) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// UnionFind is a disjoint-set forest over indices 0..n-1: each entry's parent.
type UnionFind []int

// NewUnionFind is n singletons.
func NewUnionFind(n int) UnionFind {
	u := make(UnionFind, n)
	for i := range u {
		u[i] = i
	}
	return u
}

// Find is the root of x's set, halving the path on the way.
func (u UnionFind) Find(x int) int {
	for u[x] != x {
		u[x] = u[u[x]]
		x = u[x]
	}
	return x
}

// Union joins the sets of x and y and reports whether they were apart.
func (u UnionFind) Union(x, y int) bool {
	x, y = u.Find(x), u.Find(y)
	if x == y {
		return false
	}
	u[x] = y
	return true
}

// groupLongestRoute is the largest latency and hops, over every assignment of the
// digits in union, of the route across axes (each maximised on its own, by routeMax).
func (r *Router) groupLongestRoute(p DigitPermutation, onAxis [][]int, axes []int, union uint64, limit int) (float64, int, bool) {
	return r.groupLongestRouteOf(p, onAxis, axes, union, limit, nil)
}

// groupLongestRouteOf is groupLongestRoute over the assignments accept takes (nil:
// all); -1 hops when it takes none.
func (r *Router) groupLongestRouteOf(p DigitPermutation, onAxis [][]int, axes []int, union uint64, limit int, accept func([]int) bool) (float64, int, bool) {
	nd := len(p.Digits)
	D := bitsOf(union, nd)
	if assignmentsUpTo(p.Digits, D, limit) > limit {
		return 0, 0, false
	}
	if accept == nil && len(axes) == 1 {
		if h, ok := r.axisLongestHops(p, onAxis[axes[0]], D, axes[0]); ok {
			return float64(h) * r.rt[axes[0]].lat, h, true
		}
	}
	rm := routeMax{r: r, p: p, onAxis: onAxis, axes: axes, digits: D, val: make([]int, nd), accept: accept}
	rm.prepare()
	hops := rm.run(func(int) float64 { return 1 })
	// One latency per hop on every axis (one link class): the longest route in hops is
	// also the slowest.
	same := true
	for _, i := range axes {
		same = same && r.rt[i].lat == r.rt[axes[0]].lat
	}
	if hops < 0 {
		return -1, -1, true
	}
	if same {
		return hops * r.rt[axes[0]].lat, int(math.Round(hops)), true
	}
	lat := rm.run(func(i int) float64 { return r.rt[i].lat })
	return lat, int(math.Round(hops)), true
}

// routeMax maximises, over the assignments of a coupled group's digits, the sum over the
// group's axes of each axis' segment hops times a per-axis weight (latency per hop, or
// 1 for hops). Groups of more than eliminateAbove assignments go to variable
// elimination (eliminate), then, for weights that are not integers, to the branch and
// bound started just below its answer; smaller ones to the branch and bound alone:
// digits are assigned in order, an axis' term is added once its last digit is, and a
// branch stops when its sum plus every open axis' own largest term cannot beat the best
// sum found. Every assignment it skips is one whose sum is at most that best, so the
// maximum is exact, as enumerating them all (TestDigitPermutationPricingIsExact holds it
// to routing every transfer, TestRouteMaxEliminationIsExact the elimination to it).
type routeMax struct {
	r      *Router
	p      DigitPermutation
	onAxis [][]int
	axes   []int
	digits []int // the group's digits, in assignment order
	val    []int
	// per axis of the group (index into axes): its digits, and the assignment level
	// after which all of them are set; per level, the axes completed there.
	axisDigits [][]int
	readyAt    [][]int
	// per run: the weight of each axis' hop, each axis' largest term, the suffix sums
	// of the largest terms of the axes completing after each level, and the best sum.
	weight []float64
	most   []float64
	// size is each digit's size in eliminate's tables, where merged digits are one
	// (mergeDigits).
	size []int
	open []float64
	best float64
	// accept, when set, limits the maximum to the assignments it takes (the others
	// still bound it from above, so the pruning stays sound).
	accept func(val []int) bool
}

func (rm *routeMax) prepare() {
	pos := make([]int, len(rm.p.Digits)) // a digit's level
	for l, k := range rm.digits {
		pos[k] = l
	}
	rm.readyAt = make([][]int, len(rm.digits))
	rm.axisDigits = make([][]int, len(rm.axes))
	for j, i := range rm.axes {
		var seen uint64
		ready := 0
		for _, k := range rm.onAxis[i] {
			for _, d := range [2]int{k, rm.p.Src[k]} {
				if seen&(1<<d) == 0 {
					seen |= 1 << d
					rm.axisDigits[j] = append(rm.axisDigits[j], d)
					ready = max(ready, pos[d])
				}
			}
		}
		rm.readyAt[ready] = append(rm.readyAt[ready], j)
	}
}

// term is axis j's weighted hops under the current assignment.
func (rm *routeMax) term(j int) float64 {
	i := rm.axes[j]
	a, b := 0, 0
	for _, k := range rm.onAxis[i] {
		a += rm.val[rm.p.Src[k]] * rm.p.Digits[k].Weight
		b += rm.val[k] * rm.p.Digits[k].Weight
	}
	if a == b {
		return 0
	}
	return float64(segmentHops(rm.r.rt[i].topo, rm.r.rt[i].n, a, b)) * rm.weight[j]
}

// run returns the largest sum of the axes' terms with the given per-hop weights. With
// integer weights (hops) every term and sum is an exact integer and eliminate is the
// answer. Otherwise the branch and bound, which adds the terms in its own order, gives
// it, started just below eliminate's maximum so that it prunes every branch that
// cannot reach it, and returns the same sum it did when it started from nothing.
func (rm *routeMax) run(perHop func(axis int) float64) float64 {
	integral := rm.setWeights(perHop)
	if rm.accept != nil {
		return rm.branchFrom(-1) // elimination cannot leave assignments out
	}
	top := -1.0
	if assignments(rm.p.Digits, rm.digits) > eliminateAbove {
		top = rm.eliminate()
		if integral {
			return top
		}
	}
	if top > 0 {
		return rm.branchFrom(top * (1 - 1e-9))
	}
	return rm.branchFrom(-1)
}

// setWeights sets each axis' per-hop weight and reports whether all are integers.
func (rm *routeMax) setWeights(perHop func(axis int) float64) (integral bool) {
	n := len(rm.axes)
	rm.weight, rm.most = make([]float64, n), make([]float64, n)
	integral = true
	for j, i := range rm.axes {
		rm.weight[j] = perHop(i)
		integral = integral && rm.weight[j] == math.Trunc(rm.weight[j])
	}
	return integral
}

// branchFrom is the branch and bound's largest sum, pruning every branch that cannot
// exceed best (-1: none).
func (rm *routeMax) branchFrom(best float64) float64 {
	for j := range rm.axes {
		// The axis' own largest term: every assignment of its digits.
		rm.r.tables = rm.r.tables[:0] // eliminate's tables are no longer in use
		for _, v := range rm.terms(j, rm.axisDigits[j], rm.r.tableFloats(coverage(rm.p.Digits, rm.axisDigits[j]))[:0]) {
			rm.most[j] = max(rm.most[j], v)
		}
	}
	rm.open = make([]float64, len(rm.digits)+1)
	for l := len(rm.digits) - 1; l >= 0; l-- {
		rm.open[l] = rm.open[l+1]
		for _, j := range rm.readyAt[l] {
			rm.open[l] += rm.most[j]
		}
	}
	rm.best = best
	rm.branch(0, 0)
	return rm.best
}

// branch assigns the digit at level l (sum: the terms of the axes already complete).
func (rm *routeMax) branch(l int, sum float64) {
	if l == len(rm.digits) {
		if rm.accept == nil || rm.accept(rm.val) {
			rm.best = max(rm.best, sum)
		}
		return
	}
	if sum+rm.open[l] <= rm.best {
		return // no completion can beat the best
	}
	k := rm.digits[l]
	for v := range rm.p.Digits[k].Size {
		rm.val[k] = v
		s := sum
		for _, j := range rm.readyAt[l] {
			s += rm.term(j)
		}
		rm.branch(l+1, s)
	}
}

// digitSent is the devices that receive p.Bytes (the bytes sent over p.Bytes): every
// device that does not keep its buffer. Keepers are the fixed points of the digit
// permutation: on each cycle of Src all digits are equal.
func digitSent(p DigitPermutation, numDevices int) float64 {
	nd := len(p.Digits)
	seen := make([]bool, nd)
	keepers := 1.0
	for k := range nd {
		if seen[k] {
			continue
		}
		for x := k; !seen[x]; x = p.Src[x] {
			seen[x] = true
		}
		keepers *= float64(p.Digits[k].Size)
	}
	devices := 1.0
	for _, d := range p.Digits {
		devices *= float64(d.Size)
	}
	others := float64(numDevices) / devices
	return (devices - keepers) * others
}

// coverage is the product of the sizes of digits ks (their axis' full size when they
// cover it).
func coverage(ds []Digit, ks []int) int {
	n := 1
	for _, k := range ks {
		n *= ds[k].Size
	}
	return n
}

func bitsOf(set uint64, n int) []int {
	var out []int
	for k := range n {
		if set&(1<<k) != 0 {
			out = append(out, k)
		}
	}
	return out
}

func assignments(ds []Digit, ks []int) int { return assignmentsUpTo(ds, ks, maxDigitEnum) }

// assignmentsUpTo is the number of assignments of the digits ks, or some number past
// limit when there are more.
func assignmentsUpTo(ds []Digit, ks []int, limit int) int {
	n := 1
	for _, k := range ks {
		n *= ds[k].Size
		if n > limit {
			return n
		}
	}
	return n
}

// eachAssignment sets val[k] for k in ks to every combination of values and calls fn.
func eachAssignment(ds []Digit, ks []int, val []int, fn func()) {
	for _, k := range ks {
		val[k] = 0
	}
	for {
		fn()
		i := len(ks) - 1
		for ; i >= 0; i-- {
			k := ks[i]
			val[k]++
			if val[k] < ds[k].Size {
				break
			}
			val[k] = 0
		}
		if i < 0 {
			return
		}
	}
}
