package propagation

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRuleCacheKey(t *testing.T) {
	key := func(op *Op, in, out [][]int64) (string, bool) {
		var c ruleCache
		ok := c.makeKey(op, in, out)
		return string(c.key), ok
	}
	base := &Op{Kind: "reduce", Attrs: map[string]any{"dimensions": []any{json.Number("2")}}}
	in, out := [][]int64{{8, 4, 2}}, [][]int64{{8, 4}}
	k0, ok := key(base, in, out)
	require.True(t, ok)

	same := &Op{Name: "other", Kind: "reduce", Operands: []string{"a"}, Attrs: map[string]any{"dimensions": []any{json.Number("2")}}}
	k, _ := key(same, in, out)
	assert.Equal(t, k0, k, "names and tensors are not part of the key")

	for name, op := range map[string]*Op{
		"float":  {Kind: "reduce", Attrs: map[string]any{"dimensions": []any{2.0}}},
		"int":    {Kind: "reduce", Attrs: map[string]any{"dimensions": []int{2}}},
		"string": {Kind: "reduce", Attrs: map[string]any{"dimensions": []any{"2"}}},
		"kind":   {Kind: "transpose", Attrs: base.Attrs},
		"rule":   {Kind: "reduce", Rule: "x", Attrs: base.Attrs},
	} {
		k, ok := key(op, in, out)
		require.True(t, ok, name)
		assert.NotEqual(t, k0, k, name)
	}
	k, _ = key(base, [][]int64{{8, 4, 3}}, out)
	assert.NotEqual(t, k0, k, "operand shapes")
	k, _ = key(base, [][]int64{{8, 4}, {2}}, out)
	assert.NotEqual(t, k0, k, "operand count")

	kNil, _ := key(&Op{Kind: "add"}, in, out)
	kEmpty, _ := key(&Op{Kind: "add", Attrs: map[string]any{}}, in, out)
	assert.Equal(t, kNil, kEmpty, "nil and empty attrs read alike")

	_, ok = key(&Op{Kind: "reduce", Attrs: map[string]any{"dimensions": []uint{2}}}, in, out)
	assert.False(t, ok, "a type the key does not encode is not cached")
}

// TestRuleCacheShares checks that equal ops share one rule, and that each failing op
// is reported on its own, under its own path.
func TestRuleCacheShares(t *testing.T) {
	mk := func(name, rhs string) Op {
		return Op{Name: name, Kind: "einsum", Operands: []string{"a", rhs}, Results: []string{name}, Attrs: map[string]any{"equation": "ij,jk->ik"}}
	}
	g := &Graph{
		Tensors: map[string]*Tensor{"a": {Shape: []int64{4, 8}}, "w": {Shape: []int64{8, 2}}, "bad": {Shape: []int64{9, 2}}},
		Ops:     []Op{mk("x", "w"), mk("y", "w"), mk("p", "bad"), mk("q", "bad")},
	}
	for _, id := range []string{"x", "y", "p", "q"} {
		g.Tensors[id] = &Tensor{Shape: []int64{4, 2}}
	}
	_, err := prepare(t.Context(), g, testMesh(t, "x=2"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ops[2]")
	assert.Contains(t, err.Error(), "ops[3]")

	g.Ops = g.Ops[:2]
	gs, err := prepare(t.Context(), g, testMesh(t, "x=2"))
	require.NoError(t, err)
	require.Len(t, gs.nodes, 2)
	assert.Same(t, gs.nodes[0].rule, gs.nodes[1].rule)
	assert.Equal(t, gs.nodes[0].elems, gs.nodes[1].elems)
}
