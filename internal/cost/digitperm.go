package cost

import "math"

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
// themselves keep their buffer.
type DigitPermutation struct {
	Digits []Digit
	Src    []int
	Bytes  int64
}

// maxDigitEnum caps the digit assignments PriceDigitPermutation enumerates per axis or
// per coupled group of axes.
const maxDigitEnum = 1 << 16

// PriceDigitPermutation prices p exactly as Price would price its transfers listed one
// by one, in time that depends on the digits of each axis and their images (at most
// n_axis² assignments per axis) rather than on the device count. ok is false when it
// does not apply: a model with switched axes or nodes, or digit groups too large to
// enumerate; the caller then routes the transfers.
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
	f, m := r.f, r.m
	if f.gpusPerNode > 0 {
		return TrafficEstimate{}, false
	}
	na := len(m.Axes)
	nd := len(p.Digits)
	onAxis := make([][]int, na)
	for k, d := range p.Digits {
		onAxis[d.Axis] = append(onAxis[d.Axis], k)
	}
	for i := range na {
		if len(onAxis[i]) > 0 && (r.rt[i].topo == switched || r.rt[i].n != coverage(p.Digits, onAxis[i])) {
			return TrafficEstimate{}, false
		}
	}
	// S_μ (bitmask over digits) and L_μ.
	sSet := make([]uint64, na)
	for i := range na {
		for _, k := range onAxis[i] {
			sSet[i] |= 1<<k | 1<<p.Src[k]
		}
	}
	var out TrafficEstimate
	var w worstRes
	used := false
	base := 0.0
	for i := range na {
		if len(onAxis[i]) == 0 || sSet[i] == 0 {
			continue
		}
		var lSet uint64
		for j := range na {
			for _, k := range onAxis[j] {
				switch {
				case j < i:
					lSet |= 1 << k
				case j > i:
					lSet |= 1 << p.Src[k]
				}
			}
		}
		S := bitsOf(sSet[i], nd)
		if assignments(p.Digits, S) > maxDigitEnum {
			return TrafficEstimate{}, false
		}
		mult := 1.0
		for k := range nd {
			if (sSet[i]|lSet)&(1<<k) == 0 {
				mult *= float64(p.Digits[k].Size)
			}
		}
		rt := r.rt[i]
		n := rt.n
		// Diff arrays per line class (assignment of S ∩ L), both directions.
		groups := map[uint64][]float64{}
		val := make([]int, nd)
		eachAssignment(p.Digits, S, val, func() {
			var key uint64
			for _, k := range S {
				if lSet&(1<<k) != 0 {
					key = key*uint64(p.Digits[k].Size) + uint64(val[k])
				}
			}
			a, b := 0, 0 // holder's and receiver's coordinate on axis i
			for _, k := range onAxis[i] {
				a += val[p.Src[k]] * p.Digits[k].Weight
				b += val[k] * p.Digits[k].Weight
			}
			if a == b {
				return
			}
			buf := groups[key]
			if buf == nil {
				buf = make([]float64, 2*(n+1))
				groups[key] = buf
			}
			wgt := float64(p.Bytes) * mult
			routeSegment(rt.topo, n, a, b, wgt, func(dir, start, length int, x float64) {
				lo := start
				if dir == 1 {
					lo = start - length
				}
				lo = ((lo % n) + n) % n
				base := dir * (n + 1)
				if hi := lo + length; hi <= n {
					buf[base+lo] += x
					buf[base+hi] -= x
				} else {
					buf[base+lo] += x
					buf[base+n] -= x
					buf[base] += x
					buf[base+hi-n] -= x
				}
			})
		})
		for _, buf := range groups {
			for dir := range 2 {
				acc := 0.0
				for x := range n {
					acc += buf[dir*(n+1)+x]
					if tm := acc / rt.bw; tm > w.time {
						w = worstRes{time: tm, load: acc, class: rt.class, kind: resRing, axis: i, line: -1, x: x, dir: dir}
					}
				}
			}
		}
		if len(groups) > 0 {
			used = true
			base = max(base, f.links[rt.class].base)
		}
	}
	if !used {
		return TrafficEstimate{}, true // every device keeps its buffer
	}
	// Longest route: axes coupled through shared digits are maximised together.
	comp := make([]int, na)
	for i := range comp {
		comp[i] = i
	}
	var find func(int) int
	find = func(x int) int {
		for comp[x] != x {
			comp[x] = comp[comp[x]]
			x = comp[x]
		}
		return x
	}
	for i := range na {
		for j := i + 1; j < na; j++ {
			if sSet[i]&sSet[j] != 0 {
				comp[find(i)] = find(j)
			}
		}
	}
	lat, hopsMax := 0.0, 0
	for root := range na {
		if find(root) != root {
			continue
		}
		var union uint64
		var axes []int
		for i := range na {
			if find(i) == root && sSet[i] != 0 {
				union |= sSet[i]
				axes = append(axes, i)
			}
		}
		if len(axes) == 0 {
			continue
		}
		D := bitsOf(union, nd)
		if assignments(p.Digits, D) > maxDigitEnum {
			return TrafficEstimate{}, false
		}
		val := make([]int, nd)
		bestLat, bestHops := 0.0, 0
		eachAssignment(p.Digits, D, val, func() {
			l, h := 0.0, 0
			for _, i := range axes {
				a, b := 0, 0
				for _, k := range onAxis[i] {
					a += val[p.Src[k]] * p.Digits[k].Weight
					b += val[k] * p.Digits[k].Weight
				}
				if a == b {
					continue
				}
				hh := segmentHops(r.rt[i].topo, r.rt[i].n, a, b)
				h += hh
				l += float64(hh) * r.rt[i].lat
			}
			bestLat, bestHops = max(bestLat, l), max(bestHops, h)
		})
		lat += bestLat
		hopsMax += bestHops
	}
	// Bytes: every device that does not keep its buffer receives Bytes. Keepers are the
	// fixed points of the digit permutation: on each cycle of Src all digits are equal.
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
	others := float64(m.NumDevices()) / devices
	out.Bytes = int64(math.Round((devices - keepers) * others * float64(p.Bytes)))
	out.MaxPeers = 1
	out.MaxHops = hopsMax
	out.MaxLinkBytes = w.load
	out.BandwidthUS = w.time
	out.worst, out.router = w, r
	out.LatencyUS = base + lat
	out.TimeUS = f.combine(out.LatencyUS, out.BandwidthUS)
	out.Link = w.class.String()
	return out, true
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

func assignments(ds []Digit, ks []int) int {
	n := 1
	for _, k := range ks {
		n *= ds[k].Size
		if n > maxDigitEnum {
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

// routeSegment splits the route from a to b on an axis of n positions and topology topo
// into runs of directed links, as Router.add routes it: seg(dir, start, length, bytes).
func routeSegment(topo topology, n, a, b int, w float64, seg func(dir, start, length int, w float64)) {
	fwd := ((b-a)%n + n) % n
	switch topo {
	case line:
		if b > a {
			seg(0, a, b-a, w)
		} else {
			seg(1, a, a-b, w)
		}
	case ringUni:
		seg(0, a, fwd, w)
	default: // ringBidi
		back := n - fwd
		switch {
		case fwd < back:
			seg(0, a, fwd, w)
		case back < fwd:
			seg(1, a, back, w)
		default:
			seg(0, a, fwd, w/2)
			seg(1, a, back, w/2)
		}
	}
}

// segmentHops is the hops of the route from a to b, as Router.add counts them.
func segmentHops(topo topology, n, a, b int) int {
	fwd := ((b-a)%n + n) % n
	switch topo {
	case line:
		return abs(b - a)
	case ringUni:
		return fwd
	}
	return min(fwd, n-fwd)
}
