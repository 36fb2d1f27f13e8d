package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

func mustSharding(t *testing.T, m *sharding.Mesh, text string, rank int) *sharding.Sharding {
	t.Helper()
	s, err := sharding.ParseText(text, m, []int64{8, 4}[:rank], "s")
	require.NoError(t, err)
	require.Len(t, s.Dims, rank)
	return &s
}

// TestMemoryTimeline checks the timeline of a three-op program against sizes computed
// by hand. On x=2 every tensor is f32[8,4] split in two: a 4x4 f32 tile of 64 bytes.
//
//	op   live tensors                        live  transient  total
//	b    a (argument), b                      128          0    128
//	c    a, b (last use), c                   192          0    192
//	d    a, c (last use), d (result)          192         64    256
//
// d's reshard of c from [{x}, {}] to [{}, {x}] is one all_to_all whose largest buffer
// is a 64-byte tile.
func TestMemoryTimeline(t *testing.T) {
	m, err := sharding.ParseMeshString("x=2", "mesh")
	require.NoError(t, err)
	rows := func(text string) *propagation.Tensor {
		return &propagation.Tensor{Shape: []int64{8, 4}, ElemBits: 32, Sharding: mustSharding(t, m, text, 2)}
	}
	g := &propagation.Graph{
		Tensors: map[string]*propagation.Tensor{
			"a": rows(`[{"x"}, {}]`), "b": rows(`[{"x"}, {}]`), "c": rows(`[{"x"}, {}]`), "d": rows(`[{}, {"x"}]`),
		},
		Ops: []propagation.Op{
			{Name: "b", Kind: "add", Operands: []string{"a", "a"}, Results: []string{"b"}},
			{Name: "c", Kind: "add", Operands: []string{"b", "b"}, Results: []string{"c"}},
			{Name: "d", Kind: "sharding_constraint", Operands: []string{"c"}, Results: []string{"d"}},
		},
		Inputs: []string{"a"}, Outputs: []string{"d"},
	}
	model, _ := cost.Profile("tpu-v5p")
	res, err := Run(t.Context(), &Request{Graph: g, Mesh: m, Options: propagation.DefaultOptions(), Strategy: planner.XLA, Model: model, BudgetBytes: 200,
		Locate: func(op string) Location { return Location{File: "p.py", Line: len(op), OpName: "jit(f)/" + op} }})
	require.NoError(t, err)
	mem := res.Memory
	want := []MemoryPoint{{"b", 0, 128, 0}, {"c", 1, 192, 0}, {"d", 2, 192, 64}}
	assert.Equal(t, want, mem.Timeline)
	assert.Equal(t, int64(256), mem.PeakBytesPerDevice)
	assert.Equal(t, "d", mem.PeakOp)
	assert.Equal(t, int64(128), mem.HeldBytes)
	assert.Equal(t, []string{"d"}, mem.OverBudget)

	// Without inputs and outputs, the arguments are the tensors no op defines (a) and the
	// results those no op uses (d): the same timeline.
	g.Inputs, g.Outputs = nil, nil
	res2, err := Run(t.Context(), &Request{Graph: g, Mesh: m, Options: propagation.DefaultOptions(), Strategy: planner.XLA, Model: model})
	require.NoError(t, err)
	assert.Equal(t, want, res2.Memory.Timeline)
	assert.Equal(t, int64(128), res2.Memory.HeldBytes)
	assert.Empty(t, res2.Memory.OverBudget)

	require.Len(t, res.Sites, 1)
	s := res.Sites[0]
	assert.Equal(t, graphplan.KindReshard, s.Kind)
	assert.Equal(t, "d", s.Op)
	assert.Equal(t, 2, s.OpIndex)
	assert.Equal(t, Location{File: "p.py", Line: 1, OpName: "jit(f)/d"}, s.Location)
	assert.False(t, s.XLARemat())
	assert.InDelta(t, s.Plan.Summary.TimeUS, res.Totals.TimeUS, 1e-9)
	assert.InDelta(t, 1.0, res.Totals.Top10Share, 1e-9)
}

// TestProgramOrder: ops listed out of order run after the ops defining their operands;
// ops already in order keep it.
func TestProgramOrder(t *testing.T) {
	g := &propagation.Graph{Ops: []propagation.Op{
		{Name: "late", Operands: []string{"t1"}, Results: []string{"t2"}},
		{Name: "first", Operands: []string{"in"}, Results: []string{"t1"}},
		{Name: "free", Operands: []string{"in"}, Results: []string{"t3"}},
	}}
	order, idx := programOrder(g)
	assert.Equal(t, []int{1, 0, 2}, order)
	assert.Equal(t, map[string]int{"first": 0, "late": 1, "free": 2}, idx)
}
