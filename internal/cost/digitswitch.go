package cost

import (
	"math"
	"slices"
)

// On a GPU model (gpus_per_node > 0, no axis_links on the mesh's axes) Price sends a
// transfer that stays in its node through the sender's NVLink egress port and the
// receiver's ingress port, and one between nodes through the NICs of both nodes
// (gpus_per_node consecutive mesh positions per node). The busiest resource is then a
// device's port or a node's NICs, and for a digit map both are counted from the digits
// alone: a node is an assignment of the position digits above the node boundary, so
// a transfer stays in its node when the holder's high digits equal the receiver's.

// switchLoads is what a digit map puts on a GPU model's ports and NICs, in transfers
// (each p.Bytes).
type switchLoads struct {
	portIn, portOut int64 // most moving transfers inside a node one device receives / sends
	nicIn, nicOut   int64 // most transfers between nodes one node receives / sends
}

// nodeSplit places p's digits against the node boundary: high[k] when digit k lies
// above it, and lowFill, the positions of a node no digit of p covers (each repeats the
// same transfers, so a node's NICs carry lowFill copies). ok is false when the boundary
// falls inside a digit (then straddle is that digit and f the part of its size below
// the boundary, when f divides it; straddle is -1 otherwise), or when the digits of an
// axis do not lay out as a mixed radix of it.
func (r *Router) nodeSplit(p DigitPermutation) (high []bool, lowFill int64, straddle, f int, ok bool) {
	straddle = -1
	type place struct{ weight, size, k int } // k < 0: positions no digit covers
	var places []place
	var ks []int
	for i, a := range r.m.Axes {
		ks = ks[:0]
		for k, d := range p.Digits {
			if d.Axis == i && d.Size > 1 {
				ks = append(ks, k)
			}
		}
		slices.SortFunc(ks, func(x, y int) int { return p.Digits[x].Weight - p.Digits[y].Weight })
		cur, st := 1, r.stride[i]
		for _, k := range ks {
			d := p.Digits[k]
			if d.Weight < cur || d.Weight%cur != 0 {
				return nil, 0, -1, 0, false
			}
			if d.Weight > cur {
				places = append(places, place{cur * st, d.Weight / cur, -1})
			}
			places = append(places, place{d.Weight * st, d.Size, k})
			cur = d.Weight * d.Size
		}
		if a.Size%cur != 0 {
			return nil, 0, -1, 0, false
		}
		if cur < a.Size {
			places = append(places, place{cur * st, a.Size / cur, -1})
		}
	}
	slices.SortFunc(places, func(x, y place) int { return x.weight - y.weight })
	g := r.f.gpusPerNode
	if g >= r.n {
		g = r.n // one node: every digit is low
	}
	high, lowFill = make([]bool, len(p.Digits)), 1
	prod := 1
	for _, pl := range places {
		if pl.weight != prod {
			return nil, 0, -1, 0, false
		}
		switch {
		case prod >= g:
			if pl.k >= 0 {
				high[pl.k] = true
			}
		case prod*pl.size > g:
			// The boundary falls inside this place: the part below it fills the node
			// when no digit covers the place; a digit must be split (splitDigit).
			if g%prod != 0 || pl.size%(g/prod) != 0 {
				return nil, 0, -1, 0, false
			}
			if pl.k >= 0 {
				return nil, 0, pl.k, g / prod, false
			}
			lowFill *= int64(g / prod)
		case pl.k < 0:
			lowFill *= int64(pl.size)
		}
		prod *= pl.size
	}
	return high, lowFill, -1, 0, prod == r.n
}

// nodeDigits is p placed against the node boundary (nodeSplit), with a digit across it
// (a whole axis of 16 on 8 GPUs a node) split there first (split): its parts on either
// side are digits of their own. ok is false when no split aligns p with the nodes.
func (r *Router) nodeDigits(p DigitPermutation) (q DigitPermutation, high []bool, lowFill int64, split, ok bool) {
	high, lowFill, k, f, ok := r.nodeSplit(p)
	if ok || k < 0 {
		return p, high, lowFill, false, ok
	}
	q = splitDigit(p, k, f)
	high, lowFill, _, _, ok = r.nodeSplit(q)
	return q, high, lowFill, true, ok
}

// splitDigit is p with digit k, and every digit its value is tied to (k's class under
// Src and Same: they share its size), each split into a low digit of size f and a high
// one of size/f (value = low + f x high, the low part at the digit's weight on a mesh
// axis). The transfers are the same: a value equals another exactly when both parts do.
func splitDigit(p DigitPermutation, k, f int) DigitPermutation {
	n := len(p.Digits)
	uf := NewUnionFind(n)
	for x := range n {
		uf.Union(x, p.Src[x])
		if p.Same != nil && p.Same[x] >= 0 {
			uf.Union(x, p.Same[x])
		}
	}
	root := uf.Find(k)
	// Digit x becomes lo[x] (and hi[x] when split), in order.
	lo, hi := make([]int, n), make([]int, n)
	var q DigitPermutation
	q.Bytes = p.Bytes
	for x, d := range p.Digits {
		lo[x], hi[x] = len(q.Digits), -1
		if uf.Find(x) != root {
			q.Digits = append(q.Digits, d)
			continue
		}
		q.Digits = append(q.Digits, Digit{Axis: d.Axis, Size: f, Weight: d.Weight}, Digit{Axis: d.Axis, Size: d.Size / f, Weight: d.Weight * f})
		hi[x] = lo[x] + 1
	}
	q.Src = make([]int, len(q.Digits))
	if p.Same != nil {
		q.Same = make([]int, len(q.Digits))
	}
	for x := range n {
		parts := [][2]int{{lo[x], lo[p.Src[x]]}}
		if hi[x] >= 0 {
			parts = append(parts, [2]int{hi[x], hi[p.Src[x]]})
		}
		for i, pt := range parts {
			q.Src[pt[0]] = pt[1]
			if p.Same == nil {
				continue
			}
			switch j := p.Same[x]; {
			case j < 0:
				q.Same[pt[0]] = -1
			case i == 0:
				q.Same[pt[0]] = lo[j]
			default:
				q.Same[pt[0]] = hi[j]
			}
		}
	}
	return q
}

// switchApplies reports whether the router prices digit maps by switchLoads: a GPU
// model whose mesh axes all follow the nodes (none named in axis_links).
func (r *Router) switchApplies() bool {
	if r.f.gpusPerNode <= 0 {
		return false
	}
	for _, rt := range r.rt {
		if rt.override && rt.n > 1 {
			return false
		}
	}
	return true
}

// switchLoadsOf counts p's loads: in closed form when no transfer is left out (Same is
// nil) and every free digit is read by one digit, else by enumerating every assignment
// of the digits (at most maxDigitEnum; ok false past it).
func switchLoadsOf(p DigitPermutation, high []bool, lowFill int64) (switchLoads, bool) {
	if l, ok := switchLoadsClosed(p, high, lowFill); ok {
		return l, true
	}
	return switchLoadsEnum(p, high, lowFill)
}

// switchLoadsClosed is switchLoadsOf in closed form. Digit k of a transfer's holder is
// the value of digit Src[k], a receiver's digit or a free one. With r the receiver and
// H the high digits, a transfer moves unless every digit equals its Src image, and it
// stays in its node when every high digit does. Each count below is a sum over
// assignments of products of per-class factors (the digits one equality ties together
// take one value), and its maximum is found by asking whether one more equality can
// fail while the ones that raise the count hold.
func switchLoadsClosed(p DigitPermutation, high []bool, lowFill int64) (switchLoads, bool) {
	if p.Same != nil {
		return switchLoads{}, false
	}
	nd := len(p.Digits)
	isReal := func(k int) bool { return p.Digits[k].Axis >= 0 }
	size := func(k int) int64 { return int64(p.Digits[k].Size) }
	readers := make([]int, nd)
	for k := range nd {
		if isReal(k) {
			j := p.Src[k]
			if p.Digits[j].Size != p.Digits[k].Size {
				return switchLoads{}, false
			}
			readers[j]++
		}
	}
	for f := range nd {
		if !isReal(f) && readers[f] != 1 {
			return switchLoads{}, false // a free digit read twice ties holders; unread, copies
		}
	}
	var l switchLoads
	// Ingress of receiver r: the free digits read by low digits are anything (pFL of
	// them); it takes them all when r's digits meet the high digits' equalities, less
	// the one from itself when every equality holds. Some r meets the first and not the
	// second when a low digit's equality is not implied by the high ones (ufH).
	ufH := NewUnionFind(nd)
	for k := range nd {
		if j := p.Src[k]; isReal(k) && high[k] && isReal(j) {
			ufH.Union(k, j)
		}
	}
	pF, pFL := int64(1), int64(1)
	breakIn := false
	for k := range nd {
		if !isReal(k) {
			continue
		}
		j := p.Src[k]
		switch {
		case !isReal(j):
			pF *= size(j)
			if !high[k] {
				pFL *= size(j)
			}
		case !high[k] && ufH.Find(k) != ufH.Find(j):
			breakIn = true
		}
	}
	l.portIn = pFL
	if !breakIn {
		l.portIn--
	}
	// Egress of holder s: the transfers whose Src images equal s. The receiver digits
	// no digit reads are anything; the digits reading one receiver digit must agree
	// (ties). Inside the node: every high receiver digit is s's (read ones tie s's
	// digit to its readers', unread ones are fixed). Less the one to itself when every
	// read digit equals its readers.
	first := make([]int, nd)
	for i := range first {
		first[i] = -1
	}
	ufS := NewUnionFind(nd)
	for k := range nd {
		if j := p.Src[k]; isReal(k) && isReal(j) {
			if first[j] < 0 {
				first[j] = k
			} else {
				ufS.Union(k, first[j])
			}
		}
	}
	uL := int64(1)
	for j := range nd {
		switch {
		case !isReal(j):
		case first[j] < 0 && !high[j]:
			uL *= size(j)
		case first[j] >= 0 && high[j]:
			ufS.Union(j, first[j])
		}
	}
	breakOut := false
	for j := range nd {
		if isReal(j) && first[j] >= 0 && !high[j] && ufS.Find(j) != ufS.Find(first[j]) {
			breakOut = true
		}
	}
	l.portOut = uL
	if !breakOut {
		l.portOut--
	}
	// NIC ingress of node N (its receivers' high digits): every transfer into the node
	// less those that stay, which for receiver r number pFL when r's digits meet the
	// high equalities. Summed over the node's low digits, that is one value per class
	// of ufH with no high digit, one with exactly one, and zero (for some N) with two.
	rL, minCount := int64(1), int64(1)
	highIn := make([]int, nd)
	for k := range nd {
		if isReal(k) {
			if !high[k] {
				rL *= size(k)
			} else {
				highIn[ufH.Find(k)]++
			}
		}
	}
	for k := range nd {
		if isReal(k) && ufH.Find(k) == k {
			switch highIn[k] {
			case 0:
				minCount *= size(k)
			case 1:
			default:
				minCount = 0
			}
		}
		if minCount == 0 {
			break
		}
	}
	l.nicIn = lowFill * (rL*pF - pFL*minCount)
	// NIC egress of node N (its holders' high digits): the transfers whose high Src
	// images are N (a digit read by a high digit is fixed), less those that stay (the
	// high receiver digits are N too). Some N keeps the first and loses the second when
	// a high digit's readers among the high digits are not tied to it.
	firstH := make([]int, nd)
	for i := range firstH {
		firstH[i] = -1
	}
	ufN := NewUnionFind(nd)
	for k := range nd {
		if j := p.Src[k]; isReal(k) && high[k] {
			if firstH[j] < 0 {
				firstH[j] = k
			} else {
				ufN.Union(k, firstH[j])
			}
		}
	}
	all, stay := int64(1), int64(1)
	breakN := false
	for x := range nd {
		if firstH[x] < 0 {
			all *= size(x)
			if !isReal(x) || !high[x] {
				stay *= size(x)
			}
		} else if isReal(x) && high[x] && ufN.Find(x) != ufN.Find(firstH[x]) {
			breakN = true
		}
	}
	if breakN {
		stay = 0
	}
	l.nicOut = lowFill * (all - stay)
	return l, true
}

// switchLoadsEnum is switchLoadsOf by enumerating every assignment of p's digits: each
// is a transfer unless Same leaves it out; it moves when a digit differs from its Src
// image, and stays in its node when no high digit does.
func switchLoadsEnum(p DigitPermutation, high []bool, lowFill int64) (switchLoads, bool) {
	nd := len(p.Digits)
	total, devices, nodes := 1, 1, 1
	for k, d := range p.Digits {
		if total *= d.Size; total > maxDigitEnum {
			return switchLoads{}, false
		}
		if d.Axis >= 0 {
			devices *= d.Size
			if high[k] {
				nodes *= d.Size
			}
		}
	}
	portIn, portOut := make([]int32, devices), make([]int32, devices)
	nicIn, nicOut := make([]int64, nodes), make([]int64, nodes)
	val := make([]int, nd)
	for {
		left := p.Same != nil
		for k, j := range p.Same {
			if j >= 0 && val[k] != val[j] {
				left = false
				break
			}
		}
		if !left {
			rd, hd, rn, hn := 0, 0, 0, 0
			moves, stays := false, true
			for k, d := range p.Digits {
				if d.Axis < 0 {
					continue
				}
				v, w := val[k], val[p.Src[k]]
				rd, hd = rd*d.Size+v, hd*d.Size+w
				if v != w {
					moves = true
					stays = stays && !high[k]
				}
				if high[k] {
					rn, hn = rn*d.Size+v, hn*d.Size+w
				}
			}
			switch {
			case !moves:
			case stays:
				portIn[rd]++
				portOut[hd]++
			default:
				nicIn[rn]++
				nicOut[hn]++
			}
		}
		i := nd - 1
		for ; i >= 0; i-- {
			if val[i]++; val[i] < p.Digits[i].Size {
				break
			}
			val[i] = 0
		}
		if i < 0 {
			break
		}
	}
	var l switchLoads
	for i := range portIn {
		l.portIn, l.portOut = max(l.portIn, int64(portIn[i])), max(l.portOut, int64(portOut[i]))
	}
	for i := range nicIn {
		l.nicIn, l.nicOut = max(l.nicIn, nicIn[i]), max(l.nicOut, nicOut[i])
	}
	l.nicIn *= lowFill
	l.nicOut *= lowFill
	return l, true
}

// priceSwitched prices a digit map on a GPU model from its loads, as Price would the
// transfers listed one by one: the bandwidth term is the busiest port or node (a node
// only when strictly slower, as Price finds ports first), one switch crossing per
// transfer, the base and per-step latency of the classes used, and for all_to_all_v
// the cheapest used class's step per further peer message.
func (r *Router) priceSwitched(l switchLoads, p DigitPermutation, kind Kind, moving int64, maxPeers int) TrafficEstimate {
	f := r.f
	nv, ib := &f.links[linkNVLink], &f.links[linkIB]
	b := float64(p.Bytes)
	var w worstRes
	if port := max(l.portIn, l.portOut); port > 0 {
		load := float64(port) * b
		dir := 0
		if l.portIn >= l.portOut {
			dir = 1
		}
		w = worstRes{time: load / f.p2pNV, load: load, class: linkNVLink, kind: resPort, dir: dir, x: -1}
	}
	if nic := max(l.nicIn, l.nicOut); nic > 0 {
		load := float64(nic) * b
		dir := 0
		if l.nicIn >= l.nicOut {
			dir = 1
		}
		if tm := load / (f.p2pNIC * float64(f.gpusPerNode)); tm > w.time {
			w = worstRes{time: tm, load: load, class: linkIB, kind: resNode, dir: dir, x: -1}
		}
	}
	base, lat, alpha := 0.0, 0.0, math.Inf(1)
	for _, c := range []struct {
		used bool
		l    *link
		over float64
	}{{l.portIn > 0, nv, 0}, {l.nicIn > 0, ib, f.p2pOverhead}} {
		if c.used {
			base, lat, alpha = max(base, c.l.base), max(lat, c.l.lat+c.over), min(alpha, c.l.lat)
		}
	}
	if kind == AllToAllV && maxPeers > 1 {
		lat += float64(maxPeers-1) * alpha
	}
	var out TrafficEstimate
	out.Bytes = moving * p.Bytes
	out.MaxPeers = maxPeers
	out.MaxHops = 1
	out.MaxLinkBytes = w.load
	out.BandwidthUS = w.time
	out.worst, out.router = w, r
	out.LatencyUS = base + lat
	out.TimeUS = f.combine(out.LatencyUS, out.BandwidthUS)
	out.Link = w.class.String()
	return out
}

// priceDigitsSwitched is PriceDigitPermutation and PriceDigitExchange on a GPU model.
func (r *Router) priceDigitsSwitched(p DigitPermutation, kind Kind, moving int64, maxPeers int) (TrafficEstimate, bool) {
	if !r.switchApplies() {
		return TrafficEstimate{}, false
	}
	p, high, lowFill, _, ok := r.nodeDigits(p)
	if !ok {
		return TrafficEstimate{}, false
	}
	l, ok := switchLoadsOf(p, high, lowFill)
	if !ok {
		return TrafficEstimate{}, false
	}
	return r.priceSwitched(l, p, kind, moving, maxPeers), true
}
