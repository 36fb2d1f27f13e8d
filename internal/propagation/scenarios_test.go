package propagation

import (
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reductionsOf(r *Result) []string {
	var out []string
	for _, red := range r.Reductions {
		s := red.Op + ":" + red.Tensor + ":" + red.Kind + ":" + axesText(red.Axes)
		if red.Kind == ReduceScatter {
			s += ":dim" + string(rune('0'+red.Dim))
		}
		out = append(out, s)
	}
	return out
}

func reshardsOf(r *Result) []string {
	var out []string
	for _, rs := range r.Reshards {
		out = append(out, rs.Op+":"+rs.Tensor+":"+rs.From.Body()+"->"+rs.To.Body())
	}
	return out
}

// TestSeed004FactorTable is the factor table of seed 004 / PROPAGATION.md: F0 gets
// ["a","b"], F1 gets ["c"], F2 nothing; explicitly replicated axes stay put.
func TestSeed004FactorTable(t *testing.T) {
	for _, strategy := range []string{Basic, Aggressive} {
		t.Run(strategy, func(t *testing.T) {
			b := newBuilder(t, "a=2,b=2,c=2,d=2,e=2,f=2,g=2")
			b.tensor("T0", shape(64, 64, 64), `[{"a", ?}, {?}, {?}], replicated={"f"}`).
				tensor("T1", shape(64, 64, 64), `[{"a", "b", ?}, {"c", "d", ?}, {?}], replicated={"g"}`).
				tensor("T2", shape(64, 64, 64), `[{?}, {"c", "e", ?}, {?}]`).
				custom("op", "([i, j, k], [i, j, k])->([i, j, k]) {i=64, j=64, k=64}", s("T0", "T1"), s("T2"))
			r := b.run(Options{ConflictResolution: strategy})
			assert.Equal(t, map[string]string{
				"T0": `[{"a", "b", ?}, {"c", ?}, {?}], replicated={"f"}`,
				"T1": `[{"a", "b", ?}, {"c", "d", ?}, {?}], replicated={"g"}`,
				"T2": `[{"a", "b", ?}, {"c", "e", ?}, {?}]`,
			}, bodies(r, "T0", "T1", "T2"))
			assert.Equal(t, []string{"T0", "T2"}, r.Refined)
		})
	}
}

func mlp(t *testing.T) *builder {
	b := newBuilder(t, "data=2,model=4")
	contract0 := map[string]any{"lhs_contracting_dimensions": []int{0}, "rhs_contracting_dimensions": []int{0}}
	contract1 := map[string]any{"lhs_contracting_dimensions": []int{1}, "rhs_contracting_dimensions": []int{1}}
	b.tensor("x", shape(8, 16), `[{"data"}, {}]`).
		tensor("w1", shape(16, 32), `[{}, {"model"}]`).
		tensor("w2", shape(32, 16), `[{"model"}, {}]`).
		tensor("h", shape(8, 32), "").tensor("a", shape(8, 32), "").tensor("y", shape(8, 16), "").
		tensor("dy", shape(8, 16), "").tensor("da", shape(8, 32), "").tensor("dh", shape(8, 32), "").
		tensor("dw1", shape(16, 32), "").tensor("dw2", shape(32, 16), "").tensor("dx", shape(8, 16), "").
		// forward
		op("mm1", "dot_general", s("x", "w1"), s("h"), matmul()).
		op("act", "tanh", s("h"), s("a"), nil).
		op("mm2", "dot_general", s("a", "w2"), s("y"), matmul()).
		// backward
		op("mm2_da", "dot_general", s("dy", "w2"), s("da"), contract1).
		op("act_bwd", "multiply", s("da", "a"), s("dh"), nil).
		op("mm2_dw", "dot_general", s("a", "dy"), s("dw2"), contract0).
		op("mm1_dw", "dot_general", s("x", "dh"), s("dw1"), contract0).
		op("mm1_dx", "dot_general", s("dh", "w1"), s("dx"), contract1)
	return b
}

func TestMLPForwardBackward(t *testing.T) {
	for _, opts := range []Options{DefaultOptions(), {ConflictResolution: Basic, OpPriority: true}, {ConflictResolution: Aggressive}} {
		t.Run(opts.ConflictResolution, func(t *testing.T) {
			r := mlp(t).run(opts)
			assert.Equal(t, map[string]string{
				"h":   `[{"data", ?}, {"model", ?}]`,
				"a":   `[{"data", ?}, {"model", ?}]`,
				"y":   `[{"data", ?}, {?}]`,
				"dy":  `[{"data", ?}, {?}]`,
				"da":  `[{"data", ?}, {"model", ?}]`,
				"dh":  `[{"data", ?}, {"model", ?}]`,
				"dw1": `[{?}, {"model", ?}]`,
				"dw2": `[{"model", ?}, {?}]`,
				"dx":  `[{"data", ?}, {?}]`,
			}, bodies(r, "h", "a", "y", "dy", "da", "dh", "dw1", "dw2", "dx"))
			// Tensor parallelism: the second matmul and the input gradient sum over
			// "model"; data parallelism: the weight gradients sum over "data".
			assert.Equal(t, []string{
				"mm2:y:all_reduce:model",
				"mm2_dw:dw2:all_reduce:data",
				"mm1_dw:dw1:all_reduce:data",
				"mm1_dx:dx:all_reduce:model",
			}, reductionsOf(r))
			assert.Empty(t, r.Reshards)
			assert.Contains(t, r.Explain["h"], Origin{Dim: 1, Axes: []sharding.AxisRef{{Name: "model", Pre: 1, Size: 4, Of: 4}}, From: "w1 dim 1 through mm1 (factor j)"})
			assert.Contains(t, r.Explain["h"], Origin{Dim: 0, Axes: []sharding.AxisRef{{Name: "data", Pre: 1, Size: 2, Of: 2}}, From: "x dim 0 through mm1 (factor i)"})
			mm2 := r.Ops[2]
			require.Equal(t, "mm2", mm2.Op)
			assert.Equal(t, "k", mm2.Factors[2].Factor)
			assert.Equal(t, "model", axesText(mm2.Factors[2].Axes))
		})
	}
}

func TestAttentionEinsum(t *testing.T) {
	b := newBuilder(t, "data=2,model=4")
	eq := func(e string) map[string]any { return map[string]any{"equation": e} }
	b.tensor("x", shape(4, 16, 64), `[{"data"}, {}, {}]`).
		tensor("wq", shape(64, 8, 8), `[{}, {"model"}, {}]`).
		tensor("wk", shape(64, 8, 8), `[{}, {"model"}, {}]`).
		tensor("wv", shape(64, 8, 8), `[{}, {"model"}, {}]`).
		tensor("wo", shape(8, 8, 64), `[{"model"}, {}, {}]`).
		tensor("q", shape(4, 16, 8, 8), "").tensor("k", shape(4, 16, 8, 8), "").tensor("v", shape(4, 16, 8, 8), "").
		tensor("scores", shape(4, 8, 16, 16), "").tensor("probs", shape(4, 8, 16, 16), "").
		tensor("ctx", shape(4, 16, 8, 8), "").tensor("out", shape(4, 16, 64), "").
		op("q_proj", "einsum", s("x", "wq"), s("q"), eq("bsd,dhk->bshk")).
		op("k_proj", "einsum", s("x", "wk"), s("k"), eq("bsd,dhk->bshk")).
		op("v_proj", "einsum", s("x", "wv"), s("v"), eq("bsd,dhk->bshk")).
		op("qk", "einsum", s("q", "k"), s("scores"), eq("bshk,bthk->bhst")).
		op("softmax", "exponential", s("scores"), s("probs"), nil).
		op("pv", "einsum", s("probs", "v"), s("ctx"), eq("bhst,bthk->bshk")).
		op("o_proj", "einsum", s("ctx", "wo"), s("out"), eq("bshk,hkd->bsd"))
	r := b.run(DefaultOptions())
	assert.Equal(t, map[string]string{
		"q":      `[{"data", ?}, {?}, {"model", ?}, {?}]`,
		"k":      `[{"data", ?}, {?}, {"model", ?}, {?}]`,
		"v":      `[{"data", ?}, {?}, {"model", ?}, {?}]`,
		"scores": `[{"data", ?}, {"model", ?}, {?}, {?}]`,
		"probs":  `[{"data", ?}, {"model", ?}, {?}, {?}]`,
		"ctx":    `[{"data", ?}, {?}, {"model", ?}, {?}]`,
		"out":    `[{"data", ?}, {?}, {?}]`,
	}, bodies(r, "q", "k", "v", "scores", "probs", "ctx", "out"))
	assert.Equal(t, []string{"o_proj:out:all_reduce:model"}, reductionsOf(r))
	assert.Empty(t, r.Reshards)
}

func TestReshapeSubAxes(t *testing.T) {
	t.Run("split into sub-axes (seed 001)", func(t *testing.T) {
		b := newBuilder(t, "x=4")
		b.tensor("in", shape(8), `[{"x"}]`).tensor("out", shape(2, 4), "").
			op("r", "reshape", s("in"), s("out"), nil)
		r := b.run(DefaultOptions())
		assert.Equal(t, `[{"x":(1)2, ?}, {"x":(2)2, ?}]`, r.Shardings["out"].Body())
		assert.Empty(t, r.Reshards)
	})
	t.Run("split backwards merges", func(t *testing.T) {
		b := newBuilder(t, "x=4")
		b.tensor("in", shape(8), "").tensor("out", shape(2, 4), `[{"x":(1)2}, {"x":(2)2}]`).
			op("r", "reshape", s("in"), s("out"), nil)
		r := b.run(DefaultOptions())
		assert.Equal(t, `[{"x", ?}]`, r.Shardings["in"].Body())
	})
	t.Run("merge", func(t *testing.T) {
		b := newBuilder(t, "x=2,y=2")
		b.tensor("in", shape(2, 4), `[{"x"}, {"y"}]`).tensor("out", shape(8), "").
			op("r", "reshape", s("in"), s("out"), nil)
		r := b.run(DefaultOptions())
		assert.Equal(t, `[{"x", "y", ?}]`, r.Shardings["out"].Body())
	})
	t.Run("minor dim alone would be strided", func(t *testing.T) {
		b := newBuilder(t, "x=2,y=2")
		b.tensor("in", shape(8, 4), `[{}, {"y"}]`).tensor("out", shape(32), "").
			op("r", "reshape", s("in"), s("out"), nil)
		r := b.run(DefaultOptions())
		assert.Equal(t, `[{?}]`, r.Shardings["out"].Body())
		assert.Equal(t, []string{`r:in:[{}, {"y"}]->[{}, {}]`}, reshardsOf(r))
	})
	t.Run("seed 004 8x4 to 2x16", func(t *testing.T) {
		// ([ij, k])->([i, jk]) {i=2, j=4, k=4}: j is only half sharded by x:(2)2, so
		// appending y (factor k) to the result's dim 1 would need a strided view.
		b := newBuilder(t, "x=4,y=2")
		b.tensor("in", shape(8, 4), `[{"x"}, {"y"}]`).tensor("out", shape(2, 16), "").
			op("r", "reshape", s("in"), s("out"), nil)
		r := b.run(DefaultOptions())
		assert.Equal(t, `[{"x":(1)2, ?}, {"x":(2)2, ?}]`, r.Shardings["out"].Body())
		assert.Equal(t, []string{`r:in:[{"x"}, {"y"}]->[{"x"}, {}]`}, reshardsOf(r))
	})
	t.Run("seed 004 8x4 to 2x16 fully sharded", func(t *testing.T) {
		b := newBuilder(t, "x=8,y=2")
		b.tensor("in", shape(8, 4), `[{"x"}, {"y"}]`).tensor("out", shape(2, 16), "").
			op("r", "reshape", s("in"), s("out"), nil)
		r := b.run(DefaultOptions())
		assert.Equal(t, `[{"x":(1)2, ?}, {"x":(2)4, "y", ?}]`, r.Shardings["out"].Body())
		assert.Empty(t, r.Reshards)
	})
}

func TestConflictByUserPriority(t *testing.T) {
	tests := []struct {
		name, x, y, want string
	}{
		{"x first", `[{"a"}p0, {}]`, `[{"b"}p1, {}]`, `[{"a", ?}, {?}]`},
		{"y first", `[{"a"}p1, {}]`, `[{"b"}p0, {}]`, `[{"b", ?}, {?}]`},
		{"no priorities: operand order", `[{"a"}, {}]`, `[{"b"}, {}]`, `[{?}, {?}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t, "a=2,b=2")
			b.tensor("x", shape(8, 8), tc.x).tensor("y", shape(8, 8), tc.y).tensor("z", shape(8, 8), "").
				op("add", "add", s("x", "y"), s("z"), nil)
			r := b.run(DefaultOptions())
			assert.Equal(t, tc.want, r.Shardings["z"].Body())
			// annotations are kept (priorities dropped)
			assert.Equal(t, []sharding.DimSharding{}, nonEmptyOpen(r.Shardings["x"]))
		})
	}
}

func nonEmptyOpen(s sharding.Sharding) []sharding.DimSharding {
	out := []sharding.DimSharding{}
	for _, d := range s.Dims {
		if d.Open {
			out = append(out, d)
		}
	}
	return out
}

// TestConflictByOpPriority: the dot result h is wanted on "a" by the dot (from x) and
// on "b" by the elementwise add (from c). With op priorities the elementwise op goes
// first and wins; without them the dot is visited first.
func TestConflictByOpPriority(t *testing.T) {
	build := func(t *testing.T) *builder {
		b := newBuilder(t, "a=2,b=2")
		return b.tensor("x", shape(8, 16), `[{"a"}, {}]`).tensor("w", shape(16, 8), `[{}, {}]`).
			tensor("c", shape(8, 8), `[{"b"}, {}]`).tensor("h", shape(8, 8), "").tensor("z", shape(8, 8), "").
			op("mm", "dot_general", s("x", "w"), s("h"), matmul()).
			op("add", "add", s("h", "c"), s("z"), nil)
	}
	r := build(t).run(Options{ConflictResolution: Aggressive, OpPriority: true})
	assert.Equal(t, `[{"b", ?}, {?}]`, r.Shardings["h"].Body())
	assert.Equal(t, []string{`mm:h:[{"a"}, {}]->[{"b"}, {}]`}, reshardsOf(r))
	r = build(t).run(Options{ConflictResolution: Aggressive, OpPriority: false})
	assert.Equal(t, `[{"a", ?}, {?}]`, r.Shardings["h"].Body())
}

// TestBasicVersusAggressive: a closed tensor blocks the axis for every tensor of the op
// under basic, but only for itself under aggressive.
func TestBasicVersusAggressive(t *testing.T) {
	build := func(t *testing.T) *builder {
		b := newBuilder(t, "a=2")
		return b.tensor("x", shape(8, 8), `[{"a", ?}, {?}]`).tensor("y", shape(8, 8), `[{}, {"a"}]`).
			tensor("z", shape(8, 8), "").
			op("add", "add", s("x", "y"), s("z"), nil)
	}
	r := build(t).run(Options{ConflictResolution: Basic, OpPriority: true})
	assert.Equal(t, `[{?}, {?}]`, r.Shardings["z"].Body())
	r = build(t).run(Options{ConflictResolution: Aggressive, OpPriority: true})
	assert.Equal(t, `[{"a", ?}, {?}]`, r.Shardings["z"].Body())
	assert.Equal(t, []string{`add:y:[{}, {"a"}]->[{"a"}, {}]`}, reshardsOf(r))
}

func TestClosedDimsKept(t *testing.T) {
	b := newBuilder(t, "a=2,b=2")
	b.tensor("x", shape(8, 8), `[{}, {?}]`).tensor("y", shape(8, 8), `[{"a"}, {"b"}]`).tensor("z", shape(8, 8), "").
		op("add", "add", s("x", "y"), s("z"), nil)
	r := b.run(DefaultOptions())
	assert.Equal(t, `[{}, {"b", ?}]`, r.Shardings["x"].Body())
	assert.Equal(t, `[{"a", ?}, {"b", ?}]`, r.Shardings["z"].Body())
	assert.Equal(t, []string{`add:x:[{}, {"b"}]->[{"a"}, {"b"}]`}, reshardsOf(r))
	assert.Equal(t, []string{"x"}, r.Refined)
}

func TestExplicitReplicationRespected(t *testing.T) {
	b := newBuilder(t, "a=2,b=2")
	b.tensor("x", shape(8, 8), `[{"a", "b"}, {}]`).tensor("y", shape(8, 8), `[{?}, {?}], replicated={"b"}`).
		op("neg", "negate", s("x"), s("y"), nil)
	r := b.run(DefaultOptions())
	assert.Equal(t, `[{"a", ?}, {?}], replicated={"b"}`, r.Shardings["y"].Body())
}

func TestDotReductions(t *testing.T) {
	// PROPAGATION.md (d).3, mesh x=4,y=2, lhs [{x},{y}], rhs [{y},{}].
	tests := []struct {
		name, result string
		reductions   []string
		reshards     []string
	}{
		{"all_reduce", `[{"x"}, {}]`, []string{"mm:out:all_reduce:y"}, nil},
		{"reduce_scatter", `[{"x"}, {"y"}]`, []string{"mm:out:reduce_scatter:y:dim1"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t, "x=4,y=2")
			b.tensor("lhs", shape(8, 8), `[{"x"}, {"y"}]`).tensor("rhs", shape(8, 8), `[{"y"}, {}]`).
				tensor("out", shape(8, 8), tc.result).
				op("mm", "dot_general", s("lhs", "rhs"), s("out"), matmul())
			r := b.run(DefaultOptions())
			assert.Equal(t, tc.reductions, reductionsOf(r))
			assert.Equal(t, tc.reshards, reshardsOf(r))
		})
	}
	t.Run("axis used twice reshards the lhs", func(t *testing.T) {
		b := newBuilder(t, "x=4,y=2")
		b.tensor("lhs", shape(8, 8), `[{"x"}, {"y"}]`).tensor("rhs", shape(8, 8), `[{}, {"y"}]`).
			tensor("out", shape(8, 8), `[{"x"}, {"y"}]`).
			op("mm", "dot_general", s("lhs", "rhs"), s("out"), matmul())
		r := b.run(DefaultOptions())
		assert.Equal(t, []string{`mm:lhs:[{"x"}, {"y"}]->[{"x"}, {}]`}, reshardsOf(r))
		assert.Empty(t, r.Reductions)
	})
}

func TestWhileLoop(t *testing.T) {
	b := newBuilder(t, "a=2,b=2")
	b.tensor("x", shape(8, 16), `[{"a"}, {?}]`).tensor("y", shape(8, 16), "").
		tensor("p", shape(8, 16), "").tensor("q", shape(8, 16), "").tensor("bias", shape(8, 16), `[{}, {"b"}]`).
		tensor("r", shape(8, 16), "").
		tensor("c", shape(8, 16), "").tensor("pred", shape(), "").
		tensor("out", shape(8, 16), "")
	b.g.Ops = append(b.g.Ops, Op{Name: "loop", Kind: "while", Operands: s("x"), Results: s("y"),
		Cond: &Region{Params: s("c"), Ops: []Op{{Name: "cst", Kind: "constant", Results: s("pred")}}, Returns: s("pred")},
		Body: &Region{Params: s("p"), Ops: []Op{
			{Name: "t", Kind: "tanh", Operands: s("p"), Results: s("q")},
			{Name: "badd", Kind: "add", Operands: s("q", "bias"), Results: s("r")},
		}, Returns: s("r")}},
		Op{Name: "after", Kind: "negate", Operands: s("y"), Results: s("out")})
	r := b.run(DefaultOptions())
	want := `[{"a", ?}, {"b", ?}]`
	for _, n := range []string{"y", "p", "q", "c", "out"} {
		assert.Equal(t, want, r.Shardings[n].Body(), n)
	}
	assert.Equal(t, `[{"a"}, {"b", ?}]`, r.Shardings["x"].Body())
	assert.Equal(t, []string{`badd:bias:[{}, {"b"}]->[{"a"}, {"b"}]`}, reshardsOf(r))
	assert.Equal(t, []string{"x"}, r.Refined)
}

func TestShardingConstraint(t *testing.T) {
	b := newBuilder(t, "a=2")
	b.tensor("u", shape(8, 8), "").tensor("v", shape(8, 8), "").tensor("x", shape(8, 8), "").
		tensor("z", shape(8, 8), `[{"a"}, {}]`).
		op("add", "add", s("u", "v"), s("x"), nil).
		op("c", "sharding_constraint", s("x"), s("z"), nil)
	r := b.run(DefaultOptions())
	assert.Equal(t, `[{"a"}, {}]`, r.Shardings["x"].Body())
	assert.Equal(t, `[{"a", ?}, {?}]`, r.Shardings["u"].Body())
	assert.Empty(t, r.Reshards)
}

func TestNonDivisibleMinorMost(t *testing.T) {
	b := newBuilder(t, "x=4")
	b.tensor("in", shape(6), `[{"x"}]`).tensor("out", shape(6), "").
		op("n", "negate", s("in"), s("out"), nil)
	r := b.run(DefaultOptions())
	assert.Equal(t, `[{"x", ?}]`, r.Shardings["out"].Body())
}

func TestProjection(t *testing.T) {
	m := testMesh(t, "x=4,y=2")
	sh, err := sharding.ParseText(`[{"x", "y"}]`, m, []int64{8}, "s")
	require.NoError(t, err)
	r := &Rule{FactorSizes: []int64{2, 4}, Types: make([]FactorType, 2), Blocked: make([]bool, 2), Operands: [][][]int{{{0, 1}}}}
	row := make([]factorSharding, 2)
	projectTensor(sh, r, r.Operands[0], row)
	assert.Equal(t, "x:(1)2", axesText(row[0].axes))
	assert.Equal(t, "x:(2)2,y", axesText(row[1].axes))
	// overflow: factor 3 cannot take a piece of x=4
	r.FactorSizes = []int64{3, 4}
	sh, err = sharding.ParseText(`[{"x"}]`, m, []int64{12}, "s")
	require.NoError(t, err)
	row = make([]factorSharding, 2)
	projectTensor(sh, r, r.Operands[0], row)
	assert.Empty(t, row[0].axes)
	assert.Equal(t, "x", axesText(row[0].overflow))
	assert.True(t, row[1].closed)
}
