// reduce (applies and region forms, multi-result), while with multi-results, gather,
// scatter.
sdy.mesh @mesh = <["x"=2, "y"=4]>

func.func @pretty(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<8x16xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}, %arg2: tensor<2x1xi32>, %arg3: tensor<2x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"y", ?}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}]>}, tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}]>}, tensor<8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}]>}, tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}, tensor<2x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"y", ?}]>}, tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}) {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}]>]>} : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  %1:2 = stablehlo.reduce(%arg0 init: %cst), (%arg1 init: %c) across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}]>, <@mesh, [{"x", ?}]>]>} : (tensor<8x16xf32>, tensor<8x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xi32>)
    reducer(%a0: tensor<f32>, %b0: tensor<f32>) (%a1: tensor<i32>, %b1: tensor<i32>)  {
      %10 = stablehlo.maximum %a0, %b0 : tensor<f32>
      %11 = stablehlo.add %a1, %b1 : tensor<i32>
      stablehlo.return %10, %11 : tensor<f32>, tensor<i32>
    }
  %2:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c) : tensor<8x16xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>, <@mesh, []>]>}
    cond {
      %c_1 = stablehlo.constant dense<4> : tensor<i32>
      %12 = stablehlo.compare  LT, %iterArg_0, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %12 : tensor<i1>
    } do {
      %c_2 = stablehlo.constant dense<1> : tensor<i32>
      %13 = stablehlo.add %iterArg_0, %c_2 : tensor<i32>
      %14 = stablehlo.tanh %iterArg {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32>
      stablehlo.return %14, %13 : tensor<8x16xf32>, tensor<i32>
    }
  %3 = "stablehlo.gather"(%2#0, %arg2) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 16>}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"y", ?}]>]>} : (tensor<8x16xf32>, tensor<2x1xi32>) -> tensor<2x16xf32>
  %4 = "stablehlo.scatter"(%arg0, %arg2, %arg3) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%u0: tensor<f32>, %u1: tensor<f32>):
      %15 = stablehlo.add %u0, %u1 : tensor<f32>
      stablehlo.return %15 : tensor<f32>
    }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : (tensor<8x16xf32>, tensor<2x1xi32>, tensor<2x16xf32>) -> tensor<8x16xf32>
  return %0, %1#0, %1#1, %2#0, %3, %4 : tensor<8xf32>, tensor<8xf32>, tensor<8xi32>, tensor<8x16xf32>, tensor<2x16xf32>, tensor<8x16xf32>
}

func.func @generic(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<8x16xi32>, %arg2: tensor<2x1xi32>, %arg3: tensor<2x16xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xi32>, tensor<8x16xf32>, tensor<2x16xf32>, tensor<8x16xf32>) {
  %cst = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %c = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
  %0 = "stablehlo.reduce"(%arg0, %cst) <{dimensions = array<i64: 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %10 = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "stablehlo.return"(%10) : (tensor<f32>) -> ()
  }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  %1:2 = "stablehlo.reduce"(%arg0, %arg1, %cst, %c) <{dimensions = array<i64: 1>}> ({
  ^bb0(%a0: tensor<f32>, %a1: tensor<i32>, %b0: tensor<f32>, %b1: tensor<i32>):
    %10 = "stablehlo.maximum"(%a0, %b0) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %11 = "stablehlo.add"(%a1, %b1) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "stablehlo.return"(%10, %11) : (tensor<f32>, tensor<i32>) -> ()
  }) : (tensor<8x16xf32>, tensor<8x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xi32>)
  %2:2 = "stablehlo.while"(%arg0, %c) ({
  ^bb0(%iterArg: tensor<8x16xf32>, %iterArg_0: tensor<i32>):
    %c_1 = "stablehlo.constant"() <{value = dense<4> : tensor<i32>}> : () -> tensor<i32>
    %12 = "stablehlo.compare"(%iterArg_0, %c_1) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "stablehlo.return"(%12) : (tensor<i1>) -> ()
  }, {
  ^bb0(%iterArg: tensor<8x16xf32>, %iterArg_0: tensor<i32>):
    %c_2 = "stablehlo.constant"() <{value = dense<1> : tensor<i32>}> : () -> tensor<i32>
    %13 = "stablehlo.add"(%iterArg_0, %c_2) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %14 = "stablehlo.tanh"(%iterArg) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    "stablehlo.return"(%14, %13) : (tensor<8x16xf32>, tensor<i32>) -> ()
  }) : (tensor<8x16xf32>, tensor<i32>) -> (tensor<8x16xf32>, tensor<i32>)
  %3 = "stablehlo.gather"(%2#0, %arg2) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 16>}> : (tensor<8x16xf32>, tensor<2x1xi32>) -> tensor<2x16xf32>
  %4 = "stablehlo.scatter"(%arg0, %arg2, %arg3) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%u0: tensor<f32>, %u1: tensor<f32>):
      %15 = "stablehlo.add"(%u0, %u1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%15) : (tensor<f32>) -> ()
    }) : (tensor<8x16xf32>, tensor<2x1xi32>, tensor<2x16xf32>) -> tensor<8x16xf32>
  "func.return"(%0, %1#0, %1#1, %2#0, %3, %4) : (tensor<8xf32>, tensor<8xf32>, tensor<8xi32>, tensor<8x16xf32>, tensor<2x16xf32>, tensor<8x16xf32>) -> ()
}
