// dot_general with batching dims, einsum, convolution, dot.
sdy.mesh @mesh = <["x"=2, "y"=4]>

func.func @pretty(%arg0: tensor<4x8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {"y"}]>}, %arg1: tensor<4x16x32xf32>, %arg2: tensor<32x8xf32>, %arg3: tensor<2x8x8x4xf32>, %arg4: tensor<3x3x4x16xf32>, %arg5: tensor<8x4xf32>) -> (tensor<4x8x8xf32>, tensor<2x6x6x16xf32>, tensor<32x4xf32>) {
  %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
  %1 = stablehlo.einsum %0, %arg2, config = "bmk,kn->bmn" : (tensor<4x8x32xf32>, tensor<32x8xf32>) -> tensor<4x8x8xf32>
  %2 = stablehlo.convolution(%arg3, %arg4) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x8x8x4xf32>, tensor<3x3x4x16xf32>) -> tensor<2x6x6x16xf32>
  %3 = stablehlo.dot %arg2, %arg5, precision = [DEFAULT, DEFAULT] : (tensor<32x8xf32>, tensor<8x4xf32>) -> tensor<32x4xf32>
  return %1, %2, %3 : tensor<4x8x8xf32>, tensor<2x6x6x16xf32>, tensor<32x4xf32>
}

func.func @generic(%arg0: tensor<4x8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {"y"}]>}, %arg1: tensor<4x16x32xf32>, %arg2: tensor<32x8xf32>, %arg3: tensor<2x8x8x4xf32>, %arg4: tensor<3x3x4x16xf32>, %arg5: tensor<8x4xf32>) -> (tensor<4x8x8xf32>, tensor<2x6x6x16xf32>, tensor<32x4xf32>) {
  %0 = "stablehlo.dot_general"(%arg0, %arg1) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
  %1 = "stablehlo.einsum"(%0, %arg2) <{einsum_config = "bmk,kn->bmn"}> : (tensor<4x8x32xf32>, tensor<32x8xf32>) -> tensor<4x8x8xf32>
  %2 = "stablehlo.convolution"(%arg3, %arg4) <{batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, feature_group_count = 1 : i64, lhs_dilation = array<i64: 1, 1>, padding = dense<0> : tensor<2x2xi64>, rhs_dilation = array<i64: 1, 1>, window_strides = array<i64: 1, 1>}> : (tensor<2x8x8x4xf32>, tensor<3x3x4x16xf32>) -> tensor<2x6x6x16xf32>
  %3 = "stablehlo.dot"(%arg2, %arg5) <{precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<32x8xf32>, tensor<8x4xf32>) -> tensor<32x4xf32>
  "func.return"(%1, %2, %3) : (tensor<4x8x8xf32>, tensor<2x6x6x16xf32>, tensor<32x4xf32>) -> ()
}
