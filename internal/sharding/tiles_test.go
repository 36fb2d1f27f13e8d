package sharding

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func layout(t testing.TB, mesh string, shape []int64, sharding string) *Layout {
	t.Helper()
	m := mustMesh(t, mesh)
	return NewLayout(m, shape, mustParse(t, sharding, m, shape))
}

// Seed 000's worked maps, checked in both directions. The mesh axes are named m and n
// like the seed's device coordinates d(m, n).
func TestSeed000WorkedMaps(t *testing.T) {
	tests := []struct {
		name           string
		mesh           string
		shape          []int64
		sharding       string
		tile           []int64
		d2g, g2d       string
		index          []int64
		device         int
		coords         []int
		local          []int64
		deviceRanges   [][2]int64
		outOfShapeSeed []int64 // the seed's slip (ERRATA): not inside the tensor
	}{
		{
			name: "[[0],[1]] K=16 L=23 on 3x4", mesh: "m=3,n=4", shape: []int64{16, 23}, sharding: `[[0], [1]]`,
			tile: []int64{6, 6},
			d2g:  "d(m, n)[k, l] -> t[m * 6 + k, n * 6 + l]",
			g2d:  "t[i, j] -> d(i floordiv 6, j floordiv 6)[i mod 6, j mod 6]",
			// t[13, 17] -> d(2, 2)[1, 5]; device id 2*4+2 = 10.
			index: []int64{13, 17}, device: 10, coords: []int{2, 2}, local: []int64{1, 5},
			deviceRanges: [][2]int64{{12, 16}, {12, 18}}, // K=16: the last row shard is short
		},
		{
			// ERRATA: the seed checks t[9, 19], outside the 27x14 tensor; t[9, 11] is inside.
			// Dim 0 by n: t = 27 ceildiv 2 = 14; dim 1 by m: t = 14 ceildiv 5 = 3.
			// t[9, 11] -> d(m = 11 floordiv 3, n = 9 floordiv 14)[9 mod 14, 11 mod 3] = d(3, 0)[9, 2].
			name: "[[1],[0]] K=27 L=14 on 5x2", mesh: "m=5,n=2", shape: []int64{27, 14}, sharding: `[[1], [0]]`,
			tile:  []int64{14, 3},
			d2g:   "d(m, n)[k, l] -> t[n * 14 + k, m * 3 + l]",
			g2d:   "t[i, j] -> d(j floordiv 3, i floordiv 14)[i mod 14, j mod 3]",
			index: []int64{9, 11}, device: 6, coords: []int{3, 0}, local: []int64{9, 2},
			deviceRanges:   [][2]int64{{0, 14}, {9, 12}},
			outOfShapeSeed: []int64{9, 19},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := layout(t, tc.mesh, tc.shape, tc.sharding)
			assert.Equal(t, tc.tile, l.Tile)
			d2g, g2d := l.Maps()
			assert.Equal(t, tc.d2g, d2g)
			assert.Equal(t, tc.g2d, g2d)

			// global -> device
			owners := l.Locate(tc.index)
			require.Len(t, owners, 1, "a fully sharded tensor has one owner per element")
			assert.Equal(t, Owner{Device: tc.device, Coords: tc.coords, LocalIndex: tc.local}, owners[0])

			// device -> global: the tile's start plus the local index is the global index.
			tile := l.TileOf(tc.device)
			assert.Equal(t, tc.coords, tile.Coords)
			assert.Equal(t, tc.deviceRanges, tile.Ranges)
			for d := range tc.index {
				assert.Equal(t, tc.index[d], tile.Ranges[d][0]+tc.local[d], "dim %d", d)
			}
			assert.Equal(t, tc.tile, tile.LocalShape)

			if tc.outOfShapeSeed != nil {
				assert.Nil(t, l.Locate(tc.outOfShapeSeed), "an index outside the shape has no owner")
				assert.False(t, l.Contains(tc.outOfShapeSeed))
			}
		})
	}
}

// box is a tile statement: the device at coords holds rows [r0, r1) and cols [c0, c1).
type box struct {
	coords []int
	ranges [][2]int64
}

// Seed 000's mesh-contents pictures, as tile statements (ERRATA applied: "13 14", "25").
// Picture labels are 1-based "row col" digits; ranges here are 0-based and half-open.
func TestSeed000Pictures(t *testing.T) {
	tests := []struct {
		name     string
		mesh     string
		shape    []int64
		sharding string
		tile     []int64
		boxes    []box
	}{
		{name: "6x6 [[0],[1]] on 2x3", mesh: "a=2,b=3", shape: []int64{6, 6}, sharding: `[[0], [1]]`, tile: []int64{3, 2},
			boxes: []box{
				{[]int{0, 0}, [][2]int64{{0, 3}, {0, 2}}},
				{[]int{0, 1}, [][2]int64{{0, 3}, {2, 4}}}, // 13 14 / 23 24 / 33 34
				{[]int{1, 2}, [][2]int64{{3, 6}, {4, 6}}}, // 45 46 / 55 56 / 65 66
			}},
		{name: "6x6 [[1],[0]] on 2x3", mesh: "a=2,b=3", shape: []int64{6, 6}, sharding: `[[1], [0]]`, tile: []int64{2, 3},
			boxes: []box{
				{[]int{0, 1}, [][2]int64{{2, 4}, {0, 3}}}, // 31 32 33 / 41 42 43
				{[]int{1, 0}, [][2]int64{{0, 2}, {3, 6}}}, // 14 15 16 / 24 25 26
				{[]int{1, 2}, [][2]int64{{4, 6}, {3, 6}}}, // 54 55 56 / 64 65 66
			}},
		{name: "6x6 [[0],[1]] on 2x6", mesh: "a=2,b=6", shape: []int64{6, 6}, sharding: `[[0], [1]]`, tile: []int64{3, 1},
			boxes: []box{
				{[]int{0, 4}, [][2]int64{{0, 3}, {4, 5}}}, // 15 / 25 / 35
				{[]int{1, 3}, [][2]int64{{3, 6}, {3, 4}}}, // 44 / 54 / 64
			}},
		{name: "2x6 [[],[0,1]] on 2x3", mesh: "a=2,b=3", shape: []int64{2, 6}, sharding: `[[], [0, 1]]`, tile: []int64{2, 1},
			boxes: []box{
				{[]int{0, 2}, [][2]int64{{0, 2}, {2, 3}}}, // 13 / 23
				{[]int{1, 0}, [][2]int64{{0, 2}, {3, 4}}}, // 14 / 24
			}},
		{name: "2x6 [[],[0]] on 2x3", mesh: "a=2,b=3", shape: []int64{2, 6}, sharding: `[[], [0]]`, tile: []int64{2, 3},
			boxes: []box{
				{[]int{0, 1}, [][2]int64{{0, 2}, {0, 3}}}, // 11 12 13 / 21 22 23, replicated over b
				{[]int{1, 2}, [][2]int64{{0, 2}, {3, 6}}},
			}},
		{name: "4x8 [[0],[1,2]] on 2x2x2", mesh: "a=2,b=2,c=2", shape: []int64{4, 8}, sharding: `[[0], [1, 2]]`, tile: []int64{2, 2},
			boxes: []box{
				{[]int{0, 1, 0}, [][2]int64{{0, 2}, {4, 6}}}, // 15 16 / 25 26
				{[]int{1, 0, 1}, [][2]int64{{2, 4}, {2, 4}}}, // 33 34 / 43 44
			}},
		{name: "4x8 [[0],[2]] on 2x2x2", mesh: "a=2,b=2,c=2", shape: []int64{4, 8}, sharding: `[[0], [2]]`, tile: []int64{2, 4},
			boxes: []box{
				{[]int{0, 1, 1}, [][2]int64{{0, 2}, {4, 8}}}, // 15 16 17 18 / 25 26 27 28
			}},
		{name: "4x4 [[0],[1,2]] on 2x2x2", mesh: "a=2,b=2,c=2", shape: []int64{4, 4}, sharding: `[[0], [1, 2]]`, tile: []int64{2, 1},
			boxes: []box{
				{[]int{0, 1, 0}, [][2]int64{{0, 2}, {2, 3}}}, // 13 / 23
			}},
		{name: "4x4 [[0,1],[2]] on 2x2x2", mesh: "a=2,b=2,c=2", shape: []int64{4, 4}, sharding: `[[0, 1], [2]]`, tile: []int64{1, 2},
			boxes: []box{
				{[]int{0, 0, 1}, [][2]int64{{0, 1}, {2, 4}}}, // 13 14 (ERRATA: not "13 41")
				{[]int{1, 1, 0}, [][2]int64{{3, 4}, {0, 2}}}, // 41 42
			}},
		{name: "6x6 [[0],[]] on 3", mesh: "a=3", shape: []int64{6, 6}, sharding: `[[0], []]`, tile: []int64{2, 6},
			boxes: []box{{[]int{1}, [][2]int64{{2, 4}, {0, 6}}}}},
		{name: "6x6 [[],[0]] on 3", mesh: "a=3", shape: []int64{6, 6}, sharding: `[[], [0]]`, tile: []int64{6, 2},
			boxes: []box{{[]int{2}, [][2]int64{{0, 6}, {4, 6}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := layout(t, tc.mesh, tc.shape, tc.sharding)
			assert.Equal(t, tc.tile, l.Tile)
			for _, b := range tc.boxes {
				id := l.Mesh.DeviceAt(l.Mesh.PositionOfCoords(b.coords))
				tile := l.TileOf(id)
				assert.Equal(t, b.coords, tile.Coords)
				assert.Equal(t, b.ranges, tile.Ranges, "device %v", b.coords)
			}
		})
	}
}

// Seed 001's examples: local shapes of the Shardy sharding representation.
func TestSeed001LocalShapes(t *testing.T) {
	tests := []struct {
		name     string
		mesh     string
		shape    []int64
		sharding string
		local    []int64
	}{
		{name: `[{"x"}, {"z", "y"}] : tensor<4x8xf32>`, mesh: "x=2,y=4,z=2", shape: []int64{4, 8}, sharding: `[{"x"}, {"z", "y"}]`, local: []int64{2, 1}},
		{name: `[{"x"}, {"z", ?}] : tensor<4x8xf32>`, mesh: "x=2,y=4,z=2", shape: []int64{4, 8}, sharding: `[{"x"}, {"z", ?}]`, local: []int64{2, 4}},
		{name: `[{"x"}, {?}], replicated={"y"}`, mesh: "x=2,y=4,z=2", shape: []int64{4, 8}, sharding: `[{"x"}, {?}], replicated={"y"}`, local: []int64{2, 8}},
		{name: `[{"x"}, {"y":(2)2}] on y=8`, mesh: "x=2,y=8,z=2", shape: []int64{4, 8}, sharding: `[{"x"}, {"y":(2)2}]`, local: []int64{2, 4}},
		{name: `with replicated={"y":(1)2}`, mesh: "x=2,y=8,z=2", shape: []int64{4, 8}, sharding: `[{"x"}, {"y":(2)2}], replicated={"y":(1)2}`, local: []int64{2, 4}},
		{name: `[{"x"},{"y"}] on x=4,y=2`, mesh: "x=4,y=2", shape: []int64{4, 4}, sharding: `[{"x"}, {"y"}]`, local: []int64{1, 2}},
		{name: `[{"devices":(1)4}, {"devices":(4)2}]`, mesh: "devices=8", shape: []int64{4, 4}, sharding: `[{"devices":(1)4}, {"devices":(4)2}]`, local: []int64{1, 2}},
		{name: `divisibility 7x3x8`, mesh: "x=8,y=2,z=3", shape: []int64{7, 3, 8}, sharding: `[{"x"}, {"y"}, {"z"}]`, local: []int64{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := layout(t, tc.mesh, tc.shape, jsonString(tc.sharding))
			assert.Equal(t, tc.local, l.Tile)
			for _, tile := range l.Tiles(nil) {
				require.Equal(t, tc.local, tile.LocalShape, "device %d", tile.Device)
			}
		})
	}
}

// Seed 001: x=4 split into "x":(1)2 and "x":(2)2 (the reshape 8 -> 2x4) keeps every
// element on the device that held it: device c holds flat elements [2c, 2c+2) before and
// after.
func TestSeed001ReshapeKeepsData(t *testing.T) {
	before := layout(t, "x=4", []int64{8}, jsonString(`[{"x"}]`))
	after := layout(t, "x=4", []int64{2, 4}, jsonString(`[{"x":(1)2}, {"x":(2)2}]`))
	for c := range 4 {
		b, a := before.TileOf(c), after.TileOf(c)
		assert.Equal(t, [][2]int64{{int64(2 * c), int64(2*c + 2)}}, b.Ranges)
		var flat []int64
		for i := a.Ranges[0][0]; i < a.Ranges[0][1]; i++ {
			for j := a.Ranges[1][0]; j < a.Ranges[1][1]; j++ {
				flat = append(flat, i*4+j)
			}
		}
		assert.Equal(t, []int64{int64(2 * c), int64(2*c + 1)}, flat, "device %d", c)
	}
	// "x":(1)2 is the major half: devices 0,1 hold row 0 and devices 2,3 row 1.
	assert.Equal(t, [2]int64{1, 2}, after.TileOf(2).Ranges[0])
	assert.Equal(t, [2]int64{2, 4}, after.TileOf(1).Ranges[1])
}

// Seed 001: mesh_xy = x=4,y=2 is a splitting of mesh_full = devices=8, so
// [{"x"},{"y"}] and [{"devices":(1)4}, {"devices":(4)2}] place every element alike; and
// <@mesh_0, "b"> (a=4,b=2) is <@mesh_1, "z"> (x=2,y=2,z=2).
func TestSeed001EquivalentMeshes(t *testing.T) {
	pairs := []struct {
		name string
		a, b *Layout
	}{
		{"mesh_xy vs mesh_full",
			layout(t, "x=4,y=2", []int64{4, 4}, jsonString(`[{"x"}, {"y"}]`)),
			layout(t, "devices=8", []int64{4, 4}, jsonString(`[{"devices":(1)4}, {"devices":(4)2}]`))},
		{"mesh_0 b vs mesh_1 z",
			layout(t, "a=4,b=2", []int64{6}, `["b"]`),
			layout(t, "x=2,y=2,z=2", []int64{6}, `["z"]`)},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			ta, tb := p.a.Tiles(nil), p.b.Tiles(nil)
			require.Len(t, tb, len(ta))
			for i := range ta {
				assert.Equal(t, ta[i].Ranges, tb[i].Ranges, "device %d", i)
			}
		})
	}
}

// Seed 001's divisibility example: 7x3x8 on x=8,y=2,z=3 with [{"x"}, {"y"}, {"z"}] is
// legal and padded: tiles 1, 2, 3 long; the tail shards are short or empty.
func TestSeed001Divisibility(t *testing.T) {
	l := layout(t, "x=8,y=2,z=3", []int64{7, 3, 8}, jsonString(`[{"x"}, {"y"}, {"z"}]`))
	require.Equal(t, []int64{1, 2, 3}, l.Tile)
	tests := []struct {
		coords  []int
		ranges  [][2]int64
		padding []int64
	}{
		{[]int{0, 0, 0}, [][2]int64{{0, 1}, {0, 2}, {0, 3}}, []int64{0, 0, 0}},
		{[]int{6, 1, 1}, [][2]int64{{6, 7}, {2, 3}, {3, 6}}, []int64{0, 1, 0}},
		{[]int{7, 1, 2}, [][2]int64{{7, 7}, {2, 3}, {6, 8}}, []int64{1, 1, 1}}, // x=7 holds nothing of dim 0
		{[]int{7, 0, 0}, [][2]int64{{7, 7}, {0, 2}, {0, 3}}, []int64{1, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.coords), func(t *testing.T) {
			tile := l.TileOf(l.Mesh.PositionOfCoords(tc.coords))
			assert.Equal(t, tc.coords, tile.Coords)
			assert.Equal(t, tc.ranges, tile.Ranges)
			assert.Equal(t, tc.padding, tile.Padding)
			assert.Equal(t, []int64{1, 2, 3}, tile.LocalShape)
		})
	}
	assert.Equal(t, int64(6), l.TileElements())
	// Element (6, 2, 7) is on x=6, y=1, z=2 only: 6*6 + 1*3 + 2 = 41.
	assert.Equal(t, []Owner{{Device: 41, Coords: []int{6, 1, 2}, LocalIndex: []int64{0, 0, 1}}}, l.Locate([]int64{6, 2, 7}))
}

func TestLocateReplicatedAndPermuted(t *testing.T) {
	m, err := NewMesh("mesh", []Axis{{"x", 2}, {"y", 3}}, []int{5, 4, 3, 2, 1, 0})
	require.NoError(t, err)
	s := mustParse(t, `["x", null]`, m, []int64{4, 5})
	l := NewLayout(m, []int64{4, 5}, s)
	// Row 3 is on x=1, replicated over y: positions 3, 4, 5 = ids 2, 1, 0.
	owners := l.Locate([]int64{3, 4})
	require.Len(t, owners, 3)
	for i, o := range owners {
		assert.Equal(t, i, o.Device, "owners in device id order")
		assert.Equal(t, []int{1, 2 - i}, o.Coords)
		assert.Equal(t, []int64{1, 4}, o.LocalIndex)
	}
	assert.Equal(t, [][2]int64{{2, 4}, {0, 5}}, l.TileOf(0).Ranges)
	assert.Equal(t, []int{1, 2}, l.TileOf(0).Coords)
	for _, bad := range [][]int64{{4, 0}, {0, 5}, {-1, 0}, {0}, {0, 0, 0}, nil} {
		assert.Nil(t, l.Locate(bad), "%v", bad)
	}
}

func TestTilesSubsetAndIndependence(t *testing.T) {
	l := layout(t, "x=2,y=3", []int64{5, 7}, `["y", "x"]`)
	all := l.Tiles(nil)
	require.Len(t, all, 6)
	sub := l.Tiles([]int{4, 1})
	require.Len(t, sub, 2)
	assert.Equal(t, all[4], sub[0])
	assert.Equal(t, all[1], sub[1])
	assert.Empty(t, l.Tiles([]int{}))
	for id, tile := range all {
		assert.Equal(t, l.TileOf(id), tile)
	}
	// Tiles share backing arrays, capped: appending to one never changes another.
	_ = append(all[0].Coords, 99)
	_ = append(all[0].Ranges, [2]int64{99, 99})
	_ = append(all[0].LocalShape, 99)
	_ = append(all[0].Padding, 99)
	assert.Equal(t, l.TileOf(1), all[1])
}

func TestMapsSubAxesAndFreeAxes(t *testing.T) {
	tests := []struct {
		name, mesh string
		shape      []int64
		sharding   string
		d2g, g2d   string
	}{
		{name: "two axes on one dim", mesh: "x=2,y=4", shape: []int64{16, 3}, sharding: `[["x", "y"], null]`,
			d2g: "d(x, y)[k, l] -> t[(x * 4 + y) * 2 + k, l]",
			g2d: "t[i, j] -> d((i floordiv 2) floordiv 4, (i floordiv 2) mod 4)[i mod 2, j]"},
		{name: "replicated axis is free", mesh: "x=2,y=4", shape: []int64{8}, sharding: `["y"]`,
			d2g: "d(x, y)[j] -> t[y * 2 + j]",
			g2d: "t[i] -> d(*, i floordiv 2)[i mod 2]"},
		{name: "sub-axis leaves digits free", mesh: "x=4", shape: []int64{8}, sharding: `["x:(1)2"]`,
			d2g: "d(x)[j] -> t[(x floordiv 2) * 4 + j]",
			g2d: "t[i] -> d((i floordiv 4) * 2 + *)[i mod 4]"},
		{name: "both halves on two dims", mesh: "x=4", shape: []int64{2, 4}, sharding: `["x:(1)2", "x:(2)2"]`,
			d2g: "d(x)[k, l] -> t[(x floordiv 2) * 1 + k, (x mod 2) * 2 + l]",
			g2d: "t[i, j] -> d((i floordiv 1) * 2 + j floordiv 2)[i mod 1, j mod 2]"},
		{name: "index names avoid mesh axis names", mesh: "i=2,k=2", shape: []int64{4, 4}, sharding: `["i", "k"]`,
			d2g: "d(i, k)[m, n] -> t[i * 2 + m, k * 2 + n]",
			g2d: "t[j, l] -> d(j floordiv 2, l floordiv 2)[j mod 2, l mod 2]"},
		{name: "middle sub-axis after a full axis", mesh: "x=2,y=8", shape: []int64{8}, sharding: `[["x", "y:(2)2"]]`,
			d2g: "d(x, y)[j] -> t[(x * 2 + ((y floordiv 2) mod 2)) * 2 + j]",
			g2d: "t[i] -> d((i floordiv 2) floordiv 2, ((i floordiv 2) mod 2) * 2 + *)[i mod 2]"},
		{name: "scalar", mesh: "x=2", shape: []int64{}, sharding: `[]`,
			d2g: "d(x)[] -> t[]", g2d: "t[] -> d(*)[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d2g, g2d := layout(t, tc.mesh, tc.shape, tc.sharding).Maps()
			assert.Equal(t, tc.d2g, d2g)
			assert.Equal(t, tc.g2d, g2d)
		})
	}
}

func TestCeilDivAndBuffers(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{{0, 3, 0}, {1, 3, 1}, {3, 3, 1}, {4, 3, 2}, {16, 3, 6}, {23, 4, 6}, {7, 8, 1}} {
		assert.Equal(t, c.want, CeilDiv(c.a, c.b), "%d/%d", c.a, c.b)
	}
	for _, c := range []struct {
		n    int64
		bits int
		want int64
	}{{0, 32, 0}, {3, 32, 12}, {3, 4, 2}, {4, 4, 2}, {1, 4, 1}, {5, 128, 80}, {1, 8, 1}} {
		assert.Equal(t, c.want, BufferBytes(c.n, c.bits), "%d x %d bits", c.n, c.bits)
	}
	for name, bits := range map[string]int{"f32": 32, "bf16": 16, "s4": 4, "u4": 4, "pred": 8, "c128": 128, "f8e4m3fn": 8} {
		got, ok := DTypeBits(name)
		assert.True(t, ok, name)
		assert.Equal(t, bits, got, name)
	}
	_, ok := DTypeBits("f128")
	assert.False(t, ok)
	names := DTypeNames()
	assert.Len(t, names, 19)
	assert.IsNonDecreasing(t, names)
	assert.Contains(t, KnownDTypes(), "bf16")
}
