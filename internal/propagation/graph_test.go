package propagation

import (
	"context"
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestDecodeAPIExample(t *testing.T) {
	m := testMesh(t, "data=2,model=4")
	g, opts, err := Decode([]byte(apiExample), m)
	require.NoError(t, err)
	assert.Equal(t, Options{ConflictResolution: Basic, OpPriority: false}, opts)
	require.Len(t, g.Ops, 1)
	assert.Equal(t, 16, g.Tensors["x"].ElemBits)
	r, err := Propagate(context.Background(), g, m, opts)
	require.NoError(t, err)
	assert.Equal(t, `[{"data", ?}, {"model", ?}]`, r.Shardings["y"].Body())
	assert.Equal(t, []Origin{
		{Dim: 0, Axes: []sharding.AxisRef{{Name: "data", Pre: 1, Size: 2, Of: 2}}, From: "x dim 0 through mm (factor i)"},
		{Dim: 1, Axes: []sharding.AxisRef{{Name: "model", Pre: 1, Size: 4, Of: 4}}, From: "w dim 1 through mm (factor j)"},
	}, r.Explain["y"])
}

func fieldErrors(t *testing.T, err error) sharding.Errors {
	t.Helper()
	require.Error(t, err)
	es, ok := sharding.AsFieldErrors(err)
	require.True(t, ok, "not a field error: %v", err)
	return es
}

func TestDecodeErrors(t *testing.T) {
	m := testMesh(t, "data=2,model=4")
	tests := []struct {
		name, body, field, msg string
	}{
		{"bad annotation axis", `{"tensors": {"x": {"shape": [8], "sharding": ["q"]}}, "ops": []}`, "tensors.x.sharding[0]", "unknown"},
		{"duplicate tensor", `{"tensors": {"x": {"shape": [8]}, "x": {"shape": [4]}}, "ops": []}`, "tensors.x", "defined twice"},
		{"unknown dtype", `{"tensors": {"x": {"shape": [8], "dtype": "f7"}}}`, "tensors.x.dtype", "unknown dtype"},
		{"missing shape", `{"tensors": {"x": {}}}`, "tensors.x.shape", "required"},
		{"unknown op field", `{"tensors": {}, "ops": [{"name": "a", "op": "add", "operandz": []}]}`, "ops[0].operandz", "unknown field"},
		{"missing op kind", `{"tensors": {}, "ops": [{"name": "a"}]}`, "ops[0].op", "supported ops"},
		{"bad option", `{"tensors": {}, "options": {"conflict_resolution": "gentle"}}`, "options.conflict_resolution", "gentle"},
		{"wrong type", `{"tensors": {"x": {"shape": "big"}}}`, "tensors.x.shape", "wrong JSON type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode([]byte(tc.body), m)
			es := fieldErrors(t, err)
			assert.Equal(t, tc.field, es[0].Field, es.Error())
			assert.Contains(t, es[0].Message, tc.msg)
		})
	}
}

func TestValidateErrors(t *testing.T) {
	m := testMesh(t, "a=2")
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
			g, opts, err := Decode([]byte(tc.body), m)
			require.NoError(t, err)
			_, err = Propagate(context.Background(), g, m, opts)
			es := fieldErrors(t, err)
			assert.Equal(t, tc.field, es[0].Field, es.Error())
			assert.Contains(t, es[0].Message, tc.msg)
		})
	}
}

func TestPropagateCancelled(t *testing.T) {
	g, m := transformerGraph(t, 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Propagate(ctx, g, m, DefaultOptions())
	assert.ErrorIs(t, err, context.Canceled)
}
