package stablehlo_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/stablehlo"
)

// shardyCase is one function of a Shardy lit test: the CHECK lines of its annotated
// output (SSA captures written out) and text that must not appear.
type shardyCase struct {
	fn    string
	check []string
	not   []string
}

// TestShardyBasicPropagation posts functions of Shardy's basic_propagation.mlir lit
// test (testdata/shardy_basic_propagation.mlir) through the import, propagation with
// basic conflict resolution and no op priorities (-sdy-basic-propagate) and Annotate, and
// checks the output against the test's CHECK lines.
func TestShardyBasicPropagation(t *testing.T) {
	runShardy(t, "testdata/shardy_basic_propagation.mlir", propagation.Options{ConflictResolution: propagation.Basic}, []shardyCase{
		{"simple", []string{
			`%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a"}, {"b"}]>},`,
			`%arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a", ?}, {"b", ?}]>}, %arg2: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"b", ?}, {?}]>})`,
			`-> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a", ?}, {?}]>}) {`,
			`%0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"a", ?}, {"b", ?}]>]>}`,
			`%1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"a", ?}, {?}]>]>}`,
		}, nil},
		{"propagate_to_multi_result_op", []string{
			`stablehlo.reduce(%arg0 init: %0), (%arg1 init: %0) across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{?}, {"b", ?}]>, <@mesh_a_2_b_2, [{?}, {"b", ?}]>]>}`,
		}, nil},
		{"propagate_from_multi_result_op", []string{
			`%arg0: tensor<4x64x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{?}, {?}, {"b", ?}]>}, %arg1: tensor<4x64x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{?}, {?}, {"b", ?}]>})`,
			`-> (tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{?}, {"b", ?}]>}, tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{?}, {"b", ?}]>}) {`,
		}, nil},
		{"closed_dim", []string{
			`%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a"}, {}]>},`,
			`%arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{}, {"b"}]>})`,
			`{sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{}, {"b", ?}]>]>}`,
		}, nil},
		{"propagate_from_sharding_constraint", []string{
			`%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a", ?}, {?}]>})`,
			`-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a", ?}, {?}]>}) {`,
			`%0 = sdy.sharding_constraint %arg0 <@mesh_a_2_b_2, [{"a"}, {?}]>`,
			`%1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"a", ?}, {?}]>]>}`,
		}, nil},
		{"propagate_to_sharding_constraint", []string{
			`%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a"}, {}]>})`,
			`sdy.sharding_constraint %arg0 <@mesh_a_2_b_2, [{"a", ?}, {?}]>`,
		}, nil},
		{"multi_axes", []string{
			`%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"b", "a"}, {}]>},`,
			`%arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"b", "a", ?}, {}]>},`,
			`%arg2: tensor<8x16xf32>)`,
			`%0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"b", "a", ?}, {?}]>]>}`,
			`%1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"b", "a", ?}, {?}]>]>}`,
		}, nil},
		{"multi_axes_conflict", []string{
			`stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2_c_2, [{"b", ?}, {?}]>]>} : tensor<8x8xf32>`,
			`stablehlo.add %arg0, %arg2 : tensor<8x8xf32>`,
		}, nil},
		{"slice_then_concat", []string{
			`-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a", "b", ?}, {?}]>}) {`,
			`%0 = stablehlo.slice %arg0 [0:1, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"a", "b", ?}, {?}]>]>}`,
			`%1 = stablehlo.slice %arg0 [1:8, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"a", "b", ?}, {?}]>]>}`,
			`%2 = stablehlo.concatenate %1, %0, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"a", "b", ?}, {?}]>]>}`,
		}, nil},
		{"reshape_split_dim_twice", []string{
			`%0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_16_b_2, [{"a":(1)8, ?}, {"a":(8)2, ?}]>]>}`,
			`%1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_16_b_2, [{"a":(1)8, ?}, {"a":(8)2, ?}]>]>}`,
			`%2 = stablehlo.reshape %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_16_b_2, [{"a":(1)2, ?}, {"a":(2)4, ?}, {"a":(8)2, ?}]>]>}`,
		}, nil},
		{"reshape_split_and_merge_dims", []string{
			`stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_4_b_2_c_2, [{"c", ?}, {"a", "b", ?}]>]>}`,
		}, nil},
		{"reshape_size_zero_dim", []string{`%0 = stablehlo.reshape %arg0 : (tensor<8x0xf32>)`}, []string{`stablehlo.reshape %arg0 {sdy.sharding`}},
	})
}

// TestShardyAggressivePropagation: the same for aggressive_propagation.mlir
// (-sdy-aggressive-propagate="propagation-strategy=aggressive": aggressive conflict
// resolution, no op priorities).
func TestShardyAggressivePropagation(t *testing.T) {
	runShardy(t, "testdata/shardy_aggressive_propagation.mlir", propagation.Options{ConflictResolution: propagation.Aggressive}, []shardyCase{
		{"fake_conflict_between_two_non_contracting_dims", []string{
			`%arg0: tensor<256x512xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a", ?}, {?}]>},`,
			`%arg1: tensor<128x512xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a", ?}, {?}]>})`,
			`-> (tensor<256x128xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{?}, {"a", ?}]>}) {`,
			`{sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{?}, {"a", ?}]>]>}`,
		}, nil},
		{"fake_conflict_between_contracting_and_non_contracting_dims", []string{
			`-> (tensor<256x128xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2_c_2, [{"a", ?}, {"c", "b", ?}]>}) {`,
			`stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2_c_2, [{"a", ?}, {"c", "b", ?}]>]>}`,
		}, nil},
		{"fake_conflict_closed_dims", []string{
			`-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2_c_2, [{"a", ?}, {"b", "c", ?}]>}) {`,
			`stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2_c_2, [{"a", ?}, {"b", "c", ?}]>]>}`,
		}, nil},
		{"real_conflict_within_a_factor", []string{
			`-> tensor<8x8xf32> {`,
			`%0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>`,
		}, nil},
		{"real_and_fake_conflicts", []string{
			`-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2_c_2, [{?}, {"a", ?}]>}) {`,
			`stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2_c_2, [{?}, {"a", ?}]>]>}`,
		}, nil},
		{"empty_mesh_replaced_closed_dim_respected", []string{
			`%arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a", ?}, {}]>})`,
			`%0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"a", ?}, {"b", ?}]>]>}`,
		}, nil},
		{"real_conflict_across_factors_diff_tensors_size", []string{
			`stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2_c_2, [{?}, {"a", "c", ?}]>]>}`,
		}, nil},
		{"partial_conflict_across_factors", []string{
			`%arg1: tensor<2x4x16xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2_c_2, [{"a", "b", ?}, {?}, {?}]>})`,
			`{sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2_c_2, [{"a", "b"}, {}, {}]>]>}`,
		}, nil},
		{"multiple_conflicts_across_factors", []string{
			`%arg0: tensor<2x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2_c_2_d_2, [{"d", ?}, {"a", "b"}, {?}]>},`,
			`%arg1: tensor<2x4x16xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2_c_2_d_2, [{?}, {"d", "c"}, {"b", "a"}]>})`,
			`{sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2_c_2_d_2, [{"d"}, {?}, {"b", "a", ?}]>]>}`,
		}, nil},
	})
}

// TestShardyOpPriorityPropagation: the same for op_priority_propagation.mlir
// (-sdy-op-priority-propagate: aggressive conflict resolution with the op-priority
// schedule, DefaultOptions).
func TestShardyOpPriorityPropagation(t *testing.T) {
	runShardy(t, "testdata/shardy_op_priority_propagation.mlir", propagation.DefaultOptions(), []shardyCase{
		{"element_wise_over_dot_general", []string{
			`%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", ?}]>})`,
			`%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>}`,
			`%1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>} : tensor<8x8xf32>`,
			`%2 = stablehlo.add %1, %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>} : tensor<8x8xf32>`,
		}, nil},
		{"element_wise_over_dot_general_flipped_op_order", []string{
			`%0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>} : tensor<8x8xf32>`,
			`%1 = stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>} : tensor<8x8xf32>`,
			`%2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>}`,
		}, nil},
		{"sharding_constraint_propagated", []string{
			`-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", ?}]>}) {`,
			`%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>}`,
			`%2 = stablehlo.add %1, %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>} : tensor<8x8xf32>`,
			`%3 = sdy.sharding_constraint %2 <@mesh, [{?}, {"a", ?}]> : tensor<8x8xf32>`,
		}, nil},
		{"chained_dot_generals", []string{
			`%arg1: tensor<8x8xf32>)`,
			`%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}`,
			`%1 = stablehlo.dot_general %0, %0, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>}`,
			`%3 = stablehlo.add %2, %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>} : tensor<8x8xf32>`,
		}, nil},
		{"unknown_op", []string{
			`%arg1: tensor<4x1x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}, {?}]>}, %arg2: tensor<4x1x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}, {?}]>})`,
			`-> (tensor<4x3x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}, {?}]>}) {`,
		}, nil},
		{"data_flow_edge", []string{
			`-> (tensor<32x96xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>}, tensor<32x96xf32>)`,
			`stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>} : tensor<32x96xf32>`,
		}, []string{`%arg1: tensor<32x96xf32> {`}},
		{"pass_through_factor_higher_priority_than_reduction_factor", []string{
			`%arg0: tensor<32x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>},`,
			`%0 = stablehlo.dot %arg0, %arg1, precision = [DEFAULT, DEFAULT] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}`,
		}, nil},
		{"broadcast_forward_higher_priority_than_backwards", []string{
			`%0 = stablehlo.broadcast_in_dim %arg0, dims = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>}`,
			`%1 = stablehlo.broadcast_in_dim %0, dims = [0, 1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}, {?}]>]>}`,
		}, nil},
	})
}

func runShardy(t *testing.T, file string, opts propagation.Options, cases []shardyCase) {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.fn, func(t *testing.T) {
			imp, err := stablehlo.Read(context.Background(), string(src), stablehlo.Options{Function: tc.fn})
			require.NoError(t, err)
			res, err := propagation.Propagate(context.Background(), imp.Graph, imp.Mesh, opts)
			require.NoError(t, err)
			out := imp.Annotate(res.Shardings)
			start := strings.Index(out, "func.func @"+tc.fn+"(")
			require.GreaterOrEqual(t, start, 0)
			end := strings.Index(out[start:], "\n}\n")
			text := out[start : start+end]
			// CHECK lines match modulo line breaks inside the signature and op text.
			flat := strings.Join(strings.Fields(text), " ")
			for _, c := range tc.check {
				assert.Contains(t, flat, strings.Join(strings.Fields(c), " "))
			}
			for _, c := range tc.not {
				assert.NotContains(t, flat, c)
			}
		})
	}
}

// TestGenericModule: basic_propagation's @simple printed entirely in the generic form
// (builtin.module, sdy.mesh and func.func included, as mlir-opt --mlir-print-op-generic
// prints it) imports and propagates as the pretty form does; the ops are annotated (the
// generic arg_attrs and res_attrs are left as they are).
func TestGenericModule(t *testing.T) {
	src, err := os.ReadFile("testdata/generic_module.mlir")
	require.NoError(t, err)
	imp, err := stablehlo.Read(context.Background(), string(src), stablehlo.Options{})
	require.NoError(t, err)
	assert.Equal(t, "simple", imp.Func.Name)
	assert.Equal(t, "mesh_a_2_b_2", imp.Mesh.Name)
	require.NotNil(t, imp.Graph.Tensors["arg0"].Sharding)
	assert.Equal(t, `[{"a"}, {"b"}]`, imp.Graph.Tensors["arg0"].Sharding.Body())
	res, err := propagation.Propagate(context.Background(), imp.Graph, imp.Mesh, propagation.Options{ConflictResolution: propagation.Basic})
	require.NoError(t, err)
	for id, want := range map[string]string{
		"arg1": `[{"a", ?}, {"b", ?}]`, "arg2": `[{"b", ?}, {?}]`, "0": `[{"a", ?}, {"b", ?}]`, "1": `[{"a", ?}, {?}]`, "result0": `[{"a", ?}, {?}]`,
	} {
		assert.Equal(t, want, res.Shardings[id].Body(), id)
	}
	out := imp.Annotate(res.Shardings)
	assert.Contains(t, out, `%1 = "stablehlo.dot_general"(%0, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a_2_b_2, [{"a", ?}, {?}]>]>} :`)
	again, err := stablehlo.Read(context.Background(), out, stablehlo.Options{})
	require.NoError(t, err)
	assert.Len(t, again.Graph.Ops, len(imp.Graph.Ops))
}

// TestLocate: errors of propagating an imported graph name the op's line and column, or
// the tensor and its defining op, or the function.
func TestLocate(t *testing.T) {
	src := "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {\n  %x.1 = stablehlo.negate %arg0 : tensor<8x4xf32>\n  return %x.1 : tensor<8x4xf32>\n}\n"
	imp, err := stablehlo.Read(context.Background(), src, stablehlo.Options{})
	require.NoError(t, err)
	cases := []struct {
		field, want string
	}{
		{"ops[0].attrs.dims", `line 3, column 3: bad`},
		{"tensors.x.1.sharding[0]", `line 3, column 3: %x.1: bad`},
		{"tensors.arg0.sharding", `line 2, column 1: %arg0: bad`},
		{"inputs", `line 2, column 1: inputs: bad`},
	}
	for _, tc := range cases {
		es, ok := sharding.AsFieldErrors(imp.Locate(sharding.Fieldf(tc.field, "bad")))
		require.True(t, ok)
		require.Len(t, es, 1)
		assert.Equal(t, stablehlo.Field, es[0].Field)
		assert.Equal(t, tc.want, es[0].Message, tc.field)
	}
}

// TestOtherDialectsAreOpaque: ops of dialects the import does not know, in their own
// printed syntax, are opaque barriers, never an error.
func TestOtherDialectsAreOpaque(t *testing.T) {
	src := `sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}, %i: index) -> (tensor<8xf32>, f32) {
  %0 = stablehlo.negate %arg0 : tensor<8xf32>
  %e = tensor.extract %0[%i] : tensor<8xf32>
  %c0 = arith.constant 0 : index
  %r = scf.for %k = %c0 to %i step %i iter_args(%acc = %0) -> (tensor<8xf32>) {
    scf.yield %acc : tensor<8xf32>
  }
  %1 = stablehlo.abs %r : tensor<8xf32>
  return %1, %e : tensor<8xf32>, f32
}
`
	imp, err := stablehlo.Read(context.Background(), src, stablehlo.Options{})
	require.NoError(t, err)
	var ops []string
	for _, o := range imp.Opaque {
		ops = append(ops, o.Op)
	}
	// Their results are opaque values, so the abs that reads one is opaque too.
	assert.Equal(t, []string{"tensor.extract", "arith.constant", "scf.for", "stablehlo.abs"}, ops)
	res, err := propagation.Propagate(context.Background(), imp.Graph, imp.Mesh, propagation.DefaultOptions())
	require.NoError(t, err)
	assert.Equal(t, `[{"x", ?}]`, res.Shardings["0"].Body())
	assert.Equal(t, `[{?}]`, res.Shardings["1"].Body(), "nothing crosses the opaque scf.for")
}

// TestLimits: nesting, ops and values (inlined calls included) stop at the limits with
// an error naming the setting.
func TestLimits(t *testing.T) {
	nested := "func.func @main() {\n" + strings.Repeat("%0 = \"x.y\"() ({\n", 20) + strings.Repeat("}) : () -> ()\n", 20) + "return\n}\n"
	calls := `sdy.mesh @mesh = <["x"=2]>
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @f(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @f(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @g(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @g(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = stablehlo.add %0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
`
	cases := []struct {
		name, src string
		lim       stablehlo.Limits
		want      string
	}{
		{"depth", nested, stablehlo.Limits{MaxDepth: 10}, "SHARDPLAN_MAX_MODULE_DEPTH"},
		{"ops", calls, stablehlo.Limits{MaxOps: 5}, "more than 5 ops; the limit is configurable (SHARDPLAN_MAX_GRAPH_OPS)"},
		{"inlined ops", calls, stablehlo.Limits{MaxOps: 12}, "more than 12 ops (calls inlined)"},
		{"values", "func.func @main() {\n  %0:9 = \"x.y\"() : () -> (i1, i1, i1, i1, i1, i1, i1, i1, i1)\n  return\n}\n", stablehlo.Limits{MaxTensors: 8}, "more than 8 values"},
		{"inlined tensors", calls, stablehlo.Limits{MaxTensors: 12}, "more than 12 tensors (calls inlined)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stablehlo.Read(context.Background(), tc.src, stablehlo.Options{Limits: tc.lim})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := stablehlo.Read(context.Background(), calls, stablehlo.Options{})
	require.NoError(t, err, "within the default limits")
}
