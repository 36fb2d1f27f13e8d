package propagation_test

// The tests of propagation that start from a POST /v1/graph body: api.DecodeGraph reads
// it as the service does (the one wire schema lives in api).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/api"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/testgen"
)

const apiExample = `{
  "mesh": {"axes": [{"name": "data", "size": 2}, {"name": "model", "size": 4}]},
  "tensors": {
    "x": {"shape": [8, 16], "dtype": "bf16", "sharding": ["data", null]},
    "w": {"shape": [16, 32], "dtype": "bf16", "sharding": "[{}, {\"model\"}]"},
    "y": {"shape": [8, 32], "dtype": "bf16"}
  },
  "ops": [
    {"name": "mm", "op": "dot_general", "operands": ["x", "w"], "results": ["y"],
     "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}}
  ],
  "options": {"conflict_resolution": "basic", "op_priority": false},
  "cost_model": "h100-nvlink", "strategy": "optimal"
}`

// transformerGraph is testgen's transformer (the graph the api tests post): per layer
// a layer-norm-ish elementwise chain, q/k/v projections, attention einsums, an output
// projection, an MLP and residual adds; the input is data-parallel, weights are
// Megatron-sharded on "model".
func transformerGraph(t testing.TB, layers int) (*propagation.Graph, *sharding.Mesh) {
	m, err := sharding.ParseMeshString("data=4,model=8", "mesh")
	require.NoError(t, err)
	g, _, err := api.DecodeGraph([]byte(testgen.TransformerGraphJSON(layers)), m)
	require.NoError(t, err)
	return g, m
}

// opsPerLayer is the number of ops transformerGraph emits per layer.
const opsPerLayer = 19

func TestTransformerGraph(t *testing.T) {
	g, m := transformerGraph(t, 3)
	require.Len(t, g.Ops, 3*opsPerLayer)
	r, err := propagation.Propagate(context.Background(), g, m, propagation.DefaultOptions())
	require.NoError(t, err)
	for l := range 3 {
		p := func(n string) string { return fmt.Sprintf("l%d.%s", l, n) }
		require.Equal(t, `[{"data", ?}, {?}, {"model", ?}, {?}]`, r.Shardings[p("q")].Body())
		require.Equal(t, `[{"data", ?}, {?}, {"model", ?}]`, r.Shardings[p("h")].Body())
		require.Equal(t, `[{"data", ?}, {?}, {?}]`, r.Shardings[p("out")].Body())
	}
	var kinds = map[string]int{}
	for _, red := range r.Reductions {
		kinds[red.Kind+":"+refsText(red.Axes)]++
	}
	require.Equal(t, map[string]int{"all_reduce:model": 6}, kinds) // attn and mlp2 per layer
}

func BenchmarkPropagateTransformer(b *testing.B) {
	for _, nOps := range []int{1_000, 10_000, 100_000} {
		for _, strategy := range []string{propagation.Aggressive, propagation.Basic} {
			b.Run(fmt.Sprintf("ops=%d/%s", nOps, strategy), func(b *testing.B) {
				g, m := transformerGraph(b, nOps/opsPerLayer)
				opts := propagation.Options{ConflictResolution: strategy, OpPriority: true}
				r, err := propagation.Propagate(context.Background(), g, m, opts)
				require.NoError(b, err)
				require.Equal(b, `[{"data", ?}, {?}, {?}]`, r.Shardings[g.Outputs[0]].Body())
				b.ReportAllocs()
				for b.Loop() {
					if _, err := propagation.Propagate(context.Background(), g, m, opts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(g.Ops)), "ops")
			})
		}
	}
}

func refsText(axes []sharding.AxisRef) string {
	parts := make([]string, len(axes))
	for i, a := range axes {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}

func wireMesh(t testing.TB, s string) *sharding.Mesh {
	t.Helper()
	m, err := sharding.ParseMeshString(s, "mesh")
	require.NoError(t, err)
	return m
}

func wireFieldErrors(t *testing.T, err error) sharding.Errors {
	t.Helper()
	require.Error(t, err)
	es, ok := sharding.AsFieldErrors(err)
	require.True(t, ok, "not a field error: %v", err)
	return es
}

func TestDecodeAPIExample(t *testing.T) {
	m := wireMesh(t, "data=2,model=4")
	g, opts, err := api.DecodeGraph([]byte(apiExample), m)
	require.NoError(t, err)
	assert.Equal(t, propagation.Options{ConflictResolution: propagation.Basic, OpPriority: false}, opts)
	require.Len(t, g.Ops, 1)
	assert.Equal(t, 16, g.Tensors["x"].ElemBits)
	r, err := propagation.Propagate(context.Background(), g, m, opts)
	require.NoError(t, err)
	assert.Equal(t, `[{"data", ?}, {"model", ?}]`, r.Shardings["y"].Body())
	assert.Equal(t, []propagation.Origin{
		{Dim: 0, Axes: []sharding.AxisRef{{Name: "data", Pre: 1, Size: 2, Of: 2}}, From: "x dim 0 through mm (factor i)"},
		{Dim: 1, Axes: []sharding.AxisRef{{Name: "model", Pre: 1, Size: 4, Of: 4}}, From: "w dim 1 through mm (factor j)"},
	}, r.Explain["y"])
}

func TestValidateErrors(t *testing.T) {
	m := wireMesh(t, "a=2")
	tests := []struct {
		name, body, field, msg string
	}{
		{"unknown op", `{"tensors": {"x": {"shape": [2]}, "y": {"shape": [2]}}, "ops": [{"name": "f", "op": "frob", "operands": ["x"], "results": ["y"]}]}`,
			"ops[0].op", "supported ops: abs, add, and"},
		{"missing tensor", `{"tensors": {"x": {"shape": [2]}}, "ops": [{"name": "n", "op": "negate", "operands": ["x"], "results": ["nope"]}]}`,
			"ops[0].results[0]", `tensor "nope" is not in tensors`},
		{"produced twice", `{"tensors": {"x": {"shape": [2]}, "y": {"shape": [2]}}, "ops": [
			{"name": "n1", "op": "negate", "operands": ["x"], "results": ["y"]},
			{"name": "n2", "op": "negate", "operands": ["x"], "results": ["y"]}]}`,
			"ops[1].results[0]", `already produced by op "n1"`},
		{"cycle", `{"tensors": {"x": {"shape": [2]}, "y": {"shape": [2]}}, "ops": [
			{"name": "n1", "op": "negate", "operands": ["x"], "results": ["y"]},
			{"name": "n2", "op": "negate", "operands": ["y"], "results": ["x"]}]}`,
			"ops[0]", "cycle"},
		{"input produced", `{"tensors": {"x": {"shape": [2]}, "y": {"shape": [2]}}, "inputs": ["y"], "ops": [
			{"name": "n1", "op": "negate", "operands": ["x"], "results": ["y"]}]}`,
			"ops[0].results[0]", "graph input"},
		{"duplicate op name", `{"tensors": {"x": {"shape": [2]}, "y": {"shape": [2]}, "z": {"shape": [2]}}, "ops": [
			{"name": "n", "op": "negate", "operands": ["x"], "results": ["y"]},
			{"name": "n", "op": "negate", "operands": ["x"], "results": ["z"]}]}`,
			"ops[1].name", "already used"},
		{"contracting sizes", `{"tensors": {"x": {"shape": [2, 3]}, "w": {"shape": [4, 5]}, "y": {"shape": [2, 5]}}, "ops": [
			{"name": "mm", "op": "dot_general", "operands": ["x", "w"], "results": ["y"], "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}}]}`,
			"ops[0].attrs.rhs_contracting_dimensions[0]", `op "mm" (dot_general): contracting sizes differ`},
		{"bad permutation", `{"tensors": {"x": {"shape": [2, 3]}, "y": {"shape": [3, 2]}}, "ops": [
			{"name": "t", "op": "transpose", "operands": ["x"], "results": ["y"], "attrs": {"permutation": [1, 1]}}]}`,
			"ops[0].attrs.permutation[1]", `op "t" (transpose)`},
		{"while region shapes", `{"tensors": {"x": {"shape": [2]}, "y": {"shape": [2]}, "p": {"shape": [3]}, "c": {"shape": [2]}, "pr": {"shape": []}}, "ops": [
			{"name": "w", "op": "while", "operands": ["x"], "results": ["y"],
			 "cond": {"params": ["c"], "ops": [{"name": "k", "op": "constant", "results": ["pr"]}], "returns": ["pr"]},
			 "body": {"params": ["p"], "ops": [], "returns": ["p"]}}]}`,
			"ops[0].body.params[0]", "shape"},
		{"nested op error path", `{"tensors": {"x": {"shape": [2]}, "y": {"shape": [2]}, "p": {"shape": [2]}, "q": {"shape": [2]}, "c": {"shape": [2]}, "pr": {"shape": []}}, "ops": [
			{"name": "w", "op": "while", "operands": ["x"], "results": ["y"],
			 "cond": {"params": ["c"], "ops": [{"name": "k", "op": "constant", "results": ["pr"]}], "returns": ["pr"]},
			 "body": {"params": ["p"], "ops": [{"name": "tr", "op": "transpose", "operands": ["p"], "results": ["q"], "attrs": {"permutation": [3]}}], "returns": ["q"]}}]}`,
			"ops[0].body.ops[0].attrs.permutation[0]", "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, opts, err := api.DecodeGraph([]byte(tc.body), m)
			require.NoError(t, err)
			_, err = propagation.Propagate(context.Background(), g, m, opts)
			es := wireFieldErrors(t, err)
			assert.Equal(t, tc.field, es[0].Field, es.Error())
			assert.Contains(t, es[0].Message, tc.msg)
		})
	}
}

func TestPropagateCancelled(t *testing.T) {
	g, m := transformerGraph(t, 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := propagation.Propagate(ctx, g, m, propagation.DefaultOptions())
	assert.ErrorIs(t, err, context.Canceled)
}

// FuzzDecodePropagate: any body either fails Decode or propagation.Propagate with field errors, or
// propagates to shardings that satisfy every invariant and are a fixpoint.
func FuzzDecodePropagate(f *testing.F) {
	m, err := sharding.ParseMeshString("x=2,y=2", "mesh")
	if err != nil {
		f.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "graph-*.json"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"tensors": {"a": {"shape": [4, 6], "sharding": ["x", null]}, "b": {"shape": [6, 4]}, "c": {"shape": [4, 4]}},
		  "ops": [{"name": "mm", "op": "dot_general", "operands": ["a", "b"], "results": ["c"], "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}}]}`,
		`{"tensors": {"a": {"shape": [8], "sharding": "[{\"x\", \"y\"}]"}, "b": {"shape": [2, 4]}}, "ops": [{"name": "r", "op": "reshape", "operands": ["a"], "results": ["b"]}]}`,
		`{"tensors": {"a": {"shape": [4, 4]}, "b": {"shape": [4, 4], "sharding": {"dims": [{"axes": ["y"], "open": true, "priority": 1}, {"axes": []}]}}}, "ops": [{"name": "e", "op": "einsum", "operands": ["a"], "results": ["b"], "attrs": {"equation": "ij->ji"}}]}`,
		`{"tensors": {"a": {"shape": [4]}}, "ops": [{"name": "a", "op": "iota", "operands": [], "results": ["a"], "attrs": {"iota_dimension": 0}}], "options": {"conflict_resolution": "basic"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, opts, err := api.DecodeGraph(data, m)
		if err != nil {
			// Field errors, or (DecodeGraph's contract) a 400 problem for a body that is
			// not a JSON object.
			if p, ok := errors.AsType[*api.Problem](err); ok && p.Status == http.StatusBadRequest {
				return
			}
			if _, ok := sharding.AsFieldErrors(err); !ok {
				t.Fatalf("Decode error %v (%T) is neither a field error nor a 400 problem", err, err)
			}
			return
		}
		if g.NumOps() > 64 || len(g.Tensors) > 128 {
			return
		}
		// A budget against a hang, not a speed test: generous, so a loaded machine passes.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := propagation.Propagate(ctx, g, m, opts)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("propagation did not finish: %v", err)
			}
			if _, ok := sharding.AsFieldErrors(err); !ok {
				t.Fatalf("propagation.Propagate error %v (%T) is not a field error", err, err)
			}
			return
		}
		for id, s := range res.Shardings {
			if err := s.Validate(m, g.Tensors[id].Shape, id); err != nil {
				t.Fatalf("tensor %s: %v", id, err)
			}
		}
		// Feeding the result back as the annotations changes nothing.
		g2 := &propagation.Graph{Tensors: map[string]*propagation.Tensor{}, Ops: g.Ops, Inputs: g.Inputs, Outputs: g.Outputs}
		for id, tn := range g.Tensors {
			s := res.Shardings[id]
			g2.Tensors[id] = &propagation.Tensor{Shape: tn.Shape, ElemBits: tn.ElemBits, Sharding: &s}
		}
		res2, err := propagation.Propagate(ctx, g2, m, opts)
		if err != nil {
			t.Fatalf("second propagation: %v", err)
		}
		for id, s := range res.Shardings {
			if !s.Equal(res2.Shardings[id]) {
				t.Fatalf("not a fixpoint at %s: %s then %s", id, s.Body(), res2.Shardings[id].Body())
			}
		}
	})
}
