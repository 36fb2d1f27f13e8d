package sharding

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzMesh has full axes, a size-one axis and axes with non-power-of-two factors.
const fuzzMesh = "x=4,y=6,z=2,w=1"

// checkParsed asserts the fuzz contract of a parser result: an error is made of field
// errors under "source"; a sharding is valid, and re-prints and re-parses (text and
// object form, and array form when it has one) to an equal sharding.
func checkParsed(t *testing.T, m *Mesh, s Sharding, err error) {
	t.Helper()
	if err != nil {
		requireOnlyFieldErrors(t, err, "source")
		return
	}
	require.NoError(t, s.Validate(m, nil, ""), "parsed %s", s)
	text := s.Text(m.Name)
	again, err := ParseText(text, m, nil, "source")
	require.NoError(t, err, "re-parse %s", text)
	require.True(t, s.Equal(again), "%s -> %s", text, again)
	require.Equal(t, text, again.Text(m.Name), "printing is canonical")

	obj, err := json.Marshal(s.Object(m.Name))
	require.NoError(t, err)
	again, err = Parse(obj, m, nil, "source")
	require.NoError(t, err, "re-parse %s", obj)
	require.True(t, s.Equal(again), "%s -> %s", obj, again)

	if spec, ok := s.PartitionSpec(); ok {
		arr, err := json.Marshal(spec)
		require.NoError(t, err)
		again, err = Parse(arr, m, nil, "source")
		require.NoError(t, err, "re-parse %s", arr)
		require.True(t, s.Equal(again), "%s -> %s", arr, again)
	}
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{
		`[{"x"}, {"z", "y", ?}p1], replicated={"w"}`,
		`sharding<@mesh, [{"x"}, {?}], unreduced={"z"}>`,
		`[{"y":(1)2}, {"y":(2)3}]`,
		`[{"y:(2)3", "x":(1)2}], replicated={"x":(2)2}`,
		`[{"x":(1)2, "x":(2)2}]`,
		`[]`,
		`[{}p0]`,
		`[{"x"}, {"x"}]`,
		`[{"y":(1)2}, {"y":(3)2}]`,
		`[{"q"}]`,
		`sharding<@other, []>`,
		`[{"x"}p99999999999]`,
		`[{"x":(4294967296)2}]`,
		`[{"x"}`,
		`[{"x}]`,
		`sharding<@mesh`,
		"",
	} {
		f.Add(s)
	}
	m := mustMesh(f, fuzzMesh)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseText(text, m, nil, "source")
		checkParsed(t, m, s, err)
	})
}

func FuzzParseArray(f *testing.F) {
	for _, s := range []string{
		`["x", null, ["z", "y"]]`,
		`[[0], [1, 2]]`,
		`[null, []]`,
		`["y:(2)3", ["y:(1)2", 3]]`,
		`[["x:(1)2", "x:(2)2"]]`,
		`[]`,
		`["x", "x"]`,
		`[[0], [9]]`,
		`[["x:(1)2"], ["x:(3)2"]]`,
		`[true]`,
		`[[null]]`,
		`[1.5]`,
		`["x:(4611686018427387904)4"]`,
		`[-1]`,
		`["x",`,
		`[{"axes": []}]`,
	} {
		f.Add(s)
	}
	m := mustMesh(f, fuzzMesh)
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := Parse(json.RawMessage(raw), m, nil, "source")
		checkParsed(t, m, s, err)
	})
}

func FuzzParseObject(f *testing.F) {
	for _, s := range []string{
		`{"dims": [{"axes": ["x"]}, {"axes": ["z", "y"], "open": true, "priority": 1}], "replicated": ["w"], "unreduced": []}`,
		`{"dims": [{"axes": [0]}, {"axes": ["y:(2)3"]}], "text": "ignored"}`,
		`{"dims": []}`,
		`{"dims": [{"open": true, "priority": 0}]}`,
		`{"dims": [{"axes": ["x"]}, {"axes": ["x:(1)2"]}]}`,
		`{"dims": [{"axes": ["x"], "priority": -1}]}`,
		`{"dims": [{"axes": [], "priority": 1}]}`,
		`{"dims": [{"bogus": 1}]}`,
		`{"dims": {}}`,
		`{"dims": [{"open": "yes"}]}`,
		`{"dims": [{"priority": 1e400}]}`,
		`{"dims": [{}]} {}`,
		`{"replicated": ["x"]}`,
		`{"dims": [`,
		`{"placements": ["Shard(0)", "Partial()", "_StridedShard(0, split_factor=2)", "Replicate()"]}`,
		`{"placements": ["S(1)", "R", "P(sum)", "Shard(dim=-1)"]}`,
	} {
		f.Add(s)
	}
	m := mustMesh(f, fuzzMesh)
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := Parse(json.RawMessage(raw), m, nil, "source")
		checkParsed(t, m, s, err)
	})
}

func FuzzParseMeshString(f *testing.F) {
	for _, s := range []string{
		"x=2,y=4", " a = 3 ", "x=1", "x=1073741824", "x=2,x=2", "x=0", "x=-1", "1x=2", "x", "",
		"x=1000000000,y=1000000000", "x=4,y=4611686018427387904", "x=2,,y=2", "x=+2",
		"Mesh('X': 2, 'Y': 4)", "AbstractMesh('X': 2, 'Y': 4, axis_types=(Auto, Auto))",
		"Mesh(device_ids=array([[0, 2], [1, 3]]), axis_names=('a', 'b'))", "Mesh('X': -2)",
		`sdy.mesh @mesh = <["X"=2, "Y"=4]>`, `#sdy.mesh<["a"=2], device_ids=[1, 0]>`, `<[]>`, `sdy.mesh @m = <["a"=2`,
		"DeviceMesh('cuda', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))", "DeviceMesh:([[0, 1]])",
		"DeviceMesh('cuda', [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])", "DeviceMesh('cuda', [[0], [1, 2]])",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMeshString(s, "mesh")
		if err != nil {
			requireOnlyFieldErrors(t, err, "mesh")
			require.Nil(t, m)
			return
		}
		n := m.NumDevices()
		require.True(t, n >= 1 && n <= MaxMeshDevices, "%d devices", n)
		again, err := ParseMeshString(m.String(), "mesh")
		require.NoError(t, err, "re-parse %q", m.String())
		require.Equal(t, m.Axes, again.Axes)
		require.Equal(t, m.String(), again.String())
	})
}

func FuzzParseHLO(f *testing.F) {
	for _, s := range []string{
		"{replicated}",
		"{maximal device=0}",
		"{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
		"{devices=[4,2]<=[2,4]T(1,0)}",
		"{devices=[2,2,2]<=[2,2,2]T(2,0,1) last_tile_dims={replicated}}",
		"{devices=[4,6,2]<=[48]}",
		"{devices=[6,8]<=[4,6,2]T(1,0,2)}",
		"{devices=[3,16]<=[4,3,2,2]T(1,0,2,3)}",
		"{devices=[48]0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47}",
		"{devices=[2,24]<=[48] last_tile_dims={manual}}",
		"{unreduced}",
		"{devices=[4,2,6]<=[48] last_tile_dims={unreduced, replicated}}",
		"{devices=[1,3,16]<=[4,6,2]T(1,0,2) last_tile_dims={unreduced}}",
		"{{replicated}, /*index=1*/{unreduced}}",
		"{mesh[x=4,y=6,z=2,w=1], [{x}, {y:(2)3, ?}], replicated={z}, unreduced={y:(1)2}}",
		"{mesh[x=4,y=6,z=2,w=1], device_ids=([0,1,2]), replicated}",
		"{maximal_mesh[device_id=0], metadata={a=\"}\"}}",
		`{devices=[1,48]<=[48] metadata={op_name="a}\"b"}}`,
		"{{replicated}, {manual}}",
		"{devices=[2147483647]<=[1]}",
		"{devices=[1,1,1]0}",
		"{devices=[",
		"{",
	} {
		f.Add(s)
	}
	m := mustMesh(f, fuzzMesh)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseHLO(text, m, nil, "source")
		checkParsed(t, m, s, err)
		// The symbolic reading of an iota agrees with the device-by-device one.
		if explicit, ok := iotaAsExplicit(m, text); ok {
			s2, err2 := ParseHLO(explicit, m, nil, "source")
			require.Equal(t, err == nil, err2 == nil, "%s: %v; as %s: %v", text, err, explicit, err2)
			if err == nil {
				require.True(t, s.Equal(s2), "%s: %s; as %s: %s", text, s, explicit, s2)
			}
		}
		if err != nil {
			return
		}
		shape := make([]int64, s.Rank())
		for d := range shape {
			shape[d] = 1 << 20
		}
		again, err := ParseHLO(s.HLO(m), m, shape, "source")
		require.NoError(t, err, "re-parse %s", s.HLO(m))
		require.True(t, s.SameLayout(again), "%s -> %s -> %s", text, s.HLO(m), again)
	})
}

func FuzzParsePartitionSpec(f *testing.F) {
	for _, s := range []string{
		`P('x', None, ('z','y'))`,
		`PartitionSpec("x", ("y", "z",),)`,
		`jax.sharding.PartitionSpec('y:(2)3')`,
		`P(P.UNCONSTRAINED, 'x', unreduced={'z'})`,
		`P()`,
		`P('x', 'x')`,
		`P(unreduced={'x'}, 'y')`,
		`P('q')`,
		`P((x,))`,
		`P('x'`,
		`P('x') P`,
		`P(None, None, None, None)`,
	} {
		f.Add(s)
	}
	m := mustMesh(f, fuzzMesh)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParsePartitionSpecText(text, m, nil, "source")
		checkParsed(t, m, s, err)
		if err != nil {
			return
		}
		if p, ok := s.PartitionSpecText(); ok && len(s.Replicated) == 0 && !hasOpenOrPriority(s) {
			again, err := ParsePartitionSpecText(p, m, nil, "source")
			require.NoError(t, err, "re-parse %s", p)
			require.True(t, s.Equal(again), "%s -> %s -> %s", text, p, again)
		}
	})
}

func hasOpenOrPriority(s Sharding) bool {
	for _, d := range s.Dims {
		if d.Open || d.Priority != NoPriority {
			return true
		}
	}
	return false
}

// iotaAsExplicit rewrites a single iota HLO sharding as the same sharding with an
// explicit device list; false when text is not one.
func iotaAsExplicit(m *Mesh, text string) (string, bool) {
	p := &textParser{s: text, field: "s", m: m}
	sp, err := p.hloSharding(m.NumDevices())
	if err != nil || sp.iota == nil || p.peek() != 0 {
		return "", false
	}
	ids, err := sp.deviceIDs(p, productInts(sp.tile))
	if err != nil {
		return "", false
	}
	var b strings.Builder
	b.WriteString("{devices=[")
	for i, t := range sp.tile {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(t))
	}
	b.WriteByte(']')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(id))
	}
	if sp.lastRep {
		b.WriteString(" last_tile_dim_replicate")
	}
	if len(sp.subgroups) > 0 {
		b.WriteString(" last_tile_dims={" + strings.Join(sp.subgroups, ",") + "}")
	}
	b.WriteByte('}')
	return b.String(), true
}

// FuzzParseString covers the dispatch between the string forms and the JAX reprs.
func FuzzParseString(f *testing.F) {
	for _, s := range []string{
		"NamedSharding(mesh=Mesh('x': 4, 'y': 6, 'z': 2, 'w': 1), spec=PartitionSpec('x', ('y', 'z')), memory_kind=device)",
		"NamedSharding(mesh=Mesh('x': 4), spec=P())",
		"NamedSharding(spec=PartitionSpec(None, 'y'))",
		"GSPMDSharding({devices=[4,6,2]<=[48]}, memory_kind=device)",
		"GSPMDSharding({replicated}",
		"NamedSharding(",
		`{"x"}`,
		"{devices=[48]<=[48]}",
		"P('x')",
		`[{"x"}]`,
		`#sdy.sharding<@mesh, [{"x"}, {"y", "z"}]>`,
		`<@mesh, [{"x"}, {?}], replicated={"w"}>`,
		`#sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>`,
		`sharding={devices=[4,12]<=[48]}, metadata={op_name="x"}`,
		`sharding={devices=[4,1,12]<=[4,12]T(1,0) last_tile_dim_replicate}, frontend_attributes={a="}"}`,
		`(Shard(dim=0), Replicate(), Partial(), Replicate())`,
		`[Shard(0), Shard(0), Replicate(), Replicate()]`,
		`(_StridedShard(dim=0, sf=6), Shard(dim=0), Replicate(), Replicate())`,
		`DTensor(local_tensor=tensor([1.]), device_mesh=DeviceMesh('cuda', [0]), placements=(Shard(dim=0), Replicate(), Replicate(), Replicate()))`,
		`(Shard(dim=(((((((((((((((((((((((((((((((((((0)))))))))))))))))))))))))))))))))))),)`,
	} {
		f.Add(s)
	}
	m := mustMesh(f, fuzzMesh)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseString(text, m, nil, "source")
		checkParsed(t, m, s, err)
	})
}

func FuzzParseTensorType(f *testing.F) {
	for _, s := range []string{
		"tensor<2048x2048xf32>", "tensor<4xi1>", "tensor<3xcomplex<f32>>", "tensor<f32>", "tensor<?x4xf32>",
		"f32[2048,2048]", "bf16[8,16]{1,0}", "float32[4]", "ShapedArray(float32[4,8])", "f32[]", "f32[", "x",
		"tensor<9223372036854775807x2xf32>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		shape, dtype, err := ParseTensorType(text, "tensor")
		if err != nil {
			requireOnlyFieldErrors(t, err, "tensor")
			return
		}
		_, ok := DTypeBits(dtype)
		require.True(t, ok, "dtype %q", dtype)
		for _, d := range shape {
			require.GreaterOrEqual(t, d, int64(1))
		}
	})
}
