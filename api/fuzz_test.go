package api

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fuzzServer has small limits so a fuzzed request stays cheap.
func fuzzServer(f *testing.F) *Server {
	lim := DefaultLimits()
	lim.MaxDevices = 64
	lim.MaxRank = 6
	lim.MaxGraphOps = 64
	lim.MaxGraphTensors = 128
	lim.MaxBodyBytes = 1 << 16
	lim.MaxGraphBodyBytes = 1 << 16
	lim.MaxTransferTensors = 4096
	lim.MaxTransferMoves = 1 << 16
	// A budget against a hang, not a speed test: generous, so a loaded machine passes.
	lim.RequestTimeout = time.Minute
	s, err := New(Deps{Limits: lim})
	if err != nil {
		f.Fatal(err)
	}
	return s
}

// addExamples seeds f with the request files of examples/ whose names have prefix.
func addExamples(f *testing.F, prefix string) {
	files, err := filepath.Glob(filepath.Join("..", "examples", prefix+"*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no examples/%s*.json: %v", prefix, err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
}

// fuzzEndpoint posts body and fails on a 5xx or a non-problem error answer: bad input
// is always a 4xx problem+json.
func fuzzEndpoint(t *testing.T, s *Server, path, body string) {
	rec := do(t, s, http.MethodPost, path, "application/json", body)
	switch {
	case rec.Code >= 500:
		t.Fatalf("%d for %q: %s", rec.Code, body, rec.Body.String())
	case rec.Code >= 400 && rec.Header().Get("Content-Type") != ProblemContentType:
		t.Fatalf("%d without problem+json for %q", rec.Code, body)
	case rec.Code == http.StatusOK && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json"):
		t.Fatalf("200 with %q", rec.Header().Get("Content-Type"))
	}
}

func FuzzReshardBody(f *testing.F) {
	s := fuzzServer(f)
	addExamples(f, "reshard-")
	addExamples(f, "ci-gate-")
	for _, seed := range []string{
		`{"mesh": "x=2,y=2", "shape": [5, 3], "dtype": "s4", "source": "[{\"x\", ?}, {\"y\"}]", "target": [null, ["y", "x"]]}`,
		`{"mesh": "x=4", "shape": [8], "dtype": "f32", "source": {"dims": [{"axes": ["x:(1)2"]}], "unreduced": ["x:(2)2"]}, "target": ["x"], "strategy": "xla"}`,
		`{"mesh": "x=2", "shape": [4], "element_bytes": 3, "source": [0], "target": [null], "allowed_ops": ["all_gather"]}`,
		`{"mesh": "Mesh('X': 2, 'Y': 4)", "tensor": "tensor<64x64xf32>", "source": "#sdy.sharding<@mesh, [{\"X\"}, {}]>", "target": "(Shard(dim=1), Shard(dim=0))"}`,
		`{"mesh": "DeviceMesh('cuda', [[0, 2], [1, 3]], mesh_dim_names=('a', 'b'))", "tensor": "bf16[8,4]{1,0}", "source": "sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}, metadata={op_name=\"x\"}", "target": {"placements": "(_StridedShard(dim=0, sf=2), Shard(dim=0))"}}`,
		`{"mesh": "sdy.mesh @m = <[\"a\"=2]>", "shape": [4], "dtype": "f32", "source": "<@m, [{\"a\"}]>", "target": [None]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) { fuzzEndpoint(t, s, "/v1/reshard", body) })
}

func FuzzGraphBody(f *testing.F) {
	s := fuzzServer(f)
	addExamples(f, "graph-")
	for _, seed := range []string{
		`{"mesh": "x=2", "tensors": {"a": {"shape": [4, 4], "sharding": ["x", null]}, "b": {"shape": [4, 4]}}, "ops": [{"name": "t", "op": "transpose", "operands": ["a"], "results": ["b"], "attrs": {"permutation": [1, 0]}}]}`,
		`{"mesh": "x=2,y=2", "tensors": {"a": {"shape": [4, 6]}, "b": {"shape": [6, 8], "sharding": "[{\"x\"}, {?}]"}, "c": {"shape": [4, 8]}}, "ops": [{"name": "c", "op": "custom", "operands": ["a", "b"], "results": ["c"], "rule": "([i, k], [k, j])->([i, j]) {i=4, j=8, k=6} reduction={k}"}]}`,
		`{"mesh": "x=2", "tensors": {"i": {"shape": [4]}, "p": {"shape": [4]}, "q": {"shape": [4]}, "o": {"shape": [4]}, "c": {"shape": [], "dtype": "pred"}},
		  "ops": [{"name": "w", "op": "while", "operands": ["i"], "results": ["o"],
		    "cond": {"params": ["p"], "ops": [], "returns": ["c"]}, "body": {"params": ["q"], "ops": [], "returns": ["q"]}}]}`,
		`{"mesh": "x=2", "tensors": {"a": {"shape": [4], "sharding": ["x"]}, "b": {"shape": [4], "sharding": [null]}}, "ops": [{"name": "c", "op": "sharding_constraint", "operands": ["a"], "results": ["b"]}], "effort": "exhaustive", "planning_budget_ms": 5}`,
		`{"mesh": "x=2", "tensors": {}, "effort": "fast", "planning_budget_ms": -1.5e3}`,
		`{"mesh": "x=2", "tensors": {}, "Planning_Budget_MS": "7", "EFFORT": null}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) { fuzzEndpoint(t, s, "/v1/graph", body) })
}

// FuzzGraphModule posts module text as an application/mlir body, answered as JSON and
// as MLIR: never a 5xx, an error is always a problem.
func FuzzGraphModule(f *testing.F) {
	s := fuzzServer(f)
	for _, p := range []string{"../examples/graph-stablehlo-mlp.mlir", "../internal/stablehlo/testdata/corpus/regions.mlir", "../internal/stablehlo/testdata/corpus/shardy.mlir"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("func.func @main() {\n return\n}")
	f.Fuzz(func(t *testing.T, module string) {
		for _, accept := range []string{"", "application/mlir"} {
			rec := doAccept(t, s, "/v1/graph?mesh=x=2,y=2", "application/mlir", accept, module)
			switch {
			case rec.Code >= 500:
				t.Fatalf("%d for %q: %s", rec.Code, module, rec.Body.String())
			case rec.Code >= 400 && rec.Header().Get("Content-Type") != ProblemContentType:
				t.Fatalf("%d without problem+json for %q", rec.Code, module)
			}
		}
	})
}
