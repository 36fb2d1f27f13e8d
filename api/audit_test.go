package api

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/testgen"
)

func readAudit(t *testing.T, body []byte) AuditResponse {
	t.Helper()
	var a AuditResponse
	require.NoError(t, json.Unmarshal(body, &a), string(body))
	return a
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestAuditStableHLOMLP audits the MLP example: its one collective (the second matmul's
// all_reduce over model) with the line and op name of its loc, the memory peak at the
// first layer's add, and the budget flags.
func TestAuditStableHLOMLP(t *testing.T) {
	srv := newTestServer(t, nil)
	mlir := readFile(t, "../examples/graph-stablehlo-mlp.mlir")
	rec := doAccept(t, srv, "/v1/audit?memory_budget_bytes_per_device=48000", mlirMediaType, "", mlir)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	a := readAudit(t, rec.Body.Bytes())
	assert.Equal(t, "program", a.Input)
	assert.Equal(t, "xla", a.Strategy)
	require.Len(t, a.Sites, 1)
	s := a.Sites[0]
	assert.Equal(t, 1, s.Rank)
	assert.Equal(t, "reduction", s.Kind)
	assert.Equal(t, "all_reduce", s.Reduction)
	assert.Equal(t, []string{"model"}, s.Axes)
	assert.Equal(t, AuditLocation{File: "/tmp/mlp.py", Line: 12, OpName: "jit(mlp)/jit(main)/dot_general", ModuleLine: 10}, s.Location)
	// all_reduce of the f32[32,64] result's 16x64 tile over 4 devices: 2*(4-1)/4 of 4 KiB.
	assert.Equal(t, int64(6144), s.BytesPerDevice)
	assert.InDelta(t, s.TimeUS, a.Totals.TimeUS, 1e-9)
	assert.InDelta(t, 1.0, a.Totals.Top10Share, 1e-9)

	m := a.Memory
	require.NotNil(t, m)
	// Held: x 16x64 f32 (4 KiB), w1 64x64 (16 KiB), b1 256 (1 KiB), w2 64x64 (16 KiB),
	// b2 64 (256 B), result 16x64 (4 KiB) = 41472. The peak adds two 16x64 tiles of the
	// first layer (the matmul and its bias) at its add.
	assert.Equal(t, int64(41472), m.HeldBytesPerDevice)
	assert.Equal(t, int64(41472+2*4096), m.PeakBytesPerDevice)
	assert.Equal(t, "2", m.PeakOp)
	assert.Equal(t, "jit(mlp)/jit(main)/add", m.PeakLocation.OpName)
	require.NotNil(t, m.MemoryBudgetBytesPerDevice)
	assert.True(t, m.OverBudget)
	assert.Equal(t, len(m.OverBudgetOps), m.OverBudgetCount)
	for _, p := range m.Timeline {
		assert.Equal(t, p.LiveBytes+p.TransientBytes, p.Bytes)
		assert.LessOrEqual(t, p.Bytes, m.PeakBytesPerDevice)
	}

	rec = doAccept(t, srv, "/v1/audit", mlirMediaType, "text/plain", mlir)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	text := rec.Body.String()
	for _, want := range []string{"audit of a program on mesh data=2,model=4", "/tmp/mlp.py:12", "all_reduce of tensor 4 at op 4 over model", "memory: peak 48.5 KiB per device at op 2", "XLA full rematerializations: 0"} {
		assert.Contains(t, text, want)
	}
}

// TestAuditTransformerRanking: two layers of the transformer communicate in four
// all_reduces over model (the attention output and the second MLP matmul contract over
// it), each of a bf16 [8,128,512] tile split four ways over data: 256 KiB, of which a
// ring all_reduce over 8 devices receives 2*7/8 = 448 KiB. Equal times rank in program
// order.
func TestAuditTransformerRanking(t *testing.T) {
	srv := newTestServer(t, nil)
	rec := do(t, srv, http.MethodPost, "/v1/audit", "application/json", testgen.TransformerGraphJSON(2))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	a := readAudit(t, rec.Body.Bytes())
	var got []string
	for _, s := range a.Sites {
		got = append(got, s.Reduction+" "+s.Op)
		assert.Equal(t, int64(448<<10), s.BytesPerDevice, s.Op)
		assert.Equal(t, []string{"model"}, s.Axes)
		assert.InDelta(t, a.Sites[0].TimeUS, s.TimeUS, 1e-9)
	}
	assert.Equal(t, []string{"all_reduce l0.attn", "all_reduce l0.mlp2", "all_reduce l1.attn", "all_reduce l1.mlp2"}, got)
	assert.InDelta(t, 4*a.Sites[0].TimeUS, a.Totals.TimeUS, 1e-9)
}

// TestAuditTransformerMatchesGraph: the audit of the transformer plans what /v1/graph
// plans (same strategy: the same total), ranks its sites dearest first, and every
// layer's sites cost what the first layer's do.
func TestAuditTransformerMatchesGraph(t *testing.T) {
	srv := newTestServer(t, nil)
	const layers = 3
	body := testgen.TransformerGraphJSON(layers)
	var req map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &req))
	req["strategy"] = "xla"
	b, _ := json.Marshal(req)
	g := do(t, srv, http.MethodPost, "/v1/graph", "application/json", string(b))
	require.Equal(t, http.StatusOK, g.Code, g.Body.String())
	var gr GraphResponse
	require.NoError(t, json.Unmarshal(g.Body.Bytes(), &gr))

	rec := do(t, srv, http.MethodPost, "/v1/audit", "application/json", body)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	a := readAudit(t, rec.Body.Bytes())
	require.Len(t, a.Sites, len(gr.Collectives))
	assert.InDelta(t, gr.Summary.TimeUS, a.Totals.TimeUS, 1e-6)
	byLayer := map[string]map[string]float64{}
	for i, s := range a.Sites {
		assert.Equal(t, i+1, s.Rank)
		if i > 0 {
			assert.GreaterOrEqual(t, a.Sites[i-1].TimeUS, s.TimeUS, "ranked dearest first")
		}
		layer, rest, ok := strings.Cut(s.Op, ".")
		require.True(t, ok, s.Op)
		if byLayer[layer] == nil {
			byLayer[layer] = map[string]float64{}
		}
		byLayer[layer][rest+"/"+strings.TrimPrefix(s.Tensor, layer+".")+"/"+s.Kind] += s.TimeUS
	}
	require.Len(t, byLayer, layers)
	for l := 1; l < layers; l++ {
		assert.InDeltaMapValues(t, byLayer["l0"], byLayer["l"+itoa(l)], 1e-6, "layer %d", l)
	}
	top := 0.0
	for _, s := range a.Sites[:min(10, len(a.Sites))] {
		top += s.TimeUS
	}
	assert.InDelta(t, top, a.Totals.Top10TimeUS, 1e-6)
	require.NotNil(t, a.Memory)
	assert.Len(t, a.Memory.Timeline, len(req["ops"].([]any)))
}

// TestAuditXLARemat: seed 003's case 4 as a graph: XLA would fully rematerialize, and
// the audit names the site and the constraints that avoid it, in JSON and in the report.
func TestAuditXLARemat(t *testing.T) {
	srv := newTestServer(t, nil)
	body := readFile(t, "../examples/graph-ci-gate.json")
	for _, strategy := range []string{"xla", "optimal"} {
		var req map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &req))
		req["strategy"] = strategy
		b, _ := json.Marshal(req)
		rec := do(t, srv, http.MethodPost, "/v1/audit", "application/json", string(b))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		a := readAudit(t, rec.Body.Bytes())
		require.Len(t, a.Sites, 1)
		s := a.Sites[0]
		assert.True(t, s.XLAFullRematerialization, strategy)
		assert.NotEmpty(t, s.SuggestedConstraints, strategy)
		require.Len(t, a.Totals.XLARemats, 1)
		assert.Equal(t, "constrain", a.Totals.XLARemats[0].Op)
		assert.Equal(t, s.SuggestedConstraints, a.Totals.XLARemats[0].SuggestedConstraints)
		if strategy == "optimal" {
			require.NotNil(t, s.XLATimeUS)
			assert.Greater(t, *s.XLATimeUS, s.TimeUS, "the optimal plan beats XLA's fallback")
			assert.False(t, s.FullRematerialization)
		} else {
			assert.Nil(t, s.XLATimeUS)
		}
	}
	rec := doAccept(t, srv, "/v1/audit", "application/json", "text/plain", body)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "XLA full rematerializations: 1")
	assert.Contains(t, rec.Body.String(), "fix: insert these sharding constraints, in order: P('D', ('X','Y','T'))")
}

// TestAuditCompiledSeed003 posts the four compiled dumps of seed 003 both ways (a
// text/x-hlo body, an hlo_module field) and checks the decoded axes and the remat.
func TestAuditCompiledSeed003(t *testing.T) {
	srv := newTestServer(t, nil)
	big := "C=1,D=2,Y=8,X=4,T=4"
	cases := []struct {
		file, mesh string
		axes       map[string][]string
		remats     int
		param      string // the source sharding the seed names
	}{
		{"seed003_case1.hlo", "X=2,Y=4", map[string][]string{"collective-permute": {"X", "Y"}}, 0, "P('X', None)"},
		{"seed003_case2.hlo", "X=2,Y=4", map[string][]string{"all-to-all.1": {"Y:(2)2"}, "collective-permute": {"X", "Y"}}, 0, "P('Y', None)"},
		{"seed003_case3.hlo", big, map[string][]string{"all-to-all.1": {"X", "T"}}, 0, "P(None, ('X','T'))"},
		{"seed003_case4.hlo", big, map[string][]string{"all-gather": {"X", "Y"}, "all-gather.1": {"D"}}, 1, "P('D', ('X','Y'))"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			text := readFile(t, filepath.Join("..", "internal", "hlo", "testdata", tc.file))
			raw := doAccept(t, srv, "/v1/audit?mesh="+tc.mesh, hloMediaType, "", text)
			require.Equal(t, http.StatusOK, raw.Code, raw.Body.String())
			b, _ := json.Marshal(map[string]any{"hlo_module": text, "mesh": tc.mesh, "cost_model": "tpu-v5p"})
			field := do(t, srv, http.MethodPost, "/v1/audit", "application/json", string(b))
			require.Equal(t, http.StatusOK, field.Code, field.Body.String())
			a := readAudit(t, raw.Body.Bytes())
			assert.Equal(t, readAudit(t, field.Body.Bytes()), a)
			assert.Equal(t, "compiled", a.Input)
			require.Len(t, a.Collectives, len(tc.axes))
			for _, c := range a.Collectives {
				assert.Equal(t, tc.axes[c.Name], c.MeshAxes, c.Name)
			}
			require.Len(t, a.Sites, len(a.Collectives))
			for i, s := range a.Sites[1:] {
				assert.GreaterOrEqual(t, a.Sites[i].TimeUS, s.TimeUS)
			}
			require.Len(t, a.Parameters, 1)
			assert.Equal(t, tc.param, a.Parameters[0].PartitionSpec)
			assert.Equal(t, []int64{2048, 2048}, a.Parameters[0].GlobalShape)
			assert.Len(t, a.Remats, tc.remats)
			assert.Equal(t, tc.remats > 0, a.Totals.FullRematerializations > 0)
			require.NotNil(t, a.Memory)
			if tc.remats > 0 {
				// The whole tensor, gathered while the buffer it was gathered from lives.
				assert.Equal(t, "all-gather.1", a.Memory.PeakOp)
				assert.Equal(t, int64(256<<10+64<<10+4+8<<20+16<<20), a.Memory.PeakBytesPerDevice)
				r := a.Remats[0]
				assert.Equal(t, "P('D', ('X','Y'))", r.SourcePartitionSpec)
				assert.Equal(t, "P(None, ('D','Y','X','T'))", r.TargetPartitionSpec)
				assert.Equal(t, []int64{2048, 2048}, r.Shape)
				// shardplan's plan of the same reshard beside XLA's chain, and the fix.
				require.NotNil(t, r.Plan, r.Note)
				require.NotNil(t, r.SavedUS)
				assert.InDelta(t, r.TimeUS-r.Plan.Summary.TimeUS, *r.SavedUS, 1e-9)
				assert.Greater(t, *r.SavedUS, 0.0)
				assert.False(t, r.Plan.Summary.FullRematerialization)
				require.NotEmpty(t, r.SuggestedConstraints)
				assert.Equal(t, "P('D', ('X','Y','T'))", r.SuggestedConstraints[0].PartitionSpec)
				// XLA's chain costs what strategy xla predicts for the same reshard as a program.
				prog := do(t, srv, http.MethodPost, "/v1/audit", "application/json", readFile(t, "../examples/audit-ci-gate.json"))
				require.Equal(t, http.StatusOK, prog.Code)
				assert.InDelta(t, readAudit(t, prog.Body.Bytes()).Totals.TimeUS, a.Totals.TimeUS, 1e-6)
			}
		})
	}
}

// TestAuditWrongModuleKind: a compiled module where StableHLO is expected, and the
// reverse, say which field or content type takes it.
func TestAuditWrongModuleKind(t *testing.T) {
	srv := newTestServer(t, nil)
	hloText := readFile(t, "../internal/hlo/testdata/seed003_case1.hlo")
	mlir := readFile(t, "../examples/graph-stablehlo-mlp.mlir")
	for _, path := range []string{"/v1/graph", "/v1/audit"} {
		b, _ := json.Marshal(map[string]any{"module": hloText})
		p := requireProblem(t, do(t, srv, http.MethodPost, path, "application/json", string(b)), http.StatusBadRequest, slugInvalidModule)
		assert.Contains(t, p.Detail, `post it to /v1/audit as "hlo_module" or with Content-Type text/x-hlo`, path)
	}
	p := requireProblem(t, doAccept(t, srv, "/v1/graph", hloMediaType, "", hloText), http.StatusUnsupportedMediaType, slugUnsupportedMedia)
	assert.Contains(t, p.Detail, "POST /v1/audit takes")

	b, _ := json.Marshal(map[string]any{"hlo_module": mlir})
	p = requireProblem(t, do(t, srv, http.MethodPost, "/v1/audit", "application/json", string(b)), http.StatusBadRequest, slugInvalidModule)
	assert.Contains(t, p.Detail, "hlo_module: line 1, column 1: this is MLIR (StableHLO) text")
	assert.Contains(t, p.Detail, `post it as "module" or with Content-Type application/mlir`)
	p = requireProblem(t, doAccept(t, srv, "/v1/audit", hloMediaType, "", mlir), http.StatusBadRequest, slugInvalidModule)
	assert.Contains(t, p.Detail, "this is MLIR (StableHLO) text")
}

func TestAuditErrors(t *testing.T) {
	srv := newTestServer(t, nil)
	hloText := readFile(t, "../internal/hlo/testdata/seed003_case1.hlo")
	broken := strings.Replace(hloText, "%partition-id = u32[] partition-id()", "%partition-id = u32[ partition-id()", 1)
	seed4 := readFile(t, "../internal/hlo/testdata/seed003_case4.hlo")
	cases := []struct {
		name, path, ct, body string
		status               int
		slug, field, detail  string
	}{
		{"hlo syntax", "/v1/audit", hloMediaType, broken, 400, slugInvalidModule, "hlo_module", "hlo_module: line 19, column 22: expected a dim size"},
		{"mesh size", "/v1/audit?mesh=x=4", hloMediaType, hloText, 400, slugInvalidMesh, "mesh", "the module runs on 8"},
		{"unknown query", "/v1/audit?strategy=xla", hloMediaType, hloText, 400, slugInvalidRequest, "strategy", "unknown query parameter"},
		{"bad budget", "/v1/audit?memory_budget_bytes_per_device=0", hloMediaType, hloText, 400, slugInvalidRequest, "memory_budget_bytes_per_device", "positive integer"},
		{"bad budget json", "/v1/audit", "application/json", `{"module": "x", "memory_budget_bytes_per_device": "lots"}`, 400, slugInvalidRequest, "memory_budget_bytes_per_device", "positive integer"},
		{"unknown field", "/v1/audit", "application/json", `{"hlo_module": "HloModule m", "tensors": {}}`, 400, slugInvalidRequest, "tensors", "takes hlo_module, mesh, cost_model, memory_budget_bytes_per_device, profile only"},
		{"empty hlo", "/v1/audit", hloMediaType, " ", 400, slugInvalidModule, "hlo_module", "empty"},
		{"hlo not a string", "/v1/audit", "application/json", `{"hlo_module": 5}`, 400, slugInvalidJSON, "", "hlo_module"},
		{"hlo budget json", "/v1/audit", "application/json", `{"hlo_module": "HloModule m", "memory_budget_bytes_per_device": 0}`, 400, slugInvalidRequest, "memory_budget_bytes_per_device", "positive integer"},
		{"hlo key twice", "/v1/audit", "application/json", `{"hlo_module": "HloModule m", "mesh": "x=2", "mesh": "x=4"}`, 400, slugInvalidJSON, "mesh", "more than once"},
		{"null hlo_module reads a program", "/v1/audit", "application/json", `{"hlo_module": null, "mesh": "x=2", "tensors": {}, "bogus": 1}`, 400, slugInvalidRequest, "bogus", "unknown field"},
		{"bad json", "/v1/audit", "application/json", `{"module": `, 400, slugInvalidJSON, "", ""},
		{"null body", "/v1/audit", "application/json", "null", 400, slugInvalidJSON, "", "must be a JSON object, not null"},
		{"mesh in another order", "/v1/audit?mesh=C=1,D=2,X=4,Y=8,T=4", hloMediaType, seed4, 400, slugInvalidMesh, "mesh", "a mesh that fits: axis_0=2,axis_1=8,axis_2=4,axis_3=4"},
		{"unknown opcode", "/v1/audit", hloMediaType, strings.Replace(hloText, "collective-permute(", "colective-permute(", 1), 400, slugInvalidModule, "hlo_module", `unknown opcode "colective-permute"`},
		{"device twice", "/v1/audit", hloMediaType, loopsModule("{{0,1,2,2}}", ""), 400, slugInvalidModule, "hlo_module", "device 2 is listed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := requireProblem(t, doAccept(t, srv, tc.path, tc.ct, "", tc.body), tc.status, tc.slug)
			if tc.field != "" {
				assert.Contains(t, fields(p), tc.field)
			}
			assert.Contains(t, p.Detail, tc.detail)
		})
	}
}

// loopsModule is an all-gather in a while loop of 4 trips (known_trip_count), with
// groups, and extra instructions in the entry.
func loopsModule(groups, extra string) string {
	return `HloModule loops, num_partitions=4

FileNames
1 "/work/train.py"

FunctionNames
1 "step"

FileLocations
1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

cond {
  p = (s32[], f32[1024]) parameter(0)
  ROOT c = pred[] constant(true)
}

body {
  p = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[1024] get-tuple-element(p), index=1
  s = f32[256] slice(x), slice={[0:256]}
  ag = f32[1024] all-gather(s), replica_groups=` + groups + `, dimensions={0}, metadata={op_name="jit(step)/all_gather" stack_frame_id=1}
  ROOT t = (s32[], f32[1024]) tuple(i, ag)
}

ENTRY main {
  x = f32[1024] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[1024]) tuple(zero, x)
  w = (s32[], f32[1024]) while(init), condition=cond, body=body, backend_config={"known_trip_count":{"n":"4"}}` + extra + `
  ROOT y = f32[1024] get-tuple-element(w), index=1
}
`
}

// TestAuditCompiledLoopsAndLocations: a site in a loop counts every trip and says how
// many; its location is its stack frame's file, line and function; what communicates
// without a price is listed; the mesh used is said.
func TestAuditCompiledLoopsAndLocations(t *testing.T) {
	srv := newTestServer(t, nil)
	text := loopsModule("{{0,1,2,3}}", "\n  cb = f32[1024] collective-broadcast(x), replica_groups={{0,1,2,3}}")
	rec := doAccept(t, srv, "/v1/audit", hloMediaType, "", text)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	a := readAudit(t, rec.Body.Bytes())
	require.Len(t, a.Sites, 1)
	s := a.Sites[0]
	assert.Equal(t, int64(4), s.TripCount)
	assert.Equal(t, AuditLocation{File: "/work/train.py", Line: 42, OpName: "jit(step)/all_gather", Function: "step", ModuleLine: 25}, s.Location)
	c := a.Collectives[0]
	assert.Equal(t, int64(4), c.TripCount)
	assert.True(t, c.TripCountKnown)
	assert.InDelta(t, c.LatencyUS+c.BandwidthUS, c.TimeUS, 1e-9)
	assert.Equal(t, 4*c.BytesPerDevice/4, c.BytesPerDevice)
	assert.Equal(t, int64(4*(1024*4-1024)), c.BytesPerDevice, "3/4 of 4 KiB received, 4 times")
	assert.InDelta(t, c.TimeUS, a.Totals.TimeUS, 1e-9)
	require.Len(t, a.Unmodeled, 1)
	assert.Equal(t, HLOUnmodeled{Computation: "main", Name: "cb", Opcode: "collective-broadcast", Line: 34, Column: 3,
		Reason: "no cost model for collective-broadcast (one device's buffer to its group)"}, a.Unmodeled[0])
	assert.Equal(t, 1, a.Totals.Unmodeled)
	assert.Equal(t, "devices", a.MeshSource)
	assert.Equal(t, 4, a.Devices)

	txt := doAccept(t, srv, "/v1/audit", hloMediaType, "text/plain", text)
	require.Equal(t, http.StatusOK, txt.Code)
	body := txt.Body.String()
	assert.Contains(t, body, "/work/train.py:42 (step)")
	assert.Contains(t, body, "x4 runs")
	assert.Contains(t, body, "UNMODELED: 1 instruction communicating")
	assert.Contains(t, body, "line 34: collective-broadcast %cb")
	assert.Contains(t, body, "mesh: nothing in the module names mesh axes")

	// Groups that match no axes of the mesh: priced on the groups, with the note.
	rec = doAccept(t, srv, "/v1/audit?mesh=x=2,y=2", hloMediaType, "text/plain", loopsModule("{{0,3,1,2}}", ""))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "all_gather %ag over its device groups x4 runs")
	assert.Contains(t, rec.Body.String(), "note: the group [0 3 1 2] does not list its devices in order over (x,y)")
	assert.Contains(t, rec.Body.String(), "priced on its groups of 4 devices as a ring")
	assert.NotContains(t, rec.Body.String(), "communication: 0.00 us")
}
