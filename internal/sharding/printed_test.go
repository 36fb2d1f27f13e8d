package sharding

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every printed form parses to the same canonical sharding as its explicit form.
func TestPrintedShardingForms(t *testing.T) {
	cases := []struct {
		mesh     string
		shape    []int64
		printed  string
		explicit string // JSON: the array or object form
	}{
		{"X=2,Y=4", []int64{2048, 2048}, `#sdy.sharding<@mesh, [{"X"}, {}]>`, `["X", null]`},
		{"X=2,Y=4", []int64{2048, 2048}, `<@mesh, [{"Y"}, {"X"}]>`, `["Y", "X"]`},
		{"X=2,Y=4", []int64{2048, 2048}, `#sdy.sharding_per_value<[<@mesh, [{"Y"}, {}]>]>`, `["Y", null]`},
		{"X=2,Y=4", []int64{2048, 2048}, ` #sdy.sharding<@mesh, [{"X", "Y"}, {?}], replicated={}> `, `{"dims": [{"axes": ["X", "Y"]}, {"axes": [], "open": true}]}`},
		{"X=2,Y=4", []int64{2048, 2048}, `sharding={devices=[2,4]<=[8]}`, `["X", "Y"]`},
		{"X=2,Y=4", []int64{2048, 2048}, `sharding={devices=[2,4]<=[8]}, metadata={op_name="x"}`, `["X", "Y"]`},
		{"X=2,Y=4", []int64{2048, 2048}, `sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}, metadata={op_name="jit(f)/x" source_file="a.py" source_line=3}, frontend_attributes={_xla="1"}`, `["Y", null]`},
		{"X=2,Y=4", []int64{2048, 2048}, `{devices=[2,4]<=[8] metadata={op_name="x"}}`, `["X", "Y"]`},
		{"X=2,Y=4", []int64{2048, 2048}, `(Shard(dim=0), Replicate())`, `["X", null]`},
		{"X=2,Y=4", []int64{2048, 2048}, `[Shard(dim=1), Shard(dim=0)]`, `["Y", "X"]`},
		{"X=2,Y=4", []int64{2048, 2048}, `(Replicate(), Partial(sum))`, `{"dims": [{"axes": []}, {"axes": []}], "unreduced": ["Y"]}`},
		{"X=2,Y=4", []int64{2048, 2048}, `(_StridedShard(dim=0, sf=4), Shard(dim=0))`, `[["Y", "X"], null]`},
		{"X=2,Y=4", []int64{2048, 2048}, `{"placements": "(Shard(dim=0), Replicate())"}`, `["X", null]`},
		{"X=2,Y=4", []int64{2048, 2048}, `{"placements": ["_StridedShard(dim=0, sf=4)", "Shard(dim=0)"]}`, `[["Y", "X"], null]`},
		{"X=8", []int64{64}, `(Shard(dim=0),)`, `["X"]`},
		{"X=8", []int64{64}, `Shard(dim=0)`, `["X"]`},
		{"dp=2,tp=2", []int64{8, 8}, `DTensor(local_tensor=tensor([[0., 1.]], device='cuda:0'), device_mesh=DeviceMesh('cuda', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp')), placements=(Shard(dim=0), Shard(dim=1)))`, `["dp", "tp"]`},
		{"data=2,model=4", []int64{8, 16}, `NamedSharding(mesh=Mesh('data': 2, 'model': 4, axis_types=(Auto, Auto)), spec=PartitionSpec('data', None), memory_kind=device)`, `["data"]`},
	}
	for _, c := range cases {
		t.Run(c.printed, func(t *testing.T) {
			m, err := ParseMeshString(c.mesh, "mesh")
			require.NoError(t, err)
			raw := json.RawMessage(c.printed)
			if !strings.HasPrefix(c.printed, "{\"") {
				raw, _ = json.Marshal(c.printed)
			}
			got, err := Parse(raw, m, c.shape, "source")
			require.NoError(t, err)
			want, err := Parse(json.RawMessage(c.explicit), m, c.shape, "source")
			require.NoError(t, err)
			require.True(t, want.Equal(got), "got %s, want %s", got, want)
		})
	}
}

// A printed form that does not fit the mesh is a field error naming the form read and
// the mismatch.
func TestPrintedShardingMismatch(t *testing.T) {
	m, err := ParseMeshString("X=2,Y=4", "mesh")
	require.NoError(t, err)
	cases := []struct{ text, form, mismatch string }{
		{`#sdy.sharding<@mesh, [{"Z"}, {}]>`, "Shardy #sdy.sharding attribute", `unknown mesh axis "Z"`},
		{`#sdy.sharding<@other, [{"X"}, {}]>`, "Shardy #sdy.sharding attribute", "mesh @other"},
		{`#sdy.sharding_per_value<[<@mesh, [{"X"}, {}]>, <@mesh, [{}, {}]>]>`, "Shardy #sdy.sharding attribute", "several values"},
		{`sharding={devices=[2,2]<=[4]}, metadata={op_name="x"}`, "HLO dump's sharding={...}", "4"},
		{`(Shard(dim=0),)`, "DTensor placements", "1 placements but the mesh has 2 axes"},
		{`(Shard(dim=0), Shard(dim=5))`, "DTensor placements", "out of range"},
		{`(_StridedShard(dim=0, sf=3), Shard(dim=0))`, "DTensor placements", "split_factor must be 4"},
		{`[{"X"}, {"Q"}]`, "Shardy text", `"Q"`},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			_, err := ParseString(c.text, m, []int64{16, 16}, "source")
			require.Error(t, err)
			es, ok := AsFieldErrors(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, "source", es[0].Field)
			require.Contains(t, es[0].Message, "read as ")
			require.Contains(t, es[0].Message, c.form)
			require.Contains(t, es[0].Message, c.mismatch)
		})
	}
}

// Every printed mesh parses to the same mesh as its explicit form.
func TestPrintedMeshForms(t *testing.T) {
	cases := []struct {
		printed string
		name    string
		axes    []Axis
		ids     []int
	}{
		{`Mesh('X': 2, 'Y': 4)`, "mesh", []Axis{{"X", 2}, {"Y", 4}}, nil},
		{`Mesh('X': 2, 'Y': 4, axis_types=(Explicit, Explicit))`, "mesh", []Axis{{"X", 2}, {"Y", 4}}, nil},
		{`AbstractMesh('X': 2, 'Y': 4, axis_types=(AxisType.Auto, AxisType.Auto))`, "mesh", []Axis{{"X", 2}, {"Y", 4}}, nil},
		{`jax.sharding.Mesh('data': 8)`, "mesh", []Axis{{"data", 8}}, nil},
		{`Mesh(device_ids=array([[0, 2], [1, 3]]), axis_names=('a', 'b'))`, "mesh", []Axis{{"a", 2}, {"b", 2}}, []int{0, 2, 1, 3}},
		{`Mesh(array([0, 1, 2, 3]), ('a',))`, "mesh", []Axis{{"a", 4}}, nil},
		{`sdy.mesh @mesh = <["X"=2, "Y"=4]>`, "mesh", []Axis{{"X", 2}, {"Y", 4}}, nil},
		{`sdy.mesh @m2 = <["X"=2, "Y"=2], device_ids=[3, 2, 1, 0]>`, "m2", []Axis{{"X", 2}, {"Y", 2}}, []int{3, 2, 1, 0}},
		{`#sdy.mesh<["a"=4]>`, "mesh", []Axis{{"a", 4}}, nil},
		{`<["a"=2, "b"=2]>`, "mesh", []Axis{{"a", 2}, {"b", 2}}, nil},
		{`DeviceMesh('cuda', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))`, "mesh", []Axis{{"dp", 2}, {"tp", 2}}, nil},
		{`DeviceMesh('cuda', [[0, 2], [1, 3]], mesh_dim_names=('dp', 'tp'))`, "mesh", []Axis{{"dp", 2}, {"tp", 2}}, []int{0, 2, 1, 3}},
		{`DeviceMesh('cpu', [0, 1, 2, 3])`, "mesh", []Axis{{"dim0", 4}}, nil},
		{`DeviceMesh:([[0, 1, 2, 3], [4, 5, 6, 7]])`, "mesh", []Axis{{"dim0", 2}, {"dim1", 4}}, nil},
	}
	for _, c := range cases {
		t.Run(c.printed, func(t *testing.T) {
			got, err := ParseMeshString(c.printed, "mesh")
			require.NoError(t, err)
			want, err := NewMesh(c.name, c.axes, c.ids)
			require.NoError(t, err)
			require.Equal(t, want.Name, got.Name)
			require.Equal(t, want.Axes, got.Axes)
			require.Equal(t, want.DeviceIDs, got.DeviceIDs)
			require.Equal(t, want.String(), got.String())
		})
	}
}

func TestPrintedMeshErrors(t *testing.T) {
	cases := []struct{ text, form, mismatch string }{
		{`Mesh('X': 2, 'X': 4)`, "JAX Mesh repr", "already axis 0"},
		{`Mesh('X': two)`, "JAX Mesh repr", "expected its size"},
		{`DeviceMesh('cuda', [[4, 5], [6, 7]], mesh_dim_names=('dp', 'tp'))`, "torch DeviceMesh repr", "is not in 0..3"},
		{`DeviceMesh('cuda', [[0, 1], [2]], mesh_dim_names=('dp', 'tp'))`, "torch DeviceMesh repr", "ragged"},
		{`DeviceMesh('cuda', [[0, 1], [2, 3]], mesh_dim_names=('dp',))`, "torch DeviceMesh repr", "1 axis names for a device list of 2 dims"},
		{`sdy.mesh @mesh = <["X"=2, "Y"=0]>`, "Shardy sdy.mesh", "size 0"},
		{`sdy.mesh @mesh = <["X"=2, "Y"=4]`, "Shardy sdy.mesh", "expected '>'"},
		{`sdy.mesh @mesh = <["X"=2], device_ids=[1, 1]>`, "Shardy sdy.mesh", "appears twice"},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			_, err := ParseMeshString(c.text, "mesh")
			require.Error(t, err)
			es, ok := AsFieldErrors(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, "mesh", es[0].Field)
			require.Contains(t, es[0].Message, "read as a")
			require.Contains(t, es[0].Message, c.form)
			require.Contains(t, es[0].Message, c.mismatch)
		})
	}
}

func TestParseTensorType(t *testing.T) {
	cases := []struct {
		text  string
		shape []int64
		dtype string
	}{
		{"tensor<2048x2048xf32>", []int64{2048, 2048}, "f32"},
		{"tensor<8x16xbf16>", []int64{8, 16}, "bf16"},
		{"tensor<4xi1>", []int64{4}, "pred"},
		{"tensor<4x2xui8>", []int64{4, 2}, "u8"},
		{"tensor<3xcomplex<f32>>", []int64{3}, "c64"},
		{`tensor<8x8xf32, #sdy.sharding<@mesh, [{"x"}, {}]>>`, []int64{8, 8}, "f32"},
		{"f32[2048,2048]", []int64{2048, 2048}, "f32"},
		{"bf16[8,16]{1,0}", []int64{8, 16}, "bf16"},
		{"float32[2048,2048]", []int64{2048, 2048}, "f32"},
		{"ShapedArray(float32[4,8])", []int64{4, 8}, "f32"},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			shape, dtype, err := ParseTensorType(c.text, "tensor")
			require.NoError(t, err)
			require.Equal(t, c.shape, shape)
			require.Equal(t, c.dtype, dtype)
		})
	}
	for _, bad := range []string{"tensor<?x4xf32>", "tensor<0x4xf32>", "tensor<4xq7>", "q7[4]", "f32[4,x]", "f32[4] junk", "tensor<4xf32", "2048x2048"} {
		_, _, err := ParseTensorType(bad, "tensor")
		require.Error(t, err, bad)
		es, ok := AsFieldErrors(err)
		require.True(t, ok)
		require.Equal(t, "tensor", es[0].Field)
		require.Contains(t, es[0].Message, "tensor<2048x2048xf32>", "the message shows the forms")
	}
}
