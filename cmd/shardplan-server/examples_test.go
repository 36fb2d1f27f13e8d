package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exampleCase is what posting one file of examples/ to the real server must give: the
// status and the values at some JSON paths ("steps.1.op"; "steps.#" is a length). A
// 422's plan is under "plan.".
type exampleCase struct {
	file   string
	status int
	want   map[string]any
}

// exampleCases covers every file in examples/ (TestExamplesAllCovered checks).
var exampleCases = []exampleCase{
	// Llama 3 8B from FSDP=4 x TP=8 to four TP=8 replicas on other nodes: pulls within
	// 1% of the bound the replicas' NICs set (at NCCL send/recv's per-pair rate).
	{"transfer-llama3-8b-rl-sync.json", 200, map[string]any{
		"summary.tensors": 291.0, "summary.groups": 7.0,
		"summary.bound.binding": "node 4 network ingress",
	}},
	{"tiles-16x23.json", 200, map[string]any{
		"tile_shape":                    []any{6.0, 6.0},
		"maps.global_to_device":         "t[i, j] -> d(i floordiv 6, j floordiv 6)[i mod 6, j mod 6]",
		"devices.#":                     12,
		"devices.10.ranges":             []any{[]any{12.0, 16.0}, []any{12.0, 18.0}},
		"devices.10.padding":            []any{2.0, 0.0},
		"locate.0.owners.0.device":      10.0,
		"locate.0.owners.0.local_index": []any{1.0, 5.0},
	}},
	// The same tensor and sharding as the frameworks print them.
	{"tiles-printed-forms.json", 200, map[string]any{
		"tile_shape":               []any{6.0, 6.0},
		"devices.10.ranges":        []any{[]any{12.0, 16.0}, []any{12.0, 18.0}},
		"locate.0.owners.0.device": 10.0,
		"sharding.partition_spec":  "P('x', 'y')",
	}},
	// Seed 003 case 1 as torch, XLA's dump and DTensor print it: the same plan.
	{"reshard-printed-forms.json", 200, map[string]any{
		"steps.#": 1, "steps.0.op": "all_to_all_v", "steps.0.transfers.#": 4,
		"source.partition_spec": "P('X', None)", "target.partition_spec": "P('Y', 'X')",
	}},
	// Routed, the direct exchange (four one-hop transfers) beats XLA's permute...
	{"reshard-seed003-case1.json", 200, map[string]any{
		"steps.#": 1, "steps.0.op": "all_to_all_v", "steps.0.transfers.#": 4,
		"summary.bytes_per_device":             2097152.0,
		"summary.lower_bound_bytes_per_device": 2097152.0,
		"summary.efficiency":                   1.0,
	}},
	// Seed 003 case 1 as XLA dumps the source and JAX writes the target.
	// ...which stays the plan without all_to_all_v, with XLA's own pairs.
	{"reshard-seed003-case1-xla-pairs.json", 200, map[string]any{
		"steps.#": 2, "steps.0.op": "slice", "steps.1.op": "collective_permute",
		"steps.1.pairs": []any{[]any{0.0, 0.0}, []any{1.0, 4.0}, []any{2.0, 1.0}, []any{3.0, 5.0}, []any{4.0, 2.0}, []any{5.0, 6.0}, []any{6.0, 3.0}, []any{7.0, 7.0}},
	}},
	{"reshard-hlo-strings.json", 200, map[string]any{
		"steps.#": 1, "steps.0.op": "all_to_all_v",
		"source.dims.0.axes": []any{"X"}, "source.partition_spec": "P('X', None)",
		"target.hlo":        "{devices=[4,2]<=[2,4]T(1,0)}",
		"target.text":       "sharding<@mesh, [{\"Y\"}, {\"X\"}]>",
		"steps.0.after.hlo": "{devices=[4,2]<=[2,4]T(1,0)}",
	}},
	{"reshard-seed003-case2.json", 200, map[string]any{
		"steps.#": 3, "steps.0.op": "slice", "steps.1.op": "all_to_all", "steps.2.op": "collective_permute",
		"summary.strategy": "xla", "summary.full_rematerialization": false,
	}},
	{"reshard-seed003-case3.json", 200, map[string]any{
		"steps.#": 2, "steps.0.op": "slice", "steps.1.op": "all_to_all", "steps.1.group_size": 16.0,
		"summary.full_rematerialization": false,
	}},
	{"reshard-seed003-case4-optimal.json", 200, map[string]any{
		"summary.full_rematerialization":       false,
		"summary.bytes_per_device":             131072.0,
		"summary.lower_bound_bytes_per_device": 65536.0,
		"steps.0.op":                           "all_to_all_v", // then one permute: a hybrid
		"steps.#":                              2,
	}},
	{"ci-gate-xla-case4.json", 422, map[string]any{
		"type":                                   "https://shardplan.dev/problems/policy-violation",
		"violations.0.policy":                    "forbid_full_rematerialization",
		"plan.summary.full_rematerialization":    true,
		"plan.summary.bytes_per_device":          16515072.0,
		"plan.source_hlo":                        "{devices=[2,32,4]<=[2,8,4,4]T(0,2,1,3) last_tile_dim_replicate}",
		"suggested_constraints.0.partition_spec": "P('D', ('X','Y','T'))",
	}},
	// The fix: the suggested constraint splits the reshard into two hops XLA handles.
	{"ci-gate-xla-case4-hop1.json", 200, map[string]any{"summary.xla_fallback": nil, "summary.full_rematerialization": false}},
	{"ci-gate-xla-case4-hop2.json", 200, map[string]any{"summary.xla_fallback": nil, "summary.full_rematerialization": false}},
	{"reshard-partial-sums.json", 200, map[string]any{
		"steps.#": 1, "steps.0.op": "reduce_scatter", "steps.0.mesh_axes": []any{"model"}, "steps.0.dim": 1.0,
	}},
	// The same reshard in PyTorch DTensor placements.
	{"reshard-dtensor-placements.json", 200, map[string]any{
		"steps.#": 1, "steps.0.op": "reduce_scatter", "steps.0.mesh_axes": []any{"model"}, "steps.0.dim": 1.0,
		"source.unreduced": []any{"model"}, "target.partition_spec": "P('data', 'model')",
	}},
	// The traffic stays inside the nodes: one exchange over NVLink.
	{"reshard-h100-keeps-nvlink.json", 200, map[string]any{
		"steps.#": 1, "steps.0.op": "all_to_all_v", "steps.0.link": "nvlink", "summary.cost_model": "h100",
	}},
	// 65,536 GPUs (8,192 nodes): the direct exchange, a million transfers priced from its
	// digits (port and NIC loads), instead of gathering everything (11 ms, a full
	// rematerialization). Its transfers do not compress into runs, so they are left out.
	// full_rematerialization: allow: gathering the 15-element tensor whole and slicing it
	// (11 µs) is 4.5x faster than the exchange the default answers (49 µs: one peer
	// message after another); the complete pass finds a small exchange first that makes
	// the gather a hair cheaper.
	{"reshard-allow-remat.json", 200, map[string]any{
		"summary.full_rematerialization": true, "steps.0.op": "all_to_all_v", "steps.1.op": "all_gather", "steps.#": 3,
		"summary.candidates.0.name": "all_to_all_v", "summary.optimality": "proven",
	}},
	// effort: fast (no anytime pass): the greedy plan, an all-to-all and a permute,
	// costs 12.3 µs from 8 expansions; the complete pass, which runs at either effort,
	// finds an exchange then an all-to-all at 11.2 µs, as the default does.
	{"reshard-effort-fast.json", 200, map[string]any{
		"steps.#": 2, "steps.0.op": "all_to_all_v", "steps.1.op": "all_to_all",
		"summary.search_expansions": 8.0, "summary.candidates.#": 5, "summary.candidates.0.name": "greedy",
		"summary.candidates.3.name": "xla", "summary.candidates.4.name": "complete",
	}},
	{"reshard-65536-gpus.json", 200, map[string]any{
		"steps.#": 1, "steps.0.op": "all_to_all_v", "steps.0.link": "ib",
		"summary.full_rematerialization": false, "lists_omitted": true,
		"summary.candidates.#": 3, "summary.candidates.1.name": "gather_then_slice",
		"summary.candidates.2.name": "xla",
	}},
	// Every axis on InfiniBand: bytes are what costs, so an exchange that moves only the
	// lower bound wins (after a local slice that spreads its senders).
	{"reshard-custom-cost-model.json", 200, map[string]any{"summary.cost_model": "h100+custom", "steps.#": 2, "steps.0.op": "slice", "steps.1.op": "all_to_all_v", "steps.1.link": "ib", "summary.efficiency": 1.0}},
	{"graph-api-example.json", 200, map[string]any{
		"shardings.y.dims.0.axes": []any{"data"}, "shardings.y.dims.1.axes": []any{"model"},
		"collectives.#": 0, "explain.y.0.from": "x dim 0 through mm (factor i)",
	}},
	{"graph-mlp.json", 200, map[string]any{
		"shardings.h.dims.1.axes": []any{"model"}, "shardings.a.dims.1.axes": []any{"model"},
		"collectives.#": 1, "collectives.0.op_name": "down", "collectives.0.kind": "reduction",
		"collectives.0.reduction": "all_reduce", "collectives.0.steps.0.op": "all_reduce",
		"summary.full_rematerialization": false, "ops.#": 3,
	}},
	// A JAX-style as_text() module (examples/graph-stablehlo-mlp.mlir as a JSON string):
	// Megatron's MLP, the relu call inlined, one all-reduce after the second matmul.
	{"graph-stablehlo-mlp.json", 200, map[string]any{
		"shardings.0.dims.0.axes": []any{"data"}, "shardings.0.dims.1.axes": []any{"model"},
		"shardings.relu@3/1.dims.1.axes": []any{"model"},
		"shardings.result0.dims.0.axes":  []any{"data"},
		"collectives.#":                  1, "collectives.0.op_name": "4", "collectives.0.reduction": "all_reduce",
		"collectives.0.mesh_axes": []any{"model"}, "opaque_ops": nil,
	}},
	// XLA's fallback predicted in the program, with the constraint that avoids it; the
	// memory peak is the source and target tiles (256 KiB, 64 KiB) plus XLA's whole
	// 16 MiB gathered tensor, over the 16 MiB budget.
	{"audit-ci-gate.json", 200, map[string]any{
		"strategy": "xla", "sites.#": 1, "sites.0.op": "constrain", "sites.0.xla_full_rematerialization": true,
		"totals.xla_remats.0.suggested_constraints.0.partition_spec": "P('D', ('X','Y','T'))",
		"memory.peak_op": "constrain", "memory.peak_bytes_per_device": float64(262144 + 65536 + 16777216), "memory.over_budget": true,
	}},
	{"graph-ci-gate.json", 422, map[string]any{
		"violations.0.op_name": "constrain", "violations.0.tensor": "a",
		"violations.0.suggested_constraints.0.partition_spec": "P('D', ('X','Y','T'))",
		"plan.summary.full_rematerialization":                 true,
	}},
}

func exampleDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	require.NoError(t, err)
	return dir
}

func endpointOf(file string) string {
	switch {
	case strings.HasPrefix(file, "tiles-"):
		return "/v1/tiles"
	case strings.HasPrefix(file, "graph-"):
		return "/v1/graph"
	case strings.HasPrefix(file, "audit-"):
		return "/v1/audit"
	case strings.HasPrefix(file, "transfer-"):
		return "/v1/transfer"
	}
	return "/v1/reshard"
}

// TestExamples posts every request file of examples/ to the real server, as the
// user guide's curl walkthrough does.
func TestExamples(t *testing.T) {
	base, _, _, _ := startServer(t, nil)
	dir := exampleDir(t)
	for _, tc := range exampleCases {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(dir, tc.file))
			require.NoError(t, err)
			resp, out := send(t, http.MethodPost, base+endpointOf(tc.file), "application/json", bytes.NewReader(body))
			require.Equal(t, tc.status, resp.StatusCode, string(out))
			var v any
			require.NoError(t, json.Unmarshal(out, &v))
			for path, want := range tc.want {
				got, ok := jsonAt(v, path)
				if want == nil {
					assert.False(t, ok && got != false, "%s: want absent or false, got %v", path, got)
					continue
				}
				require.True(t, ok, "%s missing in %s", path, out)
				assert.Equal(t, want, got, path)
			}
		})
	}
}

func TestExamplesAllCovered(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(exampleDir(t), "*.json"))
	require.NoError(t, err)
	covered := map[string]bool{}
	for _, tc := range exampleCases {
		covered[tc.file] = true
	}
	require.NotEmpty(t, files)
	for _, f := range files {
		assert.True(t, covered[filepath.Base(f)], "examples/%s has no case in exampleCases", filepath.Base(f))
	}
}

// jsonAt walks a decoded JSON value by a dotted path: object keys, array indices, and
// "#" for an array's length.
func jsonAt(v any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[part]; !ok {
				return nil, false
			}
		case []any:
			if part == "#" {
				return len(x), true
			}
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// TestExampleMLIR posts examples/graph-stablehlo-mlp.mlir as it is (Content-Type:
// application/mlir) and asks for the module back, annotated as sdy_opt prints it.
func TestExampleMLIR(t *testing.T) {
	base, _, _, _ := startServer(t, nil)
	body, err := os.ReadFile(filepath.Join(exampleDir(t), "graph-stablehlo-mlp.mlir"))
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/graph?function=main", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/mlir")
	req.Header.Set("Accept", "application/mlir")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	assert.Equal(t, "application/mlir; charset=utf-8", resp.Header.Get("Content-Type"))
	for _, want := range []string{
		`%arg2: tensor<256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model", ?}]>} loc("b1")`,
		`-> (tensor<32x64xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>})`,
		`%3 = call @relu(%2) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data", ?}, {"model", ?}]>]>} : (tensor<32x256xf32>) -> tensor<32x256xf32> loc(#loc10)`,
		`%4 = stablehlo.dot_general %3, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>}`,
	} {
		assert.Contains(t, string(out), want)
	}
}
