package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleMLP is a JAX-style as_text() module: a 2-layer MLP, Megatron-sharded, with the
// activation in a private function that the import inlines.
const moduleMLP = `module @jit_mlp attributes {mhlo.num_partitions = 8 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func public @main(%arg0: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>} loc("x"),
      %arg1: tensor<64x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
      %arg2: tensor<256x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>})
      -> (tensor<32x64xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x64xf32>, tensor<64x256xf32>) -> tensor<32x256xf32> loc(#loc3)
    %1 = call @relu(%0) : (tensor<32x256xf32>) -> tensor<32x256xf32>
    %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0] : (tensor<32x256xf32>, tensor<256x64xf32>) -> tensor<32x64xf32>
    %3 = stablehlo.custom_call @my_kernel(%2) {backend_config = ""} : (tensor<32x64xf32>) -> tensor<32x64xf32>
    return %3 : tensor<32x64xf32>
  }
  func.func private @relu(%arg0: tensor<32x256xf32>) -> tensor<32x256xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<32x256xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<32x256xf32>
    return %1 : tensor<32x256xf32>
  }
}
#loc3 = loc("jit(mlp)/dot_general"("/tmp/mlp.py":12:0))
`

// doAccept posts body with a Content-Type and an Accept header (none when empty).
func doAccept(t *testing.T, h http.Handler, path, contentType, accept, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func moduleBody(t *testing.T, extra map[string]any) string {
	t.Helper()
	m := map[string]any{"module": moduleMLP}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

func TestGraphModule(t *testing.T) {
	s := newTestServer(t, nil)
	check := func(t *testing.T, rec *httptest.ResponseRecorder) {
		t.Helper()
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var g struct {
			graphBody
			OpaqueOps []OpaqueOpJSON `json:"opaque_ops"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &g))
		assert.Equal(t, [][]string{{"data"}, {"model"}}, dimAxes(g.Shardings["0"]))
		assert.Equal(t, [][]string{{"data"}, {"model"}}, dimAxes(g.Shardings["1"]))
		assert.Equal(t, [][]string{{"data"}, {"model"}}, dimAxes(g.Shardings["relu@1/1"]), "the inlined activation")
		assert.Equal(t, [][]string{{"data"}, {}}, dimAxes(g.Shardings["2"]))
		// The custom call without a rule is opaque: its result and the function's
		// result learn nothing.
		assert.Equal(t, [][]string{{}, {}}, dimAxes(g.Shardings["3"]))
		assert.Equal(t, [][]string{{}, {}}, dimAxes(g.Shardings["result0"]))
		require.Len(t, g.OpaqueOps, 1)
		assert.Equal(t, OpaqueOpJSON{Op: "stablehlo.custom_call", Results: []string{"3"}, Line: 10, Column: 5}, g.OpaqueOps[0])
		require.Len(t, g.Collectives, 1)
		assert.Equal(t, "2", g.Collectives[0].OpName)
		assert.Equal(t, "all_reduce", g.Collectives[0].Reduction)
	}
	t.Run("json", func(t *testing.T) {
		check(t, do(t, s, http.MethodPost, "/v1/graph", "application/json", moduleBody(t, map[string]any{"function": "main", "strategy": "optimal"})))
	})
	t.Run("raw mlir", func(t *testing.T) {
		check(t, do(t, s, http.MethodPost, "/v1/graph?function=main&strategy=optimal", "application/mlir", moduleMLP))
	})
	t.Run("equal requests share a plan id", func(t *testing.T) {
		a := do(t, s, http.MethodPost, "/v1/graph", "application/json", moduleBody(t, nil))
		b := do(t, s, http.MethodPost, "/v1/graph", "application/mlir", moduleMLP)
		var pa, pb struct {
			PlanID string `json:"plan_id"`
		}
		require.NoError(t, json.Unmarshal(a.Body.Bytes(), &pa))
		require.NoError(t, json.Unmarshal(b.Body.Bytes(), &pb))
		assert.Equal(t, pa.PlanID, pb.PlanID)
	})
}

func TestGraphModuleAcceptMLIR(t *testing.T) {
	s := newTestServer(t, nil)
	rec := doAccept(t, s, "/v1/graph", "application/mlir", "application/mlir", moduleMLP)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "application/mlir; charset=utf-8", rec.Header().Get("Content-Type"))
	out := rec.Body.String()
	assert.Contains(t, out, `%arg2: tensor<256x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>})`)
	// The opaque custom call leaves the result without a sharding: none is printed.
	assert.Contains(t, out, `-> (tensor<32x64xf32> {jax.result_info = "result"}) {`)
	assert.Contains(t, out, `%3 = stablehlo.custom_call @my_kernel(%2) {backend_config = ""} :`)
	assert.Contains(t, out, `%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data", ?}, {"model", ?}]>]>} : (tensor<32x64xf32>`)
	assert.Contains(t, out, `#loc3 = loc("jit(mlp)/dot_general"("/tmp/mlp.py":12:0))`, "the rest is kept as it was")

	t.Run("an op list cannot answer MLIR", func(t *testing.T) {
		rec := doAccept(t, s, "/v1/graph", "application/json", "application/mlir", apiGraph)
		requireProblem(t, rec, http.StatusNotAcceptable, "not-acceptable")
	})
}

func TestGraphModuleErrors(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxModuleDepth = 8 })
	cases := []struct {
		name, ct, body string
		status         int
		slug, field    string
		msg            string
	}{
		{"syntax error names line and column", "application/mlir", "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  %0 = stablehlo.add %arg0, %arg0 : tensor<8xf32>\n  return %0 : tensor<8xf32>\n", 400, "invalid-module", "module", "line 4, column 1"},
		{"no terminator", "application/mlir", "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  %0 = stablehlo.add %arg0, %arg0 : tensor<8xf32>\n}\n", 400, "invalid-module", "module", "line 3, column 3: function @main ends without a terminator"},
		{"undefined value", "application/mlir", "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  return %1 : tensor<8xf32>\n}\n", 400, "invalid-module", "module", "line 3, column 3: %1 is used but not defined"},
		{"bad sharding names its column", "application/mlir", "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}]>}) -> tensor<8xf32> {\n  return %arg0 : tensor<8xf32>\n}\n", 400, "invalid-module", "module", "line 2, column 77: sharding of argument %arg0: unknown mesh axis \"y\""},
		{"op attribute error names the op's line", "application/mlir", "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main(%arg0: tensor<8x4xf32>) -> tensor<4x8xf32> {\n  %0 = stablehlo.transpose %arg0, dims = [0, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>\n  return %0 : tensor<4x8xf32>\n}\n", 400, "invalid-module", "module", "line 3, column 3: op \"0\" (transpose)"},
		{"too deep", "application/mlir", "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main() {\n  %0 = stablehlo.constant {a = [[[[[[[[[[1]]]]]]]]]]} dense<1.0> : tensor<f32>\n  return\n}\n", 400, "invalid-module", "module", "SHARDPLAN_MAX_MODULE_DEPTH"},
		{"no mesh", "application/mlir", "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  return %arg0 : tensor<8xf32>\n}\n", 400, "invalid-mesh", "mesh", "is required"},
		{"unknown function", "application/json", `{"module": "func.func @f() {\n return\n}", "function": "main", "mesh": "x=2"}`, 400, "invalid-module", "function", "no function @main"},
		{"module and ops together", "application/json", `{"module": "func.func @main() {\n return\n}", "mesh": "x=2", "ops": []}`, 400, "invalid-request", "ops", "must be absent when module is given"},
		{"neither module nor tensors", "application/json", `{"mesh": "x=2"}`, 400, "invalid-request", "tensors", "is required when module is absent"},
		{"unknown query parameter", "application/mlir", "func.func @main() {\n return\n}", 400, "invalid-request", "functoin", "unknown query parameter"},
		{"other media types stay 415", "text/plain", "func.func @main() {}", 415, "unsupported-media-type", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v1/graph"
			if tc.field == "functoin" {
				path += "?functoin=main"
			}
			rec := do(t, s, http.MethodPost, path, tc.ct, tc.body)
			p := requireProblem(t, rec, tc.status, tc.slug)
			if tc.field == "" {
				return
			}
			require.NotEmpty(t, p.Errors, rec.Body.String())
			assert.Equal(t, tc.field, p.Errors[0].Field)
			assert.Contains(t, p.Errors[0].Message, tc.msg)
		})
	}
}

// moduleGSPMD is what jax prints without Shardy: mhlo.sharding strings and no mesh, so
// the request names the mesh.
const moduleGSPMD = `module @jit_f attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x64xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}, %arg1: tensor<64x32xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"}) -> (tensor<16x32xf32> {jax.result_info = "", mhlo.layout_mode = "default"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<16x32xf32>) -> tensor<16x32xf32>
    return %1 : tensor<16x32xf32>
  }
}
`

func TestGraphModuleGSPMD(t *testing.T) {
	s := newTestServer(t, nil)
	body, err := json.Marshal(map[string]any{"module": moduleGSPMD, "mesh": "data=2,model=4"})
	require.NoError(t, err)
	g := postGraph(t, s, string(body))
	assert.Equal(t, [][]string{{"data"}, {}}, dimAxes(g.Shardings["arg0"]))
	assert.Equal(t, [][]string{{}, {"model"}}, dimAxes(g.Shardings["arg1"]))
	assert.Equal(t, [][]string{{"data"}, {"model"}}, dimAxes(g.Shardings["1"]), "the @Sharding custom call is a constraint")
	assert.Equal(t, [][]string{{"data"}, {"model"}}, dimAxes(g.Shardings["result0"]))

	t.Run("annotated answer declares the mesh", func(t *testing.T) {
		rec := doAccept(t, s, "/v1/graph?mesh=data=2,model=4", "application/mlir", "application/mlir", moduleGSPMD)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		out := rec.Body.String()
		assert.Contains(t, out, "module @jit_f attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {\n  sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n")
		assert.Contains(t, out, `%arg0: tensor<16x64xf32> {mhlo.layout_mode = "default", sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}`)
		assert.Contains(t, out, `-> (tensor<16x32xf32> {jax.result_info = "", mhlo.layout_mode = "default", sdy.sharding = #sdy.sharding<@mesh, [{"data", ?}, {"model", ?}]>})`)
	})
	t.Run("without a mesh", func(t *testing.T) {
		rec := do(t, s, http.MethodPost, "/v1/graph", "application/mlir", moduleGSPMD)
		p := requireProblem(t, rec, http.StatusBadRequest, "invalid-mesh")
		assert.Contains(t, p.Errors[0].Message, "give the request's \"mesh\"")
	})
	t.Run("a sharding the mesh cannot express names its line", func(t *testing.T) {
		rec := do(t, s, http.MethodPost, "/v1/graph?mesh=data=4", "application/mlir", moduleGSPMD)
		p := requireProblem(t, rec, http.StatusBadRequest, "invalid-module")
		// Column 113 is the tile dim 4 (inside the mhlo.sharding string) that overflows.
		assert.Equal(t, "line 2, column 113: sharding of argument %arg0: the tile counts multiply to more than the mesh's 4 devices", p.Errors[0].Message)
	})
}

func TestGraphModuleSyntaxErrorMessage(t *testing.T) {
	s := newTestServer(t, nil)
	rec := do(t, s, http.MethodPost, "/v1/graph", "application/mlir", "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  %0 = stablehlo.add %arg0, %arg0 : tensor<8xf32>\n  return %0 : tensor<8xf32>\n")
	p := requireProblem(t, rec, http.StatusBadRequest, "invalid-module")
	require.Len(t, p.Errors, 1)
	assert.Equal(t, "module", p.Errors[0].Field)
	assert.Equal(t, "line 4, column 1: expected '}' closing the region", p.Errors[0].Message)
}
