package sharding_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// sub builds the sub-axis "name:(pre)size" of an axis of size of.
func sub(name string, pre, size, of int) sharding.AxisRef {
	return sharding.AxisRef{Name: name, Pre: pre, Size: size, Of: of}
}

func full(name string, size int) sharding.AxisRef {
	return sharding.FullAxis(sharding.Axis{name, size})
}

func TestParseAxisRef(t *testing.T) {
	m := sharding.MustMesh(t, "x=4,y=6,z=1")
	tests := []struct {
		name string
		in   string
		want sharding.AxisRef
		msg  string // error message part, when an error is expected
	}{
		{name: "full axis", in: "x", want: full("x", 4)},
		{name: "size-one axis", in: "z", want: full("z", 1)},
		{name: "major half", in: "x:(1)2", want: sub("x", 1, 2, 4)},
		{name: "minor half", in: "x:(2)2", want: sub("x", 2, 2, 4)},
		{name: "non power of two", in: "y:(2)3", want: sub("y", 2, 3, 6)},
		{name: "whole axis as sub-axis is the full axis", in: "x:(1)4", want: full("x", 4)},
		{name: "unknown axis", in: "q", msg: `unknown mesh axis "q" (mesh axes: x, y, z)`},
		{name: "unknown axis of sub-axis", in: "q:(1)2", msg: "unknown mesh axis"},
		{name: "k = 1", in: "x:(1)1", msg: "need k > 1"},
		{name: "k = 0", in: "x:(1)0", msg: "need k > 1"},
		{name: "m = 0", in: "x:(0)2", msg: "m >= 1"},
		{name: "negative m", in: "x:(-2)2", msg: "m >= 1"},
		{name: "m*k not dividing", in: "y:(4)2", msg: "m*k dividing 6"},
		{name: "k not dividing", in: "x:(1)3", msg: "m*k dividing 4"},
		{name: "too big", in: "x:(2)4", msg: "m*k dividing 4"},
		{name: "m*k overflowing", in: "x:(4611686018427387904)4", msg: "m*k dividing 4"},
		{name: "huge k", in: "x:(1)9223372036854775807", msg: "m*k dividing 4"},
		{name: "no parens", in: "x:2", msg: `not of the form "x:(m)k"`},
		{name: "unclosed", in: "x:(1", msg: "not of the form"},
		{name: "missing k", in: "x:(1)", msg: "not of the form"},
		{name: "letters", in: "x:(a)b", msg: "not of the form"},
		{name: "empty", in: "", msg: "unknown mesh axis"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sharding.ParseAxisRef(tc.in, m, "f")
			if tc.msg != "" {
				sharding.RequireFieldError(t, err, "f", tc.msg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestAxisRefString(t *testing.T) {
	assert.Equal(t, "x", full("x", 4).String())
	assert.Equal(t, "x:(2)2", sub("x", 2, 2, 4).String())
	assert.Equal(t, "x", sub("x", 1, 4, 4).String())
	assert.True(t, sub("x", 1, 4, 4).IsFull())
	assert.False(t, sub("x", 1, 2, 4).IsFull())
}

// Seed 001: axis x=4 split into "x":(1)2 (major) and "x":(2)2 (minor); API.md: a device's
// coordinate on "x:(m)k" is (coord_x / (n/(m*k))) % k.
func TestAxisRefCoord(t *testing.T) {
	tests := []struct {
		name string
		r    sharding.AxisRef
		want []int // per coordinate on the whole axis
	}{
		{name: "x=4 full", r: full("x", 4), want: []int{0, 1, 2, 3}},
		{name: "x:(1)2 of x=4", r: sub("x", 1, 2, 4), want: []int{0, 0, 1, 1}},
		{name: "x:(2)2 of x=4", r: sub("x", 2, 2, 4), want: []int{0, 1, 0, 1}},
		{name: "y:(2)2 of y=8", r: sub("y", 2, 2, 8), want: []int{0, 0, 1, 1, 0, 0, 1, 1}},
		{name: "y:(1)2 of y=6", r: sub("y", 1, 2, 6), want: []int{0, 0, 0, 1, 1, 1}},
		{name: "y:(2)3 of y=6", r: sub("y", 2, 3, 6), want: []int{0, 1, 2, 0, 1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]int, tc.r.Of)
			for c := range got {
				got[c] = tc.r.Coord(c)
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.r.Of/(tc.r.Pre*tc.r.Size), tc.r.Minor())
		})
	}
}

// PROPAGATION.md (a): contains, overlaps and canCoexist over the interval view [pre, next).
func TestAxisRefRelations(t *testing.T) {
	tests := []struct {
		name                         string
		a, b                         sharding.AxisRef
		contains, overlaps, coexists bool
	}{
		{name: "full contains its sub-axis", a: full("x", 4), b: sub("x", 2, 2, 4), contains: true, overlaps: true, coexists: true},
		{name: "sub-axis does not contain full", a: sub("x", 2, 2, 4), b: full("x", 4), overlaps: true, coexists: true},
		{name: "same", a: sub("x", 1, 2, 4), b: sub("x", 1, 2, 4), contains: true, overlaps: true, coexists: true},
		{name: "disjoint halves", a: sub("x", 1, 2, 4), b: sub("x", 2, 2, 4), coexists: true},
		{name: "x and x:(1)2 overlap", a: full("x", 4), b: sub("x", 1, 2, 4), contains: true, overlaps: true, coexists: true},
		{name: "seed 001: (1)4 and (2)4 of 8 overlap", a: sub("x", 1, 4, 8), b: sub("x", 2, 4, 8), overlaps: true, coexists: true},
		{name: "(1)4 contains (2)2 of 8", a: sub("x", 1, 4, 8), b: sub("x", 2, 2, 8), contains: true, overlaps: true, coexists: true},
		{name: "(1)2 and (4)2 of 8 apart", a: sub("x", 1, 2, 8), b: sub("x", 4, 2, 8), coexists: true},
		{name: "x=6: (1)2 and (3)2 cannot coexist", a: sub("x", 1, 2, 6), b: sub("x", 3, 2, 6)},
		{name: "x=6: (3)2 and (1)2 cannot coexist", a: sub("x", 3, 2, 6), b: sub("x", 1, 2, 6)},
		{name: "x=6: (1)2 and (2)3", a: sub("x", 1, 2, 6), b: sub("x", 2, 3, 6), coexists: true},
		{name: "x=12: (1)3 and (4)3 cannot coexist", a: sub("x", 1, 3, 12), b: sub("x", 4, 3, 12)},
		{name: "x=6: (1)3 and (2)3 overlap", a: sub("x", 1, 3, 6), b: sub("x", 2, 3, 6), overlaps: true},
		{name: "different axes", a: full("x", 4), b: full("y", 4), coexists: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.contains, tc.a.Contains(tc.b), "contains")
			assert.Equal(t, tc.overlaps, tc.a.Overlaps(tc.b), "overlaps")
			assert.Equal(t, tc.overlaps, tc.b.Overlaps(tc.a), "overlaps is symmetric")
			assert.Equal(t, tc.coexists, tc.a.CanCoexist(tc.b), "canCoexist")
			assert.Equal(t, tc.coexists, tc.b.CanCoexist(tc.a), "canCoexist is symmetric")
		})
	}
}

func TestMergeAdjacentAndSort(t *testing.T) {
	m := sharding.MustMesh(t, "x=2,y=8,z=4")
	tests := []struct {
		name string
		in   []sharding.AxisRef
		sort bool
		want []sharding.AxisRef
	}{
		{name: "halves merge into the full axis", in: []sharding.AxisRef{sub("z", 1, 2, 4), sub("z", 2, 2, 4)}, want: []sharding.AxisRef{full("z", 4)}},
		{name: "seed 001: (1)2 and (2)4 merge to (1)8", in: []sharding.AxisRef{sub("y", 1, 2, 8), sub("y", 2, 4, 8)}, want: []sharding.AxisRef{full("y", 8)}},
		{name: "partial merge", in: []sharding.AxisRef{sub("y", 1, 2, 8), sub("y", 2, 2, 8)}, want: []sharding.AxisRef{sub("y", 1, 4, 8)}},
		{name: "chain of three", in: []sharding.AxisRef{sub("y", 1, 2, 8), sub("y", 2, 2, 8), sub("y", 4, 2, 8)}, want: []sharding.AxisRef{full("y", 8)}},
		{name: "minor then major does not merge", in: []sharding.AxisRef{sub("z", 2, 2, 4), sub("z", 1, 2, 4)}, want: []sharding.AxisRef{sub("z", 2, 2, 4), sub("z", 1, 2, 4)}},
		{name: "not adjacent", in: []sharding.AxisRef{sub("y", 1, 2, 8), sub("y", 4, 2, 8)}, want: []sharding.AxisRef{sub("y", 1, 2, 8), sub("y", 4, 2, 8)}},
		{name: "other axis between", in: []sharding.AxisRef{sub("z", 1, 2, 4), full("x", 2), sub("z", 2, 2, 4)}, want: []sharding.AxisRef{sub("z", 1, 2, 4), full("x", 2), sub("z", 2, 2, 4)}},
		{name: "sorted then merged", sort: true, in: []sharding.AxisRef{sub("z", 2, 2, 4), full("x", 2), sub("z", 1, 2, 4)}, want: []sharding.AxisRef{full("x", 2), full("z", 4)}},
		{name: "seed 001 replicated order", sort: true, in: []sharding.AxisRef{sub("y", 4, 2, 8), full("x", 2), sub("y", 1, 2, 8)}, want: []sharding.AxisRef{full("x", 2), sub("y", 1, 2, 8), sub("y", 4, 2, 8)}},
		{name: "empty", in: nil, want: []sharding.AxisRef{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]sharding.AxisRef{}, tc.in...)
			if tc.sort {
				sharding.SortAxisRefs(in, m)
			}
			assert.Equal(t, tc.want, sharding.MergeAdjacent(in))
		})
	}
	assert.Equal(t, 16, sharding.Product([]sharding.AxisRef{full("x", 2), sub("y", 1, 2, 8), full("z", 4)}))
	assert.Equal(t, 1, sharding.Product(nil))
}
