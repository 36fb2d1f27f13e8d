package cost

import "math"

// This file computes lineLoads from counts instead of routing every transfer: the same
// loads, the same busiest link, in time that depends on the axis size rather than on
// the number of transfers.
//
// On an axis the holder's coordinate a and the receiver's b are sums over the segment
// digits S: digit t adds alpha_t·v_t to a (alpha_t: the weights of the axis digits whose
// image t is) and beta_t·v_t to b (beta_t: t's weight when t is on the axis). Within a
// line class (an assignment of S ∩ L) the other digits of S are free, and they split
// three ways: those that move only a (A), only b (B), or both (C). For each assignment
// of C the transfers are every pair of an a from A's sums and a b from B's, so the
// difference arrays of their routes follow from the counts of each coordinate (HA, HB)
// and their window sums, O(n) per assignment of C instead of |A|·|B| routes.
//
// Why the loads are the very same floats. Every transfer weighs wgt, an integer (the
// bytes times the count of the other digits' assignments), or wgt/2 each way for an
// antipodal one, so every entry of the difference arrays and every partial sum the
// enumeration adds is a multiple of wgt/2 no larger in magnitude than four times the
// transfers' total weight. Below 2^52 every such sum is exact, whatever the order of
// its terms (countsExact), so the entries computed from counts equal the enumeration's
// bit for bit, and busiestLink, which reads them, finds the same link.
//
// On a ring, routes turn with the ring: two line classes whose transfers are one the
// other's turned by s load the same links turned by s, so the second's busiest link is
// no busier than the first's and cannot replace it (busiestLink keeps the first of
// equals). A class's transfers are HA and HB placed at offsets oa and ob (the line
// class's and C's contributions); turning by s adds s to both, and HA (HB) is unchanged
// by a turn of its period, so classes whose oa - ob agree modulo the gcd of the two
// periods and n are turns of one another, and only the first of each is scanned.

// countsExact reports whether transfers of weight wgt, total of them, keep every sum
// lineLoads adds exact (a multiple of wgt/2 below 2^52 in magnitude).
func countsExact(wgt float64, total float64) bool {
	return wgt > 0 && wgt == math.Trunc(wgt) && 8*total*wgt < 1<<52
}

// countsAlways makes lineLoads count wherever counting applies, even where routing is
// cheaper: a variable so that the tests can hold the counts to routing on small axes.
var countsAlways = false

// countedAxis is the split of one axis' segment digits for lineLoadsCounted.
type countedAxis struct {
	alpha, beta []int // per digit: its weight in a and in b
	lDig, cDig  []int // S ∩ L (line class digits), and the digits that move both a and b
	ha, hb      []int64
	// the assignments of the digits that move only a, only b, both, and of lDig
	na, nb, nc, classes int
}

// splitAxis splits S for axis' digits (see the file comment) and tabulates HA and HB;
// ok is false when a coordinate could reach n (the digits do not cover the axis).
func splitAxis(p DigitPermutation, digits, S []int, lSet uint64, n int) (c countedAxis, ok bool) {
	nd := len(p.Digits)
	c.alpha, c.beta = make([]int, nd), make([]int, nd)
	for _, k := range digits {
		c.alpha[p.Src[k]] += p.Digits[k].Weight
		c.beta[k] = p.Digits[k].Weight
	}
	maxA, maxB := 0, 0
	for _, k := range S {
		maxA += c.alpha[k] * (p.Digits[k].Size - 1)
		maxB += c.beta[k] * (p.Digits[k].Size - 1)
	}
	if n < 2 || maxA >= n || maxB >= n {
		return c, false
	}
	var aDig, bDig []int
	for _, k := range S {
		switch {
		case lSet&(1<<k) != 0:
			c.lDig = append(c.lDig, k)
		case c.alpha[k] != 0 && c.beta[k] != 0:
			c.cDig = append(c.cDig, k)
		case c.alpha[k] != 0:
			aDig = append(aDig, k)
		default:
			bDig = append(bDig, k)
		}
	}
	c.na, c.nb = assignmentsUpTo(p.Digits, aDig, 1<<40), assignmentsUpTo(p.Digits, bDig, 1<<40)
	c.nc, c.classes = assignmentsUpTo(p.Digits, c.cDig, 1<<40), assignmentsUpTo(p.Digits, c.lDig, 1<<40)
	c.ha = coordCounts(p.Digits, aDig, c.alpha, n)
	c.hb = coordCounts(p.Digits, bDig, c.beta, n)
	return c, true
}

// countsCheaper reports whether counting, about 12n steps per assignment of the digits
// that move both coordinates in each of scanned line classes, is cheaper than routing
// routed transfers, each worth about perRoute steps.
func countsCheaper(scanned, nc, n int, routed float64, perRoute float64) bool {
	return countsAlways || float64(scanned)*float64(nc)*float64(12*n) < perRoute*routed
}

// coordCounts is how many assignments of ks give each sum of coef[k]·v_k (all below n).
func coordCounts(ds []Digit, ks []int, coef []int, n int) []int64 {
	sizes, coefs := make([]int, len(ks)), make([]int, len(ks))
	for i, k := range ks {
		sizes[i], coefs[i] = ds[k].Size, coef[k]
	}
	return sumCounts(sizes, coefs, n)
}

// sumCounts is how many assignments of values v_i in [0, sizes[i]) give each sum of
// coefs[i]·v_i (all below n).
func sumCounts(sizes, coefs []int, n int) []int64 {
	h := make([]int64, n)
	h[0] = 1
	next := make([]int64, n)
	for i, size := range sizes {
		clear(next)
		for x, c := range h {
			if c == 0 {
				continue
			}
			for v := range size {
				next[x+v*coefs[i]] += c
			}
		}
		h, next = next, h
	}
	return h
}

// period is the least s > 0 dividing n with h turned by s equal to h.
func period(h []int64) int {
	n := len(h)
	for s := 1; s < n; s++ {
		if n%s != 0 {
			continue
		}
		same := true
		for x := range n {
			if h[x] != h[(x+s)%n] {
				same = false
				break
			}
		}
		if same {
			return s
		}
	}
	return n
}

// lineLoadsCounted is lineLoads computed from counts (see the file comment): the same
// busiest link kept in w and the same number of transfers routed. ok is false, with
// nothing done, where it does not apply or would not be faster; lineLoads then routes.
func lineLoadsCounted(w *worstRes, axis int, p DigitPermutation, digits, S []int, lSet uint64, rt axisRoute, wgt float64) (calls int, ok bool) {
	n := rt.n
	if rt.topo != line && rt.topo != ringUni && rt.topo != ringBidi {
		return 0, false
	}
	if !countsExact(wgt, float64(assignmentsUpTo(p.Digits, S, 1<<50))) {
		return 0, false
	}
	c, ok := splitAxis(p, digits, S, lSet, n)
	if !ok {
		return 0, false
	}
	turns := 0 // classes whose oa - ob agree modulo turns are turns of one another
	scans := c.classes
	if rt.topo != line {
		turns = gcd(gcd(period(c.ha), period(c.hb)), n)
		scans = min(scans, turns)
	}
	if !countsCheaper(scans, c.nc, n, float64(c.classes)*float64(c.na)*float64(c.nb)*float64(c.nc), 8) {
		return 0, false
	}
	var scanned []bool
	var scannedCalls []int
	if turns > 0 {
		scanned, scannedCalls = make([]bool, turns), make([]int, turns)
	}
	pc := newPairCounter(n, rt.topo)
	buf := make([]float64, 2*(n+1))
	val := make([]int, len(p.Digits))
	eachAssignment(p.Digits, c.lDig, val, func() {
		oa, ob := c.shift(c.lDig, val)
		key := -1
		if turns > 0 {
			key = ((oa-ob)%turns + turns) % turns
			if scanned[key] {
				calls += scannedCalls[key]
				return
			}
		}
		c.countPairs(pc, p.Digits, val, oa, ob)
		if key >= 0 {
			scanned[key], scannedCalls[key] = true, int(pc.pairs)
		}
		calls += int(pc.pairs)
		if pc.pairs == 0 {
			return
		}
		setHalves(buf, pc.cnt, wgt)
		busiestLink(w, axis, rt, buf, float64(pc.pairs)*wgt)
	})
	return calls, true
}

// countPairs sets pc to the pairs of the line class whose own digits put holders and
// receivers at offsets oa and ob: every assignment of the digits that move both.
func (c countedAxis) countPairs(pc *pairCounter, ds []Digit, val []int, oa, ob int) {
	pc.reset()
	eachAssignment(ds, c.cDig, val, func() {
		ca, cb := c.shift(c.cDig, val)
		pc.add(c.ha, oa+ca, c.hb, ob+cb)
	})
}

// shift is what the digits ks add, at their values in val, to the holder's coordinate
// and to the receiver's.
func (c countedAxis) shift(ks, val []int) (a, b int) {
	for _, k := range ks {
		a += c.alpha[k] * val[k]
		b += c.beta[k] * val[k]
	}
	return a, b
}

// setHalves writes to busiestLink's difference arrays buf the counts cnt (per
// direction, in half transfers) of transfers weighing w each.
func setHalves(buf []float64, cnt [2][]int64, w float64) {
	n := len(cnt[0])
	for dir := range 2 {
		d := buf[dir*(n+1) : dir*(n+1)+n]
		for x, v := range cnt[dir] {
			d[x] = float64(v) * w * 0.5
		}
	}
}

// pairCounter adds up, for one line class, the difference arrays (in half transfers,
// per direction) of routing every pair of a holder coordinate and a receiver coordinate
// that differ, and counts the pairs.
type pairCounter struct {
	n          int
	topo       topology
	cnt        [2][]int64
	pa, pb     []int64
	preA, preB []int64 // prefix sums over pa and pb repeated twice
	pairs      int64
}

func newPairCounter(n int, topo topology) *pairCounter {
	return &pairCounter{n: n, topo: topo, cnt: [2][]int64{make([]int64, n), make([]int64, n)},
		pa: make([]int64, n), pb: make([]int64, n), preA: make([]int64, 2*n+1), preB: make([]int64, 2*n+1)}
}

func (pc *pairCounter) reset() {
	clear(pc.cnt[0])
	clear(pc.cnt[1])
	pc.pairs = 0
}

// add adds the pairs of a holder at oa + x (ha[x] of them) and a receiver at ob + y
// (hb[y]).
func (pc *pairCounter) add(ha []int64, oa int, hb []int64, ob int) {
	n := pc.n
	clear(pc.pa)
	clear(pc.pb)
	copy(pc.pa[oa:], ha[:n-oa])
	copy(pc.pb[ob:], hb[:n-ob])
	for i := range 2 * n {
		pc.preA[i+1] = pc.preA[i] + pc.pa[i%n]
		pc.preB[i+1] = pc.preB[i] + pc.pb[i%n]
	}
	switch pc.topo {
	case line:
		pc.addLine()
	case ringUni:
		pc.addWindow(1, n-1, 0, 2)
	default:
		f0 := (n - 1) / 2 // forward when 2f < n
		pc.addWindow(1, f0, 0, 2)
		pc.addWindow(n-f0, n-1, 1, 2)
		if n%2 == 0 { // antipodal: half each way
			pc.addWindow(n/2, n/2, 0, 1)
			pc.addWindow(n/2, n/2, 1, 1)
			pc.pairs -= pc.windowPairs(n/2, n/2) // counted twice
		}
	}
}

// windowPairs is the pairs with y = x + f (mod n), f in [flo, fhi].
func (pc *pairCounter) windowPairs(flo, fhi int) int64 {
	var s int64
	for x, a := range pc.pa {
		if a != 0 {
			s += a * (pc.preB[x+fhi+1] - pc.preB[x+flo])
		}
	}
	return s
}

// addWindow adds the pairs (x, y = x + f mod n), f in [flo, fhi], each u half
// transfers, routed in direction dir as routeRing routes them on a ring: forward from x
// to y (links x .. y-1), or backward from x to y (links y .. x-1 going down). By
// addRun, a forward run adds at x, takes off at y, and adds at 0 when it wraps past the
// end (y < x); a backward run adds at y, takes off at x, and adds at 0 when y > x.
func (pc *pairCounter) addWindow(flo, fhi, dir int, u int64) {
	n := pc.n
	c := pc.cnt[dir]
	var wrapped, all int64
	for x, a := range pc.pa {
		if a == 0 {
			continue
		}
		wb := pc.preB[x+fhi+1] - pc.preB[x+flo]
		if wb == 0 {
			continue
		}
		all += a * wb
		if lo, hi := max(x+flo-n, 0), x+fhi-n; hi >= lo {
			wrapped += a * (pc.preB[hi+1] - pc.preB[lo])
		}
		if dir == 0 {
			c[x] += u * a * wb
		} else {
			c[x] -= u * a * wb
		}
	}
	for y, b := range pc.pb {
		if b == 0 {
			continue
		}
		wa := pc.preA[y+n-flo+1] - pc.preA[y+n-fhi]
		if dir == 0 {
			c[y] -= u * b * wa
		} else {
			c[y] += u * b * wa
		}
	}
	if dir == 0 {
		c[0] += u * wrapped
	} else {
		c[0] += u * (all - wrapped)
	}
	pc.pairs += all
}

// addLine adds every pair on a line: forward from x to y > x, backward from x to y < x.
func (pc *pairCounter) addLine() {
	n := pc.n
	c0, c1 := pc.cnt[0], pc.cnt[1]
	for x, a := range pc.pa {
		if a == 0 {
			continue
		}
		above := pc.preB[n] - pc.preB[x+1] // receivers y > x
		below := pc.preB[x]                // receivers y < x
		c0[x] += 2 * a * above
		c1[x] -= 2 * a * below
		pc.pairs += a * (above + below)
	}
	for y, b := range pc.pb {
		if b == 0 {
			continue
		}
		c0[y] -= 2 * b * pc.preA[y]                  // holders x < y
		c1[y] += 2 * b * (pc.preA[n] - pc.preA[y+1]) // holders x > y
	}
}

// axisLongestHops is groupLongestRoute's hops for a group of one axis (D its digits, the
// axis' digits and their images): the largest segmentHops over the pairs of coordinates
// the assignments of D give, found from where holders and receivers can be rather than
// by enumerating them: for each assignment of the digits that move both coordinates,
// each holder's farthest receiver is the nearest one to its antipode (a bidirectional
// ring), the nearest one behind it (a one-way ring), or an end (a line). Hops are
// integers, so the maximum is the enumeration's. ok is false where it does not apply
// or would not be faster.
func (r *Router) axisLongestHops(p DigitPermutation, digits, D []int, axis int) (hops int, ok bool) {
	rt := r.rt[axis]
	n := rt.n
	if rt.topo != line && rt.topo != ringUni && rt.topo != ringBidi {
		return 0, false
	}
	c, ok := splitAxis(p, digits, D, 0, n)
	if !ok || !countsCheaper(1, c.nc, n, float64(c.na)*float64(c.nb)*float64(c.nc), 4) {
		return 0, false
	}
	pa, next, prev := make([]bool, n), make([]int, n), make([]int, n)
	pb := make([]bool, n)
	val := make([]int, len(p.Digits))
	eachAssignment(p.Digits, c.cDig, val, func() {
		oa, ob := c.shift(c.cDig, val)
		clear(pa)
		clear(pb)
		for x, v := range c.ha[:n-oa] {
			pa[oa+x] = v != 0
		}
		lo, hi := n, -1
		for y, v := range c.hb[:n-ob] {
			if v != 0 {
				pb[ob+y] = true
				lo, hi = min(lo, ob+y), max(hi, ob+y)
			}
		}
		if hi < 0 {
			return
		}
		if rt.topo == line {
			for x, in := range pa {
				if in {
					hops = max(hops, hi-x, x-lo)
				}
			}
			return
		}
		// prev[t]: the first receiver at or before t going down, round the ring; next[t]:
		// at or after t going up.
		last := -1
		for t := range 2 * n {
			if pb[t%n] {
				last = t
			}
			if t >= n {
				prev[t-n] = last % n
			}
		}
		first := -1
		for t := 2*n - 1; t >= 0; t-- {
			if pb[t%n] {
				first = t
			}
			if t < n {
				next[t] = first % n
			}
		}
		for x, in := range pa {
			switch {
			case !in:
			case rt.topo == ringUni:
				hops = max(hops, segmentHops(rt.topo, n, x, prev[(x-1+n)%n]))
			default: // the nearest receivers to the antipode, below and above it
				hops = max(hops, segmentHops(rt.topo, n, x, prev[(x+n/2)%n]), segmentHops(rt.topo, n, x, next[(x+(n+1)/2)%n]))
			}
		}
	})
	return hops, true
}

// axisLoadExcludingCounted is axisLoadExcludingRouted computed from counts: each
// transfer weighs bytes·mult, less bytes·left when it is left out (its assignment
// keeps every class of ex.checks equal), and none when that leaves nothing. So a line
// class's loads are mult times those of all its transfers less min(left, mult) times
// those of the ones left out, and both are pairs of coordinate counts: all the
// transfers as in lineLoadsCounted, the left-out ones over the classes' shared values
// (a class with a line digit fixes its value; the others are one digit each, moving a
// and b by their members' weights). Every sum is exact (countsExact), so the loads are
// the enumeration's (TestAxisLoadExcludingCountedIsTheEnumeration). ok is false where
// it does not apply.
func (r *Router) axisLoadExcludingCounted(axis int, p DigitPermutation, digits, S []int, lSet uint64, bytes, mult float64, ex excluded) (res axisLoadRes, ok bool) {
	rt := r.rt[axis]
	n := rt.n
	if rt.topo != line && rt.topo != ringUni && rt.topo != ringBidi {
		return res, false
	}
	whole := func(x float64) bool { return x >= 0 && x == math.Trunc(x) && x < 1<<40 }
	if !whole(bytes) || !whole(mult) || !whole(ex.left) || bytes == 0 ||
		!countsExact(bytes*mult, float64(assignmentsUpTo(p.Digits, ex.order, 1<<50))) {
		return res, false
	}
	all, ok := splitAxis(p, digits, S, lSet, n)
	if !ok {
		return res, false
	}
	var lDig []int
	for _, k := range ex.order {
		if lSet&(1<<k) != 0 {
			lDig = append(lDig, k)
		}
	}
	kept, ok := keptSplit(p, all, lDig, ex.order, ex.checks, n)
	if !ok {
		return res, false
	}
	val := make([]int, len(p.Digits))
	// A line class's offsets, and on a ring what it is a turn of: the differences of
	// its offsets (-1: none left out).
	class := func() (oa, ob, koa, kob int, valid bool, key [3]int) {
		oa, ob = all.shift(lDig, val)
		koa, kob, valid = kept.offsets(val, oa, ob)
		key = [3]int{-1, -1, -1}
		if rt.topo != line {
			key[0] = ((oa-ob)%n + n) % n
			if valid {
				key[1], key[2] = ((koa-kob)%n+n)%n, ((oa-koa)%n+n)%n
			}
		}
		return
	}
	nck := 1
	for _, size := range kept.cSizes {
		nck *= size
	}
	// Counting scans a class in about (nc + nck)·12n steps, routing takes about 16 a
	// transfer: past this many scans, give the axis to routing.
	budget := math.Inf(1)
	if !countsAlways {
		budget = 16 * float64(assignmentsUpTo(p.Digits, ex.order, 1<<50)) / (float64(all.nc+nck) * float64(12*n))
	}
	scans, over := 0, false
	m, drop := int64(mult), min(int64(ex.left), int64(mult)) // weights of a transfer kept, and taken off one left out
	keepsNone := int64(mult) <= int64(ex.left)
	memo := map[[3]int]int{} // calls per scanned turn
	pcAll, pcKept := newPairCounter(n, rt.topo), newPairCounter(n, rt.topo)
	cnt := [2][]int64{make([]int64, n), make([]int64, n)}
	buf := make([]float64, 2*(n+1))
	gval := make([]int, len(kept.cSizes))
	eachAssignment(p.Digits, lDig, val, func() {
		if over {
			return
		}
		oa, ob, koa, kob, valid, key := class()
		if key[0] >= 0 {
			if calls, ok := memo[key]; ok {
				res.calls += calls
				return
			}
		}
		if scans++; float64(scans) > budget {
			over = true
			return
		}
		all.countPairs(pcAll, p.Digits, val, oa, ob)
		pcKept.reset()
		if valid {
			eachValue(kept.cSizes, gval, func() {
				ca, cb := koa, kob
				for i, v := range gval {
					ca += kept.cAlpha[i] * v
					cb += kept.cBeta[i] * v
				}
				pcKept.add(kept.ha, ca, kept.hb, cb)
			})
		}
		calls := pcAll.pairs
		if keepsNone {
			calls -= pcKept.pairs
		}
		if key[0] >= 0 {
			memo[key] = int(calls)
		}
		res.calls += int(calls)
		units := m*pcAll.pairs - drop*pcKept.pairs
		if units <= 0 {
			return
		}
		for dir := range 2 {
			for x := range n {
				cnt[dir][x] = m*pcAll.cnt[dir][x] - drop*pcKept.cnt[dir][x]
			}
		}
		setHalves(buf, cnt, bytes)
		busiestLink(&res.w, axis, rt, buf, float64(units)*bytes)
	})
	if over {
		return axisLoadRes{}, false
	}
	res.used = res.calls > 0
	return res, true
}

// keptAxis is the left-out transfers' split of an axis' free digits: the classes that
// hold a line digit (fixed per line class: their line digits must agree, and their
// other digits take that value), and the others, each one digit of its members' size
// moving a and b by their members' weights, split as lineLoadsCounted splits digits
// (those moving only a and only b counted in ha and hb, those moving both listed).
type keptAxis struct {
	fixed         [][2][]int // per fixed class: its line digits, its free digits
	alpha, beta   []int      // per digit, as in countedAxis
	ha, hb        []int64
	cSizes        []int
	cAlpha, cBeta []int
}

// keptSplit groups the free digits of order (those not in lDig) by the classes checks
// ties; ok is false when a class' digits differ in size.
func keptSplit(p DigitPermutation, c countedAxis, lDig, order []int, checks [][2]int, n int) (k keptAxis, ok bool) {
	k.alpha, k.beta = c.alpha, c.beta
	uf := NewUnionFind(len(p.Digits))
	for _, ch := range checks {
		uf.Union(ch[0], ch[1])
	}
	var inL uint64
	for _, d := range lDig {
		inL |= 1 << d
	}
	type group struct {
		line, free []int
	}
	groups := map[int]*group{}
	var roots []int
	for _, d := range order {
		g := groups[uf.Find(d)]
		if g == nil {
			g = &group{}
			groups[uf.Find(d)] = g
			roots = append(roots, uf.Find(d))
		}
		if inL&(1<<d) != 0 {
			g.line = append(g.line, d)
		} else {
			g.free = append(g.free, d)
		}
	}
	var aSizes, aCoef, bSizes, bCoef []int
	for _, rt := range roots {
		g := groups[rt]
		size := p.Digits[rt].Size
		for _, d := range append(g.line, g.free...) {
			if p.Digits[d].Size != size {
				return k, false
			}
		}
		if len(g.line) > 0 {
			if len(g.free) > 0 || len(g.line) > 1 {
				k.fixed = append(k.fixed, [2][]int{g.line, g.free})
			}
			continue
		}
		ca, cb := 0, 0
		for _, d := range g.free {
			ca += c.alpha[d]
			cb += c.beta[d]
		}
		switch {
		case ca != 0 && cb != 0:
			k.cSizes, k.cAlpha, k.cBeta = append(k.cSizes, size), append(k.cAlpha, ca), append(k.cBeta, cb)
		case ca != 0:
			aSizes, aCoef = append(aSizes, size), append(aCoef, ca)
		case cb != 0:
			bSizes, bCoef = append(bSizes, size), append(bCoef, cb)
		}
	}
	k.ha, k.hb = sumCounts(aSizes, aCoef, n), sumCounts(bSizes, bCoef, n)
	return k, true
}

// offsets are the left-out transfers' coordinate offsets in the line class val (oa and
// ob: the line digits' own), and whether the class leaves any out (valid: every fixed
// class' line digits agree).
func (k keptAxis) offsets(val []int, oa, ob int) (koa, kob int, valid bool) {
	koa, kob = oa, ob
	for _, f := range k.fixed {
		v := val[f[0][0]]
		for _, d := range f[0][1:] {
			if val[d] != v {
				return 0, 0, false
			}
		}
		for _, d := range f[1] {
			koa += k.alpha[d] * v
			kob += k.beta[d] * v
		}
	}
	return koa, kob, true
}

// eachValue sets val to every assignment of values below sizes (the last fastest) and
// calls fn.
func eachValue(sizes, val []int, fn func()) {
	clear(val)
	for {
		fn()
		i := len(sizes) - 1
		for ; i >= 0; i-- {
			val[i]++
			if val[i] < sizes[i] {
				break
			}
			val[i] = 0
		}
		if i < 0 {
			return
		}
	}
}
