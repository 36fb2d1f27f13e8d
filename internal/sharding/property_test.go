package sharding

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// randCase is one random mesh, tensor shape and valid canonical sharding.
type randCase struct {
	m     *Mesh
	shape []int64
	s     Sharding
}

func (c randCase) String() string {
	return fmt.Sprintf("mesh %s ids %v shape %v sharding %s", c.m, c.m.DeviceIDs, c.shape, c.s)
}

var randAxisNames = []string{"x", "y", "z", "w", "v"}

// randMesh: 1-5 axes of sizes 1-8 (non-powers of two included), at most maxDevices
// devices, and half the time a random device_ids permutation.
func randMesh(t testing.TB, r *rand.Rand, maxDevices int) *Mesh {
	for {
		n := 1 + r.Intn(5)
		axes := make([]Axis, n)
		total := 1
		for i := range axes {
			axes[i] = Axis{Name: randAxisNames[i], Size: 1 + r.Intn(8)}
			total *= axes[i].Size
		}
		if total > maxDevices {
			continue
		}
		var ids []int
		if r.Intn(2) == 0 {
			ids = r.Perm(total)
		}
		m, err := NewMesh("mesh", axes, ids)
		require.NoError(t, err)
		return m
	}
}

// randPieces splits axis a into a random chain of coexisting pieces, major to minor:
// pre-sizes 1 = p0 < p1 < ... < pk = n with each dividing the next. One piece is the
// full axis.
func randPieces(r *rand.Rand, a Axis) []AxisRef {
	if a.Size == 1 {
		return []AxisRef{FullAxis(a)}
	}
	var out []AxisRef
	for pre := 1; pre < a.Size; {
		rest := a.Size / pre
		var divs []int
		for k := 2; k <= rest; k++ {
			if rest%k == 0 {
				divs = append(divs, k)
			}
		}
		k := divs[r.Intn(len(divs))]
		out = append(out, AxisRef{Name: a.Name, Pre: pre, Size: k, Of: a.Size})
		pre *= k
	}
	if len(out) == 1 {
		return []AxisRef{FullAxis(a)}
	}
	return out
}

// randSharding: every piece of every axis goes to a random dim (in random order), to
// replicated, to unreduced, or nowhere; dims are randomly open and carry priorities.
func randCaseOf(t testing.TB, r *rand.Rand, maxDevices, maxDim int) randCase {
	m := randMesh(t, r, maxDevices)
	rank := r.Intn(4)
	s := Sharding{Dims: make([]DimSharding, rank)}
	var pieces []AxisRef
	for _, a := range m.Axes {
		pieces = append(pieces, randPieces(r, a)...)
	}
	r.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
	for _, p := range pieces {
		switch c := r.Intn(7); {
		case c < 4 && rank > 0:
			d := r.Intn(rank)
			s.Dims[d].Axes = append(s.Dims[d].Axes, p)
		case c == 4:
			s.Replicated = append(s.Replicated, p)
		case c == 5:
			s.Unreduced = append(s.Unreduced, p)
		}
	}
	shape := make([]int64, rank)
	for d := range s.Dims {
		s.Dims[d].Priority = NoPriority
		s.Dims[d].Open = r.Intn(4) == 0
		if (s.Dims[d].Open || len(s.Dims[d].Axes) > 0) && r.Intn(4) == 0 {
			s.Dims[d].Priority = r.Intn(4)
		}
		// Dims smaller than, equal to and bigger than the shard count; size 1; size 0
		// when unsharded.
		shape[d] = 1 + r.Int63n(int64(maxDim))
		if len(s.Dims[d].Axes) == 0 && r.Intn(10) == 0 {
			shape[d] = 0
		}
	}
	s.Canonicalize(m)
	require.NoError(t, s.Validate(m, shape, ""), "generated %s", s)
	return randCase{m, shape, s}
}

// refRanges computes a device's ranges straight from API.md's definitions, independently
// of Layout: position = index of id in device_ids, coords row-major, coordinate on
// "x:(m)k" = (c_x / (n/(m*k))) % k, mixed-radix shard index, [min(L*t, D), min((L+1)*t, D)).
func refRanges(c randCase, id int) [][2]int64 {
	pos := id
	if c.m.DeviceIDs != nil {
		pos = slices.Index(c.m.DeviceIDs, id)
	}
	coord := map[string]int{}
	for i := len(c.m.Axes) - 1; i >= 0; i-- {
		a := c.m.Axes[i]
		coord[a.Name] = pos % a.Size
		pos /= a.Size
	}
	out := make([][2]int64, len(c.shape))
	for d, D := range c.shape {
		L, n := 0, 1
		for _, r := range c.s.Dims[d].Axes {
			L = L*r.Size + (coord[r.Name]/(r.Of/(r.Pre*r.Size)))%r.Size
			n *= r.Size
		}
		t := (D + int64(n) - 1) / int64(n)
		out[d] = [2]int64{min(int64(L)*t, D), min(int64(L+1)*t, D)}
	}
	return out
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// flat is the row-major offset of idx in shape.
func flat(shape, idx []int64) int64 {
	f := int64(0)
	for d := range shape {
		f = f*shape[d] + idx[d]
	}
	return f
}

// forEachIndex calls fn with every index of the box ranges (fn must not keep idx).
func forEachIndex(ranges [][2]int64, fn func(idx []int64)) {
	idx := make([]int64, len(ranges))
	var rec func(d int)
	rec = func(d int) {
		if d == len(ranges) {
			fn(idx)
			return
		}
		for i := ranges[d][0]; i < ranges[d][1]; i++ {
			idx[d] = i
			rec(d + 1)
		}
	}
	rec(0)
}

func TestPropertyTiles(t *testing.T) {
	r := rand.New(rand.NewSource(20261122))
	for i := range 400 {
		c := randCaseOf(t, r, 256, 9)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			l := NewLayout(c.m, c.shape, c.s)
			devices := c.m.NumDevices()
			counts := c.s.ShardCounts()
			require.Equal(t, 0, devices%Product(c.s.UsedAxes()), "%s", c)
			rf := devices / Product(flatten(c.s.Dims))
			tiles := l.Tiles(nil)
			require.Len(t, tiles, devices)

			// (3) ranges inside [0, D], local shape = ceildiv, padding = tile - length, and
			// every range is what API.md's definition gives.
			for id, tile := range tiles {
				require.Equal(t, id, tile.Device)
				require.Equal(t, l.TileOf(id), tile)
				require.Equal(t, refRanges(c, id), tile.Ranges, "%s device %d", c, id)
				require.Equal(t, c.m.PositionOf(id), c.m.PositionOfCoords(tile.Coords))
				for d, D := range c.shape {
					s, e := tile.Ranges[d][0], tile.Ranges[d][1]
					require.True(t, 0 <= s && s <= e && e <= D, "%s device %d dim %d: [%d, %d)", c, id, d, s, e)
					require.Equal(t, CeilDiv(D, int64(counts[d])), tile.LocalShape[d])
					require.Equal(t, tile.LocalShape[d]-(e-s), tile.Padding[d])
					require.GreaterOrEqual(t, tile.Padding[d], int64(0))
				}
			}

			// (1) every element is owned by exactly rf devices.
			owned := make([]int, numel(c.shape))
			for _, tile := range tiles {
				forEachIndex(tile.Ranges, func(idx []int64) { owned[flat(c.shape, idx)]++ })
			}
			for f, n := range owned {
				require.Equal(t, rf, n, "%s: element %d owned by %d devices, want %d", c, f, n, rf)
			}

			// (2) Locate agrees with the tiles, for random indices.
			if numel(c.shape) == 0 {
				require.Nil(t, l.Locate(make([]int64, len(c.shape))))
				return
			}
			for range 20 {
				idx := make([]int64, len(c.shape))
				for d, D := range c.shape {
					idx[d] = r.Int63n(D)
				}
				owners := l.Locate(idx)
				require.Len(t, owners, rf, "%s index %v", c, idx)
				holders := map[int]bool{}
				for _, o := range owners {
					holders[o.Device] = true
					tile := tiles[o.Device]
					require.Equal(t, tile.Coords, o.Coords)
					for d := range idx {
						require.True(t, tile.Ranges[d][0] <= idx[d] && idx[d] < tile.Ranges[d][1], "%s: owner %d of %v", c, o.Device, idx)
						require.Equal(t, idx[d]-tile.Ranges[d][0], o.LocalIndex[d])
					}
				}
				require.Len(t, holders, rf, "owners are distinct")
				require.True(t, slices.IsSortedFunc(owners, func(a, b Owner) int { return a.Device - b.Device }))
				for id, tile := range tiles {
					if holders[id] {
						continue
					}
					inside := true
					for d := range idx {
						inside = inside && tile.Ranges[d][0] <= idx[d] && idx[d] < tile.Ranges[d][1]
					}
					require.False(t, inside, "%s: device %d holds %v but Locate misses it", c, id, idx)
				}
			}
		})
	}
}

func flatten(dims []DimSharding) []AxisRef {
	var out []AxisRef
	for _, d := range dims {
		out = append(out, d.Axes...)
	}
	return out
}

// (4) print then parse round-trips in all three forms.
func TestPropertyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := range 500 {
		c := randCaseOf(t, r, 1<<12, 50)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			forms := map[string]string{
				"text":   jsonString(c.s.Text(c.m.Name)),
				"body":   jsonString(c.s.Body()),
				"object": mustJSON(t, c.s.Object(c.m.Name)),
			}
			if spec, ok := c.s.PartitionSpec(); ok {
				forms["array"] = mustJSON(t, spec)
				if idx, ok := indexSpec(c.m, spec); ok {
					forms["array of indices"] = mustJSON(t, idx)
				}
			}
			for name, raw := range forms {
				got, err := Parse(json.RawMessage(raw), c.m, c.shape, "source")
				require.NoError(t, err, "%s: %s (%s)", name, raw, c)
				require.True(t, c.s.Equal(got), "%s: %s -> %s (%s)", name, raw, got, c)
				require.Equal(t, c.s.Body(), got.Body())
			}
		})
	}
}

// indexSpec rewrites a PartitionSpec with full axes only into mesh axis indices.
func indexSpec(m *Mesh, spec []any) ([]any, bool) {
	out := make([]any, len(spec))
	for d, e := range spec {
		switch v := e.(type) {
		case nil:
		case string:
			i := m.AxisIndex(v)
			if i < 0 {
				return nil, false
			}
			out[d] = i
		case []string:
			is := make([]int, len(v))
			for k, n := range v {
				if is[k] = m.AxisIndex(n); is[k] < 0 {
					return nil, false
				}
			}
			out[d] = is
		}
	}
	return out, true
}
