package cost

import (
	"math"
	"slices"
)

// eliminateAbove is the number of assignments of a coupled group above which routeMax
// eliminates digits; the branch and bound alone is faster on smaller groups, where
// the elimination's tables cost more than they save (on random groups of 2-16-way
// digits: 2.8 against 6.0 µs at 256 assignments, 14 against 10 µs at 4,096, 281 against
// 21 µs at 65,536). A variable so that the tests can hold the elimination to the branch
// and bound on small groups too.
var eliminateAbove = 1024

// tableFloats returns n floats for a maxTable, from a slab the Router keeps: a group's
// tables live only while eliminate runs, and allocating them one by one was a fifth of
// the bytes a 65,536-device plan allocates. The slab is reused from its start when
// eliminate starts; when it runs out, a larger one replaces it and the
// tables already handed out keep the old one.
func (r *Router) tableFloats(n int) []float64 {
	if cap(r.tables)-len(r.tables) < n {
		r.tables = make([]float64, 0, max(2*cap(r.tables), n, 256))
	}
	at := len(r.tables)
	r.tables = r.tables[:at+n]
	return r.tables[at : at+n : at+n]
}

// maxTable is a function of some digits, tabulated: vals[i] is its value at the i-th
// assignment of scope in eachAssignment's order (the last digit varies fastest).
type maxTable struct {
	scope []int
	mask  uint64 // scope as a bitmask over digits
	vals  []float64
}

// eliminate is the largest sum of the group's axis terms (with rm.weight), by max-plus
// variable elimination: the terms are tables over each axis' digits; a digit is taken
// out by replacing the tables that use it with one over the rest of their digits, their
// sum maximised over it. Why: the branch and bound enumerates most of the group's
// assignments when the axes form a cycle (a 4-cycle of 16-way axes is 65,536
// assignments; eliminating digit by digit is four tables of 16³ entries). The digit
// taken out next is the one whose new table is smallest, so a step never enumerates
// more than the group's assignments. Sums are added in another order than the branch
// and bound's: the maximum is the same when the terms are integers (hops), run decides.
func (rm *routeMax) eliminate() float64 {
	rm.r.tables = rm.r.tables[:0] // no table of an earlier call is in use
	rm.size = make([]int, len(rm.p.Digits))
	for d, dg := range rm.p.Digits {
		rm.size[d] = dg.Size
	}
	tabs := make([]maxTable, len(rm.axes))
	for j := range rm.axes {
		t := &tabs[j]
		t.scope = slices.Sorted(slices.Values(rm.axisDigits[j]))
		for _, k := range t.scope {
			t.mask |= 1 << k
		}
		t.vals = rm.terms(j, t.scope, rm.r.tableFloats(rm.coverage(t.scope))[:0])
	}
	left := rm.mergeDigits(tabs)
	for len(left) > 0 {
		at, union := rm.nextDigit(tabs, left)
		k := left[at]
		left = append(left[:at], left[at+1:]...)
		var in []maxTable
		rest := tabs[:0:0]
		for _, t := range tabs {
			if t.mask&(1<<k) != 0 {
				in = append(in, t)
			} else {
				rest = append(rest, t)
			}
		}
		tabs = append(rest, rm.maxOut(in, k, union&^(1<<k)))
	}
	sum := 0.0
	for _, t := range tabs {
		sum += t.vals[0]
	}
	return sum
}

// nextDigit picks the digit of left whose elimination makes the smallest table: its
// index in left, and the union of the scopes of the tables that use it (itself
// included).
func (rm *routeMax) nextDigit(tabs []maxTable, left []int) (int, uint64) {
	best, bestSize, bestUnion := 0, math.MaxInt, uint64(0)
	for at, k := range left {
		union := uint64(1) << k
		for _, t := range tabs {
			if t.mask&(1<<k) != 0 {
				union |= t.mask
			}
		}
		size := 1
		for d := range rm.p.Digits {
			if union&(1<<d) != 0 {
				size *= rm.size[d]
			}
		}
		if size < bestSize {
			best, bestSize, bestUnion = at, size, union
		}
	}
	return best, bestUnion
}

// maxOut is the table over scope (a bitmask) of the largest, over digit k, sum of the
// tables in. Each input's index is kept as a base (the scope's digits) plus k's value
// times k's stride in it, so the inner loop over k is two loads and an add per table.
func (rm *routeMax) maxOut(in []maxTable, k int, scope uint64) maxTable {
	out := maxTable{scope: bitsOf(scope, len(rm.size)), mask: scope}
	size := rm.coverage(out.scope)
	out.vals = rm.r.tableFloats(size)
	// stride[t][x]: the stride in table t of the scope's digit x; kStride[t]: of k.
	stride := make([][]int, len(in))
	kStride := make([]int, len(in))
	for t, tab := range in {
		stride[t] = make([]int, len(out.scope))
		st := 1
		for y := len(tab.scope) - 1; y >= 0; y-- {
			d := tab.scope[y]
			if d == k {
				kStride[t] = st
			} else if x := indexOf(out.scope, d); x >= 0 {
				stride[t][x] = st
			}
			st *= rm.size[d]
		}
	}
	digit := make([]int, len(out.scope))
	base := make([]int, len(in))
	vals := make([][]float64, len(in))
	for t, tab := range in {
		vals[t] = tab.vals
	}
	nk := rm.size[k]
	for i := range size {
		most := math.Inf(-1)
		if len(in) == 2 { // the common case: a digit shared by two axes' terms
			v0, v1 := vals[0][base[0]:], vals[1][base[1]:]
			s0, s1 := kStride[0], kStride[1]
			for v := range nk {
				most = max(most, v0[v*s0]+v1[v*s1])
			}
		} else {
			for v := range nk {
				s := 0.0
				for t, vs := range vals {
					s += vs[base[t]+v*kStride[t]]
				}
				most = max(most, s)
			}
		}
		out.vals[i] = most
		// The next assignment of the scope, the last digit fastest.
		for x := len(digit) - 1; x >= 0; x-- {
			d := out.scope[x]
			digit[x]++
			for t := range in {
				base[t] += stride[t][x]
			}
			if digit[x] < rm.size[d] {
				break
			}
			for t := range in {
				base[t] -= digit[x] * stride[t][x]
			}
			digit[x] = 0
		}
	}
	return out
}

// indexOf is the position of x in xs, -1 when absent.
func indexOf(xs []int, x int) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// terms appends to vals axis j's term at every assignment of its digits (scope, the
// digits of axisDigits[j] in any order) in eachAssignment's order, as term gives it:
// the coordinates are kept up to date digit by digit instead of summed anew for each
// assignment.
func (rm *routeMax) terms(j int, scope []int, vals []float64) []float64 {
	i := rm.axes[j]
	rt := rm.r.rt[i]
	ds := rm.p.Digits
	alpha, beta := make([]int, len(scope)), make([]int, len(scope)) // per scope digit
	for x, d := range scope {
		for _, k := range rm.onAxis[i] {
			if rm.p.Src[k] == d {
				alpha[x] += ds[k].Weight
			}
			if k == d {
				beta[x] += ds[k].Weight
			}
		}
	}
	digit := make([]int, len(scope))
	a, b := 0, 0
	for range coverage(ds, scope) {
		if a == b {
			vals = append(vals, 0)
		} else {
			vals = append(vals, float64(segmentHops(rt.topo, rt.n, a, b))*rm.weight[j])
		}
		for x := len(scope) - 1; x >= 0; x-- {
			digit[x]++
			a += alpha[x]
			b += beta[x]
			if digit[x] < ds[scope[x]].Size {
				break
			}
			a -= digit[x] * alpha[x]
			b -= digit[x] * beta[x]
			digit[x] = 0
		}
	}
	return vals
}

// coverage is the number of assignments of scope's digits (by rm.size).
func (rm *routeMax) coverage(scope []int) int {
	n := 1
	for _, d := range scope {
		n *= rm.size[d]
	}
	return n
}

// mergeDigits merges digits that the tables cannot tell apart from one digit: two
// digits used by the same tables and next to each other, in one order, in each of
// their scopes. In such a table the pair's values sit at index v·s' + v' times the
// minor digit's stride, as one digit of size s·s' would, so the tables stay as they
// are: the major digit takes the pair's size and the minor one leaves every scope.
// Eliminating the merged digit maximises over both at once, the very sums the two
// eliminations would form. It returns the digits left to eliminate.
func (rm *routeMax) mergeDigits(tabs []maxTable) []int {
	left := append([]int(nil), rm.digits...)
	for {
		merged := false
		for _, t := range tabs {
			for x := 0; x+1 < len(t.scope) && !merged; x++ {
				d, e := t.scope[x], t.scope[x+1]
				if rm.adjacentEverywhere(tabs, d, e) {
					rm.size[d] *= rm.size[e]
					for i := range tabs {
						if tabs[i].mask&(1<<e) != 0 {
							tabs[i].scope = slices.DeleteFunc(slices.Clone(tabs[i].scope), func(k int) bool { return k == e })
							tabs[i].mask &^= 1 << e
						}
					}
					left = slices.DeleteFunc(left, func(k int) bool { return k == e })
					merged = true
				}
			}
			if merged {
				break
			}
		}
		if !merged {
			return left
		}
	}
}

// adjacentEverywhere reports whether every table that uses d or e uses both, with e
// right after d in its scope.
func (rm *routeMax) adjacentEverywhere(tabs []maxTable, d, e int) bool {
	for _, t := range tabs {
		hasD, hasE := t.mask&(1<<d) != 0, t.mask&(1<<e) != 0
		if hasD != hasE {
			return false
		}
		if hasD {
			x := slices.Index(t.scope, d)
			if x+1 >= len(t.scope) || t.scope[x+1] != e {
				return false
			}
		}
	}
	return true
}
