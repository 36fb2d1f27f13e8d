package api_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/api"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

func TestDecodeGraphErrors(t *testing.T) {
	m, err := sharding.ParseMeshString("data=2,model=4", "mesh")
	require.NoError(t, err)
	tests := []struct {
		name, body string
		fields     []string
		msg        string
	}{
		{"bad annotation axis", `{"tensors": {"x": {"shape": [8], "sharding": ["q"]}}, "ops": []}`, []string{"tensors.x.sharding[0]"}, "unknown"},
		{"unknown dtype", `{"tensors": {"x": {"shape": [8], "dtype": "f7"}}}`, []string{"tensors.x.dtype"}, "unknown dtype"},
		{"missing shape", `{"tensors": {"x": {}}}`, []string{"tensors.x.shape"}, "required"},
		{"null tensor", `{"tensors": {"x": null}}`, []string{"tensors.x.shape"}, "required"},
		{"unknown op field", `{"tensors": {}, "ops": [{"name": "a", "op": "add", "operandz": []}]}`, []string{"ops[0].operandz"}, "unknown field"},
		{"missing op kind", `{"tensors": {}, "ops": [{"name": "a"}]}`, []string{"ops[0].op"}, "supported ops"},
		{"bad option", `{"tensors": {}, "options": {"conflict_resolution": "gentle"}}`, []string{"options.conflict_resolution"}, "gentle"},
		{"wrong type", `{"tensors": {"x": {"shape": "big"}}}`, []string{"tensors.x.shape"}, "wrong JSON type (string where []int64"},
		{"fraction in a shape", `{"tensors": {"x": {"shape": [1.5]}}}`, []string{"tensors.x.shape"}, "number 1.5 where int64"},
		{"tensors not an object", `{"tensors": [1]}`, []string{"tensors"}, "must be an object"},
		{"tensors null", `{"tensors": null}`, []string{"tensors"}, "is required"},
		{"empty tensor id", `{"tensors": {"": {"shape": [1]}}}`, []string{"tensors"}, "must not be empty"},
		{"attrs not an object", `{"tensors": {}, "ops": [{"name": "a", "op": "add", "attrs": [1]}]}`, []string{"ops[0].attrs"}, "StableHLO attributes"},
		{"nested op", `{"tensors": {}, "ops": [{"name": "w", "op": "while", "cond": {"params": [], "ops": [{"name": "q", "bad": 1}], "returns": []}}]}`,
			[]string{"ops[0].cond.ops[0].bad"}, "unknown field"},
		{"every bad tensor and op in body order", `{"tensors": {"z": {"shape": [-1]}, "a": {"shape": [1], "dtype": "f7"}}, "ops": [{"name": "a"}, {"op": "add", "x": 1}]}`,
			[]string{"tensors.z.shape[0]", "tensors.a.dtype", "ops[0].op", "ops[1].x"}, ""},
		{"inputs of the wrong type", `{"tensors": {}, "inputs": [1]}`, []string{"inputs"}, "number where string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := api.DecodeGraph([]byte(tc.body), m)
			es, ok := sharding.AsFieldErrors(err)
			require.True(t, ok, "not field errors: %v", err)
			var fields []string
			for _, e := range es {
				fields = append(fields, e.Field)
			}
			assert.Equal(t, tc.fields, fields, es.Error())
			assert.Contains(t, es[0].Message, tc.msg)
		})
	}
}

// TestDecodeGraphValues: the values as the body gives them (attribute numbers keep
// their text, [] stays empty, null leaves a field unset, keys match case-insensitively
// as encoding/json matches them).
func TestDecodeGraphValues(t *testing.T) {
	m, err := sharding.ParseMeshString("x=2", "mesh")
	require.NoError(t, err)
	g, opts, err := api.DecodeGraph([]byte(`{"tensors": {"a": {"Shape": [4, 2], "dtype": "bf16", "sharding": ["x", null]}, "b": {"shape": [], "sharding": null}},
	  "ops": [{"name": "c", "op": "constant", "operands": [], "results": ["a"], "attrs": {"v": 1.50, "s": "\u0041", "l": [true, null, {}]}},
	          {"name": "w", "op": "while", "cond": {"params": null, "ops": [], "returns": ["b"]}}],
	  "inputs": [], "options": {"op_priority": false}}`), m)
	require.NoError(t, err)
	assert.Equal(t, propagation.Options{ConflictResolution: propagation.Aggressive}, opts)
	assert.Equal(t, []int64{4, 2}, g.Tensors["a"].Shape)
	assert.Equal(t, 16, g.Tensors["a"].ElemBits)
	assert.Equal(t, `[{"x"}, {}]`, g.Tensors["a"].Sharding.Body())
	assert.Equal(t, []int64{}, g.Tensors["b"].Shape)
	assert.Nil(t, g.Tensors["b"].Sharding)
	assert.Equal(t, map[string]any{"v": json.Number("1.50"), "s": "A", "l": []any{true, nil, map[string]any{}}}, g.Ops[0].Attrs)
	assert.Equal(t, []string{}, g.Ops[0].Operands)
	assert.Equal(t, &propagation.Region{Returns: []string{"b"}}, g.Ops[1].Cond)
	assert.Nil(t, g.Ops[1].Body)
	assert.Equal(t, []string{}, g.Inputs)
	assert.Nil(t, g.Outputs)
}
