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

// TestRuleCacheShares checks that equal ops share one rule and that a failing op is
// reported on its own each time.
func TestRuleCacheShares(t *testing.T) {
	var c ruleCache
	mk := func(name string) *Op {
		return &Op{Name: name, Kind: "einsum", Attrs: map[string]any{"equation": "ij,jk->ik"}}
	}
	in, out := [][]int64{{4, 8}, {8, 2}}, [][]int64{{4, 2}}
	r1, _, err := c.build(mk("a"), "ops[0]", in, out)
	require.NoError(t, err)
	r2, _, err := c.build(mk("b"), "ops[1]", in, out)
	require.NoError(t, err)
	assert.Same(t, r1, r2)

	bad := [][]int64{{4, 8}, {9, 2}}
	_, _, err1 := c.build(mk("c"), "ops[2]", bad, out)
	_, _, err2 := c.build(mk("d"), "ops[3]", bad, out)
	require.Error(t, err1)
	require.Error(t, err2)
	assert.Contains(t, err1.Error(), "ops[2]")
	assert.Contains(t, err2.Error(), "ops[3]")
}
