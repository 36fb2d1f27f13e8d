// broadcast_in_dim, reshape, transpose, reverse, concatenate, slice, dynamic_slice, pad.
sdy.mesh @mesh = <["x"=2, "y"=4]>

func.func @pretty(%arg0: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}, %arg1: tensor<8x16xf32>, %arg2: tensor<i32>) -> tensor<20x9xf32> {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"y", ?}]>]>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.reshape %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"y", ?}, {?}]>]>} : (tensor<8x16xf32>) -> tensor<8x4x4xf32>
  %2 = stablehlo.transpose %1, dims = [2, 0, 1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {?}, {"y", ?}]>]>} : (tensor<8x4x4xf32>) -> tensor<4x8x4xf32>
  %3 = stablehlo.reshape %2 : (tensor<4x8x4xf32>) -> tensor<16x8xf32>
  %4 = stablehlo.reverse %3, dims = [0] : tensor<16x8xf32>
  %5 = stablehlo.concatenate %4, %4, dim = 1 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
  %6 = stablehlo.slice %5 [0:16, 2:16:2] : (tensor<16x16xf32>) -> tensor<16x7xf32>
  %7 = stablehlo.dynamic_slice %6, %arg2, %arg2, sizes = [16, 4] : (tensor<16x7xf32>, tensor<i32>, tensor<i32>) -> tensor<16x4xf32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %8 = stablehlo.pad %7, %cst, low = [2, 1], high = [2, 0], interior = [0, 1] : (tensor<16x4xf32>, tensor<f32>) -> tensor<20x8xf32>
  %9 = stablehlo.pad %8, %cst, low = [0, 0], high = [0, 1], interior = [0, 0] : (tensor<20x8xf32>, tensor<f32>) -> tensor<20x9xf32>
  return %9 : tensor<20x9xf32>
}

func.func @generic(%arg0: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}, %arg1: tensor<8x16xf32>, %arg2: tensor<i32>) -> tensor<20x9xf32> {
  %0 = "stablehlo.broadcast_in_dim"(%arg0) <{broadcast_dimensions = array<i64: 1>}> : (tensor<16xf32>) -> tensor<8x16xf32>
  %1 = "stablehlo.reshape"(%0) : (tensor<8x16xf32>) -> tensor<8x4x4xf32>
  %2 = "stablehlo.transpose"(%1) <{permutation = array<i64: 2, 0, 1>}> : (tensor<8x4x4xf32>) -> tensor<4x8x4xf32>
  %3 = "stablehlo.reshape"(%2) : (tensor<4x8x4xf32>) -> tensor<16x8xf32>
  %4 = "stablehlo.reverse"(%3) <{dimensions = array<i64: 0>}> : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %5 = "stablehlo.concatenate"(%4, %4) <{dimension = 1 : i64}> : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
  %6 = "stablehlo.slice"(%5) <{limit_indices = array<i64: 16, 16>, start_indices = array<i64: 0, 2>, strides = array<i64: 1, 2>}> : (tensor<16x16xf32>) -> tensor<16x7xf32>
  %7 = "stablehlo.dynamic_slice"(%6, %arg2, %arg2) <{slice_sizes = array<i64: 16, 4>}> : (tensor<16x7xf32>, tensor<i32>, tensor<i32>) -> tensor<16x4xf32>
  %cst = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %8 = "stablehlo.pad"(%7, %cst) <{edge_padding_high = array<i64: 2, 0>, edge_padding_low = array<i64: 2, 1>, interior_padding = array<i64: 0, 1>}> : (tensor<16x4xf32>, tensor<f32>) -> tensor<20x8xf32>
  %9 = "stablehlo.pad"(%8, %cst) {edge_padding_high = dense<[0, 1]> : tensor<2xi64>, edge_padding_low = dense<0> : tensor<2xi64>, interior_padding = dense<0> : tensor<2xi64>} : (tensor<20x8xf32>, tensor<f32>) -> tensor<20x9xf32>
  "func.return"(%9) : (tensor<20x9xf32>) -> ()
}
