package sharding_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// benchLayouts: a rank-3 tensor on 4-axis meshes of 256 and 65,536 devices, sharded on
// three axes (one of them split into sub-axes) and replicated on the fourth.
var benchLayouts = []struct {
	name  string
	mesh  string
	shape []int64
	spec  string
}{
	{"devices=256", "a=4,b=4,c=4,d=4", []int64{1024, 1000, 768}, `[["a"], ["c", "b:(1)2"], ["b:(2)2"]]`},
	{"devices=65536", "a=16,b=16,c=16,d=16", []int64{4096, 1000, 768}, `[["a"], ["c", "b:(1)4"], ["b:(4)4"]]`},
}

func benchLayout(b *testing.B, mesh string, shape []int64, spec string) *sharding.Layout {
	m := sharding.MustMesh(b, mesh)
	s, err := sharding.Parse(json.RawMessage(spec), m, shape, "source")
	require.NoError(b, err)
	return sharding.NewLayout(m, shape, s)
}

func BenchmarkTiles(b *testing.B) {
	for _, bc := range benchLayouts {
		b.Run(bc.name, func(b *testing.B) {
			l := benchLayout(b, bc.mesh, bc.shape, bc.spec)
			tiles := l.Tiles(nil)
			require.Len(b, tiles, l.Mesh.NumDevices())
			require.Equal(b, l.TileOf(len(tiles)-1), tiles[len(tiles)-1])
			b.ReportAllocs()
			for b.Loop() {
				l.Tiles(nil)
			}
		})
	}
}

// BenchmarkTileOfEach is the per-device path (a TileOf call per device).
func BenchmarkTileOfEach(b *testing.B) {
	for _, bc := range benchLayouts {
		b.Run(bc.name, func(b *testing.B) {
			l := benchLayout(b, bc.mesh, bc.shape, bc.spec)
			n := l.Mesh.NumDevices()
			b.ReportAllocs()
			for b.Loop() {
				for id := range n {
					l.TileOf(id)
				}
			}
		})
	}
}

func BenchmarkLocate(b *testing.B) {
	for _, bc := range benchLayouts {
		b.Run(bc.name, func(b *testing.B) {
			l := benchLayout(b, bc.mesh, bc.shape, bc.spec)
			idx := []int64{bc.shape[0] - 1, 517, 300}
			owners := l.Locate(idx)
			// Replicated over d: one owner per coordinate of d.
			require.Len(b, owners, l.Mesh.Axes[3].Size)
			b.ReportAllocs()
			for b.Loop() {
				l.Locate(idx)
			}
		})
	}
	b.Run("devices=65536/fully-replicated", func(b *testing.B) {
		l := benchLayout(b, "a=16,b=16,c=16,d=16", []int64{8, 8}, `[null, null]`)
		require.Len(b, l.Locate([]int64{3, 4}), 65536)
		b.ReportAllocs()
		for b.Loop() {
			l.Locate([]int64{3, 4})
		}
	})
}

func BenchmarkParse(b *testing.B) {
	m := sharding.MustMesh(b, "x=2,y=4,z=2,w=3,u=2")
	forms := []struct{ name, raw string }{
		{"object", `{"dims": [{"axes": ["x"]}, {"axes": ["z", "y:(1)2"], "open": true, "priority": 1}, {"axes": ["y:(2)2"]}], "replicated": ["w"], "unreduced": ["u"]}`},
		{"text", sharding.JSONString(`sharding<@mesh, [{"x"}, {"z", "y":(1)2, ?}p1, {"y":(2)2}], replicated={"w"}, unreduced={"u"}>`)},
		{"array", `["x", ["z", "y:(1)2"], "y:(2)2"]`},
		{"array-indices", `[[0], [2, 1], null]`},
		{"partition-spec-text", sharding.JSONString(`P('x', ('z', 'y'), None)`)},
		{"placements", `{"placements": ["Shard(0)", "Shard(1)", "Shard(1)", "Replicate()", "Partial()"]}`},
		{"hlo-iota", sharding.JSONString(`{devices=[2,8,1,6]<=[2,4,2,3,2]T(0,2,1,3,4) last_tile_dim_replicate}`)},
	}
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) {
			raw := json.RawMessage(f.raw)
			_, err := sharding.Parse(raw, m, []int64{8, 8, 8}, "source")
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				_, _ = sharding.Parse(raw, m, []int64{8, 8, 8}, "source")
			}
		})
	}
	b.Run("mesh-string", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = sharding.ParseMeshString("a=16,b=16,c=16,d=16", "mesh")
		}
	})
}

// BenchmarkParseHLO reads HLO shardings on big meshes: the cost is linear in the device
// count (the tile assignment is expanded, read and checked per device).
func BenchmarkParseHLO(b *testing.B) {
	for _, n := range []int{256, 4096, 65536} {
		m := sharding.MustMesh(b, "a=4,b="+strconv.Itoa(n/16)+",c=4")
		cases := map[string]string{
			"iota": "{devices=[" + strconv.Itoa(n/16) + ",4,4]<=[4," + strconv.Itoa(n/16) + ",4]T(1,2,0) last_tile_dim_replicate}",
		}
		s, err := sharding.ParseHLO(cases["iota"], m, []int64{1 << 20, 1024}, "s")
		require.NoError(b, err)
		cases["explicit"] = sharding.ExplicitHLO(m, s)
		for _, name := range []string{"iota", "explicit"} {
			b.Run(name+"/devices="+strconv.Itoa(n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_, _ = sharding.ParseHLO(cases[name], m, []int64{1 << 20, 1024}, "s")
				}
			})
		}
	}
}

func BenchmarkMaps(b *testing.B) {
	l := benchLayout(b, benchLayouts[0].mesh, benchLayouts[0].shape, benchLayouts[0].spec)
	d2g, _ := l.Maps()
	require.Equal(b, fmt.Sprintf("d(a, b, c, d)[l, m, n] -> t[a * %d + l, (c * 2 + (b floordiv 2)) * 125 + m, (b mod 2) * 384 + n]", 256), d2g)
	b.ReportAllocs()
	for b.Loop() {
		l.Maps()
	}
}
