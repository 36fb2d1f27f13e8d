// Elementwise ops (CHLO's erf included), compare, select, clamp, convert, constant and
// iota, in both forms.
sdy.mesh @mesh = <["x"=2, "y"=4]>

func.func @pretty(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}, tensor<8x16xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}) {
  %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32>
  %1 = stablehlo.multiply %0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32>
  %2 = stablehlo.negate %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32>
  %3 = stablehlo.exponential %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32>
  %4 = stablehlo.compare  GT, %3, %arg1,  FLOAT {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1>
  %5 = stablehlo.select %4, %3, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xi1>, tensor<8x16xf32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %cst_0 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
  %6 = stablehlo.clamp %cst, %5, %cst_0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : (tensor<f32>, tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %7 = stablehlo.convert %6 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : (tensor<8x16xf32>) -> tensor<8x16xbf16>
  %8 = stablehlo.iota dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32>
  %9 = stablehlo.subtract %6, %8 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32>
  %10 = chlo.erf %9 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32> -> tensor<8x16xf32>
  return %10, %7 : tensor<8x16xf32>, tensor<8x16xbf16>
}

func.func @generic(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>) {
  %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = "stablehlo.multiply"(%0, %arg1) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = "stablehlo.negate"(%1) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %3 = "stablehlo.exponential"(%2) <{result_accuracy = #stablehlo.result_accuracy<mode = #stablehlo.result_accuracy_mode<DEFAULT>>}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %4 = "stablehlo.compare"(%3, %arg1) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1>
  %5 = "stablehlo.select"(%4, %3, %arg1) : (tensor<8x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %cst = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %cst_0 = "stablehlo.constant"() <{value = dense<6.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %6 = "stablehlo.clamp"(%cst, %5, %cst_0) : (tensor<f32>, tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %7 = "stablehlo.convert"(%6) : (tensor<8x16xf32>) -> tensor<8x16xbf16>
  %8 = "stablehlo.iota"() <{iota_dimension = 1 : i64}> : () -> tensor<8x16xf32>
  %9 = "stablehlo.subtract"(%6, %8) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %10 = "chlo.erf"(%9) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  "func.return"(%10, %7) : (tensor<8x16xf32>, tensor<8x16xbf16>) -> ()
}
