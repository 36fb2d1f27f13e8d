package propagation

import (
	"slices"

	"github.com/shardplan/shardplan/internal/sharding"
)

type axisRef = sharding.AxisRef

// isAxisPrefix reports whether a is a strict sub-axis prefix of b: same axis, same
// pre-size, and a's size a proper divisor of b's (x:(1)2 of x:(1)4, or of x).
func isAxisPrefix(a, b axisRef) bool {
	return a.Name == b.Name && a.Pre == b.Pre && a.Size < b.Size && b.Size%a.Size == 0
}

// isStrictPrefix reports whether list old is a strict prefix of list new: equal
// elements, except that old's last element may be a sub-axis prefix of new's element at
// the same position.
func isStrictPrefix(old, new []axisRef) bool {
	if len(old) > len(new) {
		return false
	}
	if len(old) == 0 {
		return len(new) > 0
	}
	last := len(old) - 1
	for i := range last {
		if old[i] != new[i] {
			return false
		}
	}
	if old[last] == new[last] {
		return len(new) > len(old)
	}
	return isAxisPrefix(old[last], new[last])
}

// isPrefixOrEqual is isStrictPrefix or equality.
func isPrefixOrEqual(old, new []axisRef) bool {
	return slices.Equal(old, new) || isStrictPrefix(old, new)
}

// prefixWithoutOverlap is the longest prefix of a that does not overlap b: a itself
// when they do not overlap, the part of a major to b when a starts before b, or none.
func prefixWithoutOverlap(a, b axisRef) (axisRef, bool) {
	if a.Name != b.Name {
		return a, true
	}
	if !a.CanCoexist(b) {
		return axisRef{}, false
	}
	if !a.Overlaps(b) {
		return a, true
	}
	if a.Pre < b.Pre {
		return a.Sub(a.Pre, b.Pre/a.Pre), true
	}
	return axisRef{}, false
}

// truncate walks axes with the product of the accepted ones so far; check returns the
// axis (continue), a smaller prefix of it (keep it and stop) or false (stop before it).
// The input is never modified.
func truncate(axes []axisRef, check func(a axisRef, prev int64) (axisRef, bool)) []axisRef {
	prev := int64(1)
	for i, a := range axes {
		b, ok := check(a, prev)
		if !ok {
			return axes[:i:i]
		}
		if b != a {
			out := make([]axisRef, i+1)
			copy(out, axes[:i])
			out[i] = b
			return out
		}
		prev *= int64(b.Size)
	}
	return axes
}

func product(axes []axisRef) int64 {
	p := int64(1)
	for _, a := range axes {
		p *= int64(a.Size)
	}
	return p
}

// mergeAppend returns a new list: a then b, adjacent sub-axes merged.
func mergeAppend(a []axisRef, b ...axisRef) []axisRef {
	out := make([]axisRef, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	return sharding.MergeAdjacent(out)
}

// appendSuffixAfter appends to out the pieces of new beyond its prefix old (old
// prefix-or-equal new).
func appendSuffixAfter(out, old, new []axisRef) []axisRef {
	if len(old) == 0 {
		return append(out, new...)
	}
	last := len(old) - 1
	if old[last] != new[last] {
		n := new[last]
		out = append(out, n.Sub(old[last].Next(), n.Size/old[last].Size))
	}
	return append(out, new[last+1:]...)
}

// foldCompatible folds tensor list in into the running compatible major axes cur
// (Shardy's step 2): the longest list every folded tensor agrees with, growing only
// while canExpand.
func foldCompatible(cur, in []axisRef, canExpand bool) ([]axisRef, bool) {
	n := min(len(cur), len(in))
	i := 0
	for i < n && cur[i] == in[i] {
		i++
	}
	if i == n {
		if len(in) > len(cur) && canExpand {
			return in, true
		}
		return cur, canExpand
	}
	a, b := cur[i], in[i]
	switch {
	case isAxisPrefix(a, b): // cur holds the shorter element
		if i == len(cur)-1 && canExpand {
			return in, true
		}
		return cur[: i+1 : i+1], false
	case isAxisPrefix(b, a): // in holds the shorter element
		if i == len(in)-1 {
			return cur, canExpand
		}
		out := make([]axisRef, i+1)
		copy(out, cur[:i])
		out[i] = b
		return out, false
	}
	return cur[:i:i], false
}
