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
}

// splitAxis splits S for axis' digits (see the file comment) and tabulates HA and HB;
// ok is false when the counts would cost more than the enumeration does.
func splitAxis(p DigitPermutation, digits, S []int, lSet uint64, n int) (c countedAxis, ok bool) {
	nd := len(p.Digits)
	c.alpha, c.beta = make([]int, nd), make([]int, nd)
	for _, k := range digits {
		c.alpha[p.Src[k]] += p.Digits[k].Weight
		c.beta[k] = p.Digits[k].Weight
	}
	// Every coordinate is below n (the digits cover the axis); else leave it to routing.
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
	// The enumeration routes |A|·|B|·|C| transfers per line class; the counts cost
	// about 12n per assignment of C, once per class that is not a turn of an earlier one.
	na, nb, nc := assignmentsUpTo(p.Digits, aDig, 1<<40), assignmentsUpTo(p.Digits, bDig, 1<<40), assignmentsUpTo(p.Digits, c.cDig, 1<<40)
	if !countsAlways && float64(nc)*float64(12*n+na+nb) >= float64(na)*float64(nb)*float64(nc)*float64(assignmentsUpTo(p.Digits, c.lDig, 1<<40)) {
		return c, false
	}
	c.ha = coordCounts(p.Digits, aDig, c.alpha, n)
	c.hb = coordCounts(p.Digits, bDig, c.beta, n)
	return c, true
}

// coordCounts is how many assignments of ks give each sum of coef[k]·v_k (all below n).
func coordCounts(ds []Digit, ks []int, coef []int, n int) []int64 {
	h := make([]int64, n)
	h[0] = 1
	next := make([]int64, n)
	for _, k := range ks {
		clear(next)
		for x, c := range h {
			if c == 0 {
				continue
			}
			for v := range ds[k].Size {
				next[x+v*coef[k]] += c
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
	if rt.topo != line {
		turns = gcd(gcd(period(c.ha), period(c.hb)), n)
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
		oa, ob := 0, 0
		for _, k := range c.lDig {
			oa += c.alpha[k] * val[k]
			ob += c.beta[k] * val[k]
		}
		key := -1
		if turns > 0 {
			key = ((oa-ob)%turns + turns) % turns
			if scanned[key] {
				calls += scannedCalls[key]
				return
			}
		}
		pc.reset()
		eachAssignment(p.Digits, c.cDig, val, func() {
			ca, cb := oa, ob
			for _, k := range c.cDig {
				ca += c.alpha[k] * val[k]
				cb += c.beta[k] * val[k]
			}
			pc.add(c.ha, ca, c.hb, cb)
		})
		if key >= 0 {
			scanned[key], scannedCalls[key] = true, int(pc.pairs)
		}
		calls += int(pc.pairs)
		if pc.pairs == 0 {
			return
		}
		for dir := range 2 {
			d := buf[dir*(n+1) : dir*(n+1)+n]
			for x, v := range pc.cnt[dir] {
				d[x] = float64(v) * wgt * 0.5
			}
		}
		busiestLink(w, axis, rt, buf, float64(pc.pairs)*wgt)
	})
	return calls, true
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
	if !ok {
		return 0, false
	}
	pa, next, prev := make([]bool, n), make([]int, n), make([]int, n)
	pb := make([]bool, n)
	val := make([]int, len(p.Digits))
	eachAssignment(p.Digits, c.cDig, val, func() {
		oa, ob := 0, 0
		for _, k := range c.cDig {
			oa += c.alpha[k] * val[k]
			ob += c.beta[k] * val[k]
		}
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
