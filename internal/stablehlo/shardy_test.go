package stablehlo

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/propagation"
)

// TestShardyBasicPropagation posts functions of Shardy's basic_propagation.mlir lit
// test (testdata/shardy_basic_propagation.mlir) through the import, propagation with
// basic conflict resolution and no op priorities (-sdy-basic-propagate) and Annotate, and
// checks the output against the test's CHECK lines (SSA captures written out).
func TestShardyBasicPropagation(t *testing.T) {
	src, err := os.ReadFile("testdata/shardy_basic_propagation.mlir")
	require.NoError(t, err)
	cases := []struct {
		fn    string
		check []string
		not   []string
	}{
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
	}
	for _, tc := range cases {
		t.Run(tc.fn, func(t *testing.T) {
			imp, err := Read(string(src), Options{Function: tc.fn})
			require.NoError(t, err)
			res, err := propagation.Propagate(context.Background(), imp.Graph, imp.Mesh, propagation.Options{ConflictResolution: propagation.Basic})
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
