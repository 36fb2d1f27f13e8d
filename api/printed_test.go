package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A request written with what the frameworks print is the same canonical request as
// its explicit form: the same plan id on /v1/reshard, the same answer on /v1/tiles.
func TestPrintedFormsAreTheCanonicalRequest(t *testing.T) {
	s := newTestServer(t, nil)
	explicit := `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"]}`
	planID := func(body string) string {
		t.Helper()
		rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", body)
		require.Equal(t, http.StatusOK, rec.Code, "%s\n%s", body, rec.Body.String())
		var out struct {
			PlanID string `json:"plan_id"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		return out.PlanID
	}
	want := planID(explicit)
	for _, body := range []string{
		`{"mesh": "Mesh('X': 2, 'Y': 4)", "tensor": "tensor<2048x2048xf32>", "source": "#sdy.sharding<@mesh, [{\"X\"}, {}]>", "target": "<@mesh, [{\"Y\"}, {\"X\"}]>"}`,
		`{"mesh": "AbstractMesh('X': 2, 'Y': 4, axis_types=(Explicit, Explicit))", "tensor": "f32[2048,2048]", "source": "sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}, metadata={op_name=\"x\"}", "target": "sharding={devices=[4,2]<=[2,4]T(1,0)}"}`,
		`{"mesh": "sdy.mesh @mesh = <[\"X\"=2, \"Y\"=4]>", "shape": [2048, 2048], "dtype": "float32", "source": "(Shard(dim=0), Replicate())", "target": {"placements": "(Shard(dim=1), Shard(dim=0))"}}`,
		`{"mesh": "DeviceMesh('cuda', [[0, 1, 2, 3], [4, 5, 6, 7]], mesh_dim_names=('X', 'Y'))", "tensor": "tensor<2048x2048xf32>", "source": "P('X', None)", "target": "NamedSharding(mesh=Mesh('X': 2, 'Y': 4), spec=PartitionSpec('Y', 'X'))"}`,
	} {
		require.Equal(t, want, planID(body), body)
	}

	tiles := func(body string) string {
		t.Helper()
		rec := do(t, s, http.MethodPost, "/v1/tiles", "application/json", body)
		require.Equal(t, http.StatusOK, rec.Code, "%s\n%s", body, rec.Body.String())
		return rec.Body.String()
	}
	require.Equal(t,
		tiles(`{"mesh": {"name": "mesh", "axes": [{"name": "dp", "size": 2}, {"name": "tp", "size": 2}], "device_ids": [0, 2, 1, 3]}, "shape": [8, 6], "dtype": "bf16", "sharding": ["tp", "dp"]}`),
		tiles(`{"mesh": "DeviceMesh('cuda', [[0, 2], [1, 3]], mesh_dim_names=('dp', 'tp'))", "tensor": "bf16[8,6]{1,0}", "sharding": "(Shard(dim=1), Shard(dim=0))"}`))
}

// A printed form that does not fit is a 400 naming the form it was read as and the
// mismatch; Python's literals in a hand-written body get a 400 saying what JSON wants.
func TestPrintedFormErrors(t *testing.T) {
	s := newTestServer(t, nil)
	cases := []struct {
		body, field string
		want        []string
	}{
		{`{"mesh": "Mesh('X': 2, 'Y': 4)", "tensor": "tensor<16x16xf32>", "sharding": "#sdy.sharding<@mesh, [{\"X\"}, {\"Z\"}]>"}`, "sharding", []string{"Shardy #sdy.sharding attribute", `"Z"`}},
		{`{"mesh": "Mesh('X': 2, 'Y': 4)", "tensor": "tensor<16x16xf32>", "sharding": "(Shard(dim=0),)"}`, "sharding", []string{"DTensor placements", "1 placements but the mesh has 2 axes"}},
		{`{"mesh": "Mesh('X': 2, 'Y': 4)", "tensor": "tensor<16x16xf32>", "sharding": "sharding={devices=[4,4]<=[16]}"}`, "sharding", []string{"HLO dump's sharding={...}"}},
		{`{"mesh": "DeviceMesh('cuda', [[4, 5], [6, 7]], mesh_dim_names=('dp', 'tp'))", "tensor": "f32[4,4]", "sharding": []}`, "mesh", []string{"torch DeviceMesh repr", "not in 0..3"}},
		{`{"mesh": "x=2", "tensor": "tensor<4x?xf32>", "sharding": []}`, "tensor", []string{"dynamic"}},
		{`{"mesh": "x=2", "tensor": "f32[4]", "shape": [4], "sharding": []}`, "tensor", []string{"not both"}},
	}
	for _, c := range cases {
		rec := do(t, s, http.MethodPost, "/v1/tiles", "application/json", c.body)
		slug := "invalid-sharding"
		if c.field == "mesh" {
			slug = "invalid-mesh"
		}
		p := requireProblem(t, rec, http.StatusBadRequest, slug)
		require.NotEmpty(t, p.Errors, c.body)
		require.Equal(t, c.field, p.Errors[0].Field, c.body)
		for _, w := range c.want {
			require.Contains(t, p.Errors[0].Message, w, c.body)
		}
	}
	for _, lit := range []struct{ py, js string }{{"None", "null"}, {"True", "true"}, {"False", "false"}} {
		body := `{"mesh": "x=2", "shape": [4], "dtype": "f32", "sharding": [` + lit.py + `]}`
		rec := do(t, s, http.MethodPost, "/v1/tiles", "application/json", body)
		p := requireProblem(t, rec, http.StatusBadRequest, "invalid-json")
		require.Contains(t, p.Detail, lit.py+" is Python")
		require.Contains(t, p.Detail, "write "+lit.js)
	}
}

// A graph's tensors may be given as printed tensor types: the same plan as shape and dtype.
func TestGraphTensorTypes(t *testing.T) {
	s := newTestServer(t, nil)
	graph := func(x, w, y string) string {
		return `{"mesh": "Mesh('data': 2, 'model': 4)", "tensors": {"x": ` + x + `, "w": ` + w + `, "y": ` + y + `},
		 "ops": [{"name": "mm", "op": "dot_general", "operands": ["x", "w"], "results": ["y"],
		          "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}}],
		 "inputs": ["x", "w"], "outputs": ["y"]}`
	}
	planID := func(body string) string {
		t.Helper()
		rec := do(t, s, http.MethodPost, "/v1/graph", "application/json", body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var out struct {
			PlanID string `json:"plan_id"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		return out.PlanID
	}
	want := planID(graph(`{"shape": [8, 16], "dtype": "bf16", "sharding": ["data", null]}`,
		`{"shape": [16, 32], "dtype": "bf16", "sharding": "[{}, {\"model\"}]"}`, `{"shape": [8, 32], "dtype": "bf16"}`))
	got := planID(graph(`{"tensor": "tensor<8x16xbf16>", "sharding": "#sdy.sharding<@mesh, [{\"data\"}, {}]>"}`,
		`{"tensor": "bf16[16,32]", "sharding": "(Replicate(), Shard(dim=1))"}`, `{"tensor": "tensor<8x32xbf16>"}`))
	require.Equal(t, want, got)

	rec := do(t, s, http.MethodPost, "/v1/graph", "application/json", graph(`{"tensor": "tensor<8x16xbf16>", "shape": [8, 16]}`, `{"tensor": "bf16[16,32]"}`, `{"tensor": "q9[8,32]"}`))
	p := requireProblem(t, rec, http.StatusBadRequest, "invalid-graph")
	require.NotEmpty(t, p.Errors)
	require.Equal(t, "tensors.x.tensor", p.Errors[0].Field)
	require.Contains(t, p.Errors[0].Message, "not both")
	rec = do(t, s, http.MethodPost, "/v1/graph", "application/json", graph(`{"tensor": "tensor<8x16xbf16>"}`, `{"tensor": "bf16[16,32]"}`, `{"tensor": "q9[8,32]"}`))
	p = requireProblem(t, rec, http.StatusBadRequest, "invalid-graph")
	require.Equal(t, "tensors.y.tensor", p.Errors[0].Field)
	require.Contains(t, p.Errors[0].Message, `unknown element type "q9"`)
}
