package propagation

import (
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRuleTable(t *testing.T) {
	tests := []struct {
		name  string
		op    Op
		in    [][]int64
		out   [][]int64
		want  string
		class opClass
	}{
		{"add", Op{Kind: "add"}, [][]int64{{4, 8}, {4, 8}}, [][]int64{{4, 8}}, "([i, j], [i, j])->([i, j]) {i=4, j=8}", classElementwise},
		{"tanh", Op{Kind: "tanh"}, [][]int64{{4, 8}}, [][]int64{{4, 8}}, "([i, j])->([i, j]) {i=4, j=8}", classElementwise},
		{"compare", Op{Kind: "compare"}, [][]int64{{3}, {3}}, [][]int64{{3}}, "([i], [i])->([i]) {i=3}", classElementwise},
		{"select scalar pred", Op{Kind: "select"}, [][]int64{{}, {4, 8}, {4, 8}}, [][]int64{{4, 8}}, "([], [i, j], [i, j])->([i, j]) {i=4, j=8}", classElementwise},
		{"clamp scalar bounds", Op{Kind: "clamp"}, [][]int64{{}, {4}, {}}, [][]int64{{4}}, "([], [i], [])->([i]) {i=4}", classElementwise},
		{"sharding_constraint", Op{Kind: "sharding_constraint"}, [][]int64{{4}}, [][]int64{{4}}, "([i])->([i]) {i=4}", classElementwise},
		{"dot_general matmul", Op{Kind: "dot_general", Attrs: matmul()}, [][]int64{{8, 16}, {16, 32}}, [][]int64{{8, 32}},
			"([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}", classOther},
		{"dot_general batch", Op{Kind: "dot_general", Attrs: map[string]any{
			"lhs_batching_dimensions": []int{0}, "rhs_batching_dimensions": []int{0},
			"lhs_contracting_dimensions": []int{2}, "rhs_contracting_dimensions": []int{1}}},
			[][]int64{{4, 8, 16}, {4, 16, 32}}, [][]int64{{4, 8, 32}},
			"([i, j, l], [i, l, k])->([i, j, k]) {i=4, j=8, k=32, l=16} reduction={l}", classOther},
		{"dot vector-matrix", Op{Kind: "dot"}, [][]int64{{16}, {16, 32}}, [][]int64{{32}}, "([j], [j, i])->([i]) {i=32, j=16} reduction={j}", classOther},
		{"dot vector-vector", Op{Kind: "dot"}, [][]int64{{16}, {16}}, [][]int64{{}}, "([i], [i])->([]) {i=16} reduction={i}", classOther},
		{"einsum batched matmul", Op{Kind: "einsum", Attrs: map[string]any{"equation": "bij,bjk->bik"}},
			[][]int64{{2, 3, 4}, {2, 4, 5}}, [][]int64{{2, 3, 5}}, "([i, j, l], [i, l, k])->([i, j, k]) {i=2, j=3, k=5, l=4} reduction={l}", classOther},
		{"transpose", Op{Kind: "transpose", Attrs: map[string]any{"permutation": []int{3, 1, 0, 2}}},
			[][]int64{{256, 32, 64, 100}}, [][]int64{{100, 32, 256, 64}}, "([k, j, l, i])->([i, j, k, l]) {i=100, j=32, k=256, l=64}", classPassThrough},
		{"broadcast_in_dim", Op{Kind: "broadcast_in_dim", Attrs: map[string]any{"broadcast_dimensions": []int{0, 2, 1, 3, 4}}},
			[][]int64{{2, 3, 5, 1, 7}}, [][]int64{{2, 5, 3, 11, 7, 13}}, "([i, k, j, l, n])->([i, j, k, m, n, o]) {i=2, j=5, k=3, l=1, m=11, n=7, o=13}", classBroadcast},
		{"reduce with init", Op{Kind: "reduce", Attrs: map[string]any{"dimensions": []int{1}}},
			[][]int64{{2, 64, 13}, {}}, [][]int64{{2, 13}}, "([i, j, k], [])->([i, k]) {i=2, j=64, k=13} reduction={j}", classOther},
		{"reduce two inputs", Op{Kind: "reduce", Attrs: map[string]any{"dimensions": []int{0}}},
			[][]int64{{4, 8}, {4, 8}, {}, {}}, [][]int64{{8}, {8}}, "([i, j], [i, j], [], [])->([j], [j]) {i=4, j=8} reduction={i}", classOther},
		{"concatenate", Op{Kind: "concatenate", Attrs: map[string]any{"dimension": 0}},
			[][]int64{{4, 3}, {4, 3}}, [][]int64{{8, 3}}, "([i, j], [i, j])->([i, j]) {i=8, j=3} need_replication={i}", classOther},
		{"slice", Op{Kind: "slice", Attrs: map[string]any{"start_indices": []int{0, 0, 0}, "limit_indices": []int{32, 1, 8}, "strides": []int{1, 1, 4}}},
			[][]int64{{32, 4, 8}}, [][]int64{{32, 1, 2}}, "([i, j, k])->([i, j, k]) {i=32, j=4, k=8} permutation={j, k}", classOther},
		{"dynamic_slice", Op{Kind: "dynamic_slice", Attrs: map[string]any{"slice_sizes": []int{32, 1, 8}}},
			[][]int64{{32, 4, 8}, {}, {}, {}}, [][]int64{{32, 1, 8}}, "([i, j, k], [], [], [])->([i, j, k]) {i=32, j=4, k=8} need_replication={j} blocked_propagation={j}", classDynSlice},
		{"pad", Op{Kind: "pad", Attrs: map[string]any{"edge_padding_low": []int{1, 0, 0}, "edge_padding_high": []int{1, -2, 0}}},
			[][]int64{{28, 28, 16}, {}}, [][]int64{{30, 26, 16}}, "([i, j, k], [])->([i, j, k]) {i=28, j=28, k=16} permutation={i, j}", classOther},
		{"reverse", Op{Kind: "reverse", Attrs: map[string]any{"dimensions": []int{1}}},
			[][]int64{{4, 8}}, [][]int64{{4, 8}}, "([i, j])->([i, j]) {i=4, j=8} permutation={j}", classOther},
		{"gather", Op{Kind: "gather", Attrs: map[string]any{"offset_dims": []int{2, 3, 4}, "collapsed_slice_dims": []int{0},
			"start_index_map": []int{0, 1, 3}, "index_vector_dim": 2, "slice_sizes": []int{1, 2, 2, 1}}},
			[][]int64{{3, 4, 2, 5}, {2, 3, 3}}, [][]int64{{2, 3, 2, 2, 1}},
			"([o, k, l, m], [i, j, p])->([i, j, k, l, n]) {i=2, j=3, k=4, l=2, m=5, n=1, o=3, p=3} reduction={m, o} need_replication={k, n, p} blocked_propagation={k}", classOther},
		{"scatter", Op{Kind: "scatter", Attrs: map[string]any{"scatter_dimension_numbers": map[string]any{
			"update_window_dims": []int{2, 3}, "inserted_window_dims": []int{0}, "scatter_dims_to_operand_dims": []int{0, 1}, "index_vector_dim": 2}}},
			[][]int64{{3, 4, 5}, {2, 3, 2}, {2, 3, 2, 5}}, [][]int64{{3, 4, 5}},
			"([i, j, k], [l, m, o], [l, m, n, k])->([i, j, k]) {i=3, j=4, k=5, l=2, m=3, n=2, o=2} reduction={l, m} need_replication={j, n, o}", classOther},
		{"convolution", Op{Kind: "convolution", Attrs: map[string]any{
			"dimension_numbers": map[string]any{
				"input_batch_dimension": 0, "input_feature_dimension": 3, "input_spatial_dimensions": []int{1, 2},
				"kernel_input_feature_dimension": 2, "kernel_output_feature_dimension": 3, "kernel_spatial_dimensions": []int{0, 1},
				"output_batch_dimension": 0, "output_feature_dimension": 3, "output_spatial_dimensions": []int{1, 2}},
			"window_strides": []int{2, 2}, "padding": []any{[]any{0, 1}, []any{0, 1}}}},
			[][]int64{{2, 224, 224, 192}, {3, 3, 192, 64}}, [][]int64{{2, 112, 112, 64}},
			"([i, lm, no, k], [m, o, k, j])->([i, l, n, j]) {i=2, j=64, k=192, l=112, m=3, n=112, o=3} reduction={k, m, o} permutation={l, n}", classOther},
		{"custom", Op{Kind: "custom", Rule: "([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}"},
			[][]int64{{8, 16}, {16, 32}}, [][]int64{{8, 32}}, "([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k} custom", classOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.op
			op.Name = "op"
			r, class, err := buildRule(&op, "ops[0]", tc.in, tc.out)
			require.NoError(t, err)
			require.NotNil(t, r)
			assert.Equal(t, tc.want, r.String())
			assert.Equal(t, tc.class, class)
		})
	}
}

func TestReshapeRule(t *testing.T) {
	tests := []struct {
		name    string
		in, out []int64
		want    string
	}{
		{"merge", shape(2, 4), shape(8), "([i, j])->([ij]) {i=2, j=4}"},
		{"split", shape(8), shape(2, 4), "([ij])->([i, j]) {i=2, j=4}"},
		{"merge leading dims", shape(2, 4, 32), shape(8, 32), "([i, j, k])->([ij, k]) {i=2, j=4, k=32}"},
		{"mixed split and merge", shape(8, 4, 5), shape(2, 16, 5), "([ij, k, l])->([i, jk, l]) {i=2, j=4, k=4, l=5}"},
		{"seed 004 8x4 to 2x16", shape(8, 4), shape(2, 16), "([ij, k])->([i, jk]) {i=2, j=4, k=4}"},
		{"6x4 to 4x6", shape(6, 4), shape(4, 6), "([ij, mn])->([ik, ln]) {i=2, j=3, k=2, l=3, m=2, n=2}"},
		{"no shared factor", shape(3, 2), shape(2, 3), "([i, l])->([j, k]) {i=3, j=2, k=3, l=2}"},
		{"size-1 dims", shape(1, 8), shape(8, 1), "([i, j])->([j, k]) {i=1, j=8, k=1}"},
		{"identity", shape(4, 5), shape(4, 5), "([i, j])->([i, j]) {i=4, j=5}"},
		{"scalar to ones", shape(), shape(1, 1), "([])->([i, j]) {i=1, j=1}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := reshapeRule(tc.in, tc.out)
			assert.Equal(t, tc.want, r.String())
			require.NoError(t, r.checkShapes([][]int64{tc.in}, [][]int64{tc.out}, "rule"))
		})
	}
}

func TestRuleErrors(t *testing.T) {
	tests := []struct {
		name      string
		op        Op
		in, out   [][]int64
		field     string
		msgSubstr string
	}{
		{"unknown op", Op{Kind: "frobnicate"}, nil, [][]int64{{1}}, "ops[0].op", "supported ops: abs, add"},
		{"contracting sizes differ", Op{Kind: "dot_general", Attrs: matmul()}, [][]int64{{8, 16}, {12, 32}}, [][]int64{{8, 32}},
			"ops[0].attrs.rhs_contracting_dimensions[0]", "contracting sizes differ"},
		{"bad permutation", Op{Kind: "transpose", Attrs: map[string]any{"permutation": []int{0, 0}}}, [][]int64{{2, 3}}, [][]int64{{2, 3}},
			"ops[0].attrs.permutation[1]", "listed twice"},
		{"permutation out of range", Op{Kind: "transpose", Attrs: map[string]any{"permutation": []int{0, 2}}}, [][]int64{{2, 3}}, [][]int64{{2, 3}},
			"ops[0].attrs.permutation[1]", "out of range"},
		{"broadcast dim out of range", Op{Kind: "broadcast_in_dim", Attrs: map[string]any{"broadcast_dimensions": []int{3}}}, [][]int64{{2}}, [][]int64{{2, 3}},
			"ops[0].attrs.broadcast_dimensions[0]", "out of range"},
		{"reshape count", Op{Kind: "reshape"}, [][]int64{{2, 3}}, [][]int64{{7}}, "ops[0].results[0]", "changes the element count"},
		{"elementwise shapes", Op{Kind: "add"}, [][]int64{{2, 3}, {3, 2}}, [][]int64{{2, 3}}, "ops[0].operands[1]", "differs"},
		{"reduce dims", Op{Kind: "reduce", Attrs: map[string]any{"dimensions": []int{5}}}, [][]int64{{2, 3}}, [][]int64{{2}}, "ops[0].attrs.dimensions[0]", "out of range"},
		{"einsum sizes", Op{Kind: "einsum", Attrs: map[string]any{"equation": "ij,jk->ik"}}, [][]int64{{2, 3}, {4, 5}}, [][]int64{{2, 5}}, "ops[0].attrs.equation", "index"},
		{"custom shape", Op{Kind: "custom", Rule: "([i])->([i]) {i=4}"}, [][]int64{{8}}, [][]int64{{8}}, "ops[0].rule", "multiply to 4"},
		{"slice bounds", Op{Kind: "slice", Attrs: map[string]any{"start_indices": []int{0}, "limit_indices": []int{9}}}, [][]int64{{8}}, [][]int64{{9}}, "ops[0].attrs.limit_indices[0]", "limit"},
		{"concat sizes", Op{Kind: "concatenate", Attrs: map[string]any{"dimension": 0}}, [][]int64{{2}, {3}}, [][]int64{{6}}, "ops[0].attrs.dimension", "add up to 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.op
			op.Name = "bad"
			_, _, err := buildRule(&op, "ops[0]", tc.in, tc.out)
			require.Error(t, err)
			var fe *sharding.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
			assert.Contains(t, fe.Message, tc.msgSubstr)
			if tc.op.Kind != "frobnicate" && tc.op.Kind != "einsum" && tc.op.Kind != "custom" {
				assert.Contains(t, fe.Message, `op "bad"`)
			}
		})
	}
}

func TestParseRule(t *testing.T) {
	tests := []struct {
		name, in, want, errSub string
	}{
		{"matmul", "([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}", "([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k} custom", ""},
		{"compound and types", "([ij])->([i, j]) {i=2, j=4} need_replication={i} permutation={j} blocked_propagation={i}",
			"([ij])->([i, j]) {i=2, j=4} need_replication={i} permutation={j} blocked_propagation={i} custom", ""},
		{"scalar and z_1", "([z_1], [])->([z_1]) {z_1=3}", "([i], [])->([i]) {i=3} custom", ""},
		{"undeclared", "([i])->([j]) {i=2}", "", "not declared"},
		{"twice in tensor", "([i, i])->([i]) {i=2}", "", "appears twice"},
		{"two types", "([i])->([]) {i=2} reduction={i} need_replication={i}", "", "one type"},
		{"missing arrow", "([i]) ([i]) {i=2}", "", "->"},
		{"bad size", "([i])->([i]) {i=0}", "", "size"},
		{"trailing junk", "([i])->([i]) {i=2} hello", "", "expected"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRule(tc.in, "ops[0].rule")
			if tc.errSub != "" {
				var fe *sharding.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, "ops[0].rule", fe.Field)
				assert.Contains(t, fe.Message, tc.errSub)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, r.String())
		})
	}
}

func TestParseEinsum(t *testing.T) {
	e, err := ParseEinsum("bij, bjk -> bik", "eq")
	require.NoError(t, err)
	assert.Equal(t, Einsum{Operands: []string{"bij", "bjk"}, Result: "bik"}, e)
	e, err = ParseEinsum("ij,jk", "eq")
	require.NoError(t, err)
	assert.Equal(t, "ik", e.Result)
	for _, bad := range []string{"", "ii->i", "ij->k", "a...b->ab", "i1->i", "ij->i->j"} {
		_, err := ParseEinsum(bad, "eq")
		var fe *sharding.FieldError
		assert.ErrorAs(t, err, &fe, bad)
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}",
		"([ij])->([i, j]) {i=2, j=4} need_replication={i} blocked_propagation={j} custom",
		"([z_1], [])->([z_1]) {z_1=3}", "()->() {}", "([i", "{i=99999999999999999999}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s, "rule")
		if err != nil {
			var fe *sharding.FieldError
			if !assertAs(err, &fe) || fe.Field != "rule" {
				t.Fatalf("error %v (%T) is not a field error on rule", err, err)
			}
			return
		}
		// A parsed rule prints to a rule that parses to the same print.
		r2, err := ParseRule(r.String(), "rule")
		if err != nil {
			t.Fatalf("reparse of %q: %v", r.String(), err)
		}
		if r.String() != r2.String() {
			t.Fatalf("round trip: %q != %q", r.String(), r2.String())
		}
	})
}

func FuzzParseEinsum(f *testing.F) {
	for _, s := range []string{"bij,bjk->bik", "ij,jk", "bshk,bthk->bhst", "a...->a", "->", "ii"} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, s string, n uint8) {
		e, err := ParseEinsum(s, "eq")
		if err != nil {
			var fe *sharding.FieldError
			if !assertAs(err, &fe) {
				t.Fatalf("error %v is not a field error", err)
			}
			return
		}
		// Build shapes where every index has size n%5+1 and check the rule fits them.
		size := int64(n%5 + 1)
		in := make([][]int64, len(e.Operands))
		for i, term := range e.Operands {
			for range len(term) {
				in[i] = append(in[i], size)
			}
		}
		out := make([]int64, len(e.Result))
		for i := range out {
			out[i] = size
		}
		r, err := e.rule(in, out, "eq")
		if err != nil {
			t.Fatalf("rule for %q: %v", s, err)
		}
		if err := r.checkShapes(in, [][]int64{out}, "eq"); err != nil {
			t.Fatalf("rule %s does not fit: %v", r, err)
		}
	})
}

func assertAs(err error, fe **sharding.FieldError) bool {
	es, ok := sharding.AsFieldErrors(err)
	if !ok || len(es) == 0 {
		return false
	}
	*fe = es[0]
	return true
}
