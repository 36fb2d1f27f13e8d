// Every unary and binary StableHLO op of the graph API in both printed forms (generated
// once by a script; the sharding of %x reaches every result).
sdy.mesh @mesh = <["x"=2, "y"=4]>

func.func @pretty(%x: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %y: tensor<8x16xf32>, %i: tensor<8x16xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %v0 = stablehlo.abs %x : tensor<8x16xf32>
  %v1 = stablehlo.cbrt %x : tensor<8x16xf32>
  %v2 = stablehlo.ceil %x : tensor<8x16xf32>
  %v3 = stablehlo.cosine %x : tensor<8x16xf32>
  %v4 = stablehlo.exponential %x : tensor<8x16xf32>
  %v5 = stablehlo.exponential_minus_one %x : tensor<8x16xf32>
  %v6 = stablehlo.floor %x : tensor<8x16xf32>
  %v7 = stablehlo.is_finite %x : (tensor<8x16xf32>) -> tensor<8x16xi1>
  %v8 = stablehlo.log %x : tensor<8x16xf32>
  %v9 = stablehlo.log_plus_one %x : tensor<8x16xf32>
  %v10 = stablehlo.logistic %x : tensor<8x16xf32>
  %v11 = stablehlo.negate %x : tensor<8x16xf32>
  %v12 = stablehlo.round_nearest_afz %x : tensor<8x16xf32>
  %v13 = stablehlo.round_nearest_even %x : tensor<8x16xf32>
  %v14 = stablehlo.rsqrt %x : tensor<8x16xf32>
  %v15 = stablehlo.sign %x : tensor<8x16xf32>
  %v16 = stablehlo.sine %x : tensor<8x16xf32>
  %v17 = stablehlo.sqrt %x : tensor<8x16xf32>
  %v18 = stablehlo.tan %x : tensor<8x16xf32>
  %v19 = stablehlo.tanh %x : tensor<8x16xf32>
  %v20 = stablehlo.count_leading_zeros %i : tensor<8x16xi32>
  %v21 = stablehlo.not %i : tensor<8x16xi32>
  %v22 = stablehlo.popcnt %i : tensor<8x16xi32>
  %v23 = stablehlo.add %x, %y : tensor<8x16xf32>
  %v24 = stablehlo.atan2 %x, %y : tensor<8x16xf32>
  %v25 = stablehlo.divide %x, %y : tensor<8x16xf32>
  %v26 = stablehlo.maximum %x, %y : tensor<8x16xf32>
  %v27 = stablehlo.minimum %x, %y : tensor<8x16xf32>
  %v28 = stablehlo.multiply %x, %y : tensor<8x16xf32>
  %v29 = stablehlo.power %x, %y : tensor<8x16xf32>
  %v30 = stablehlo.remainder %x, %y : tensor<8x16xf32>
  %v31 = stablehlo.subtract %x, %y : tensor<8x16xf32>
  %v32 = stablehlo.and %i, %i : tensor<8x16xi32>
  %v33 = stablehlo.or %i, %i : tensor<8x16xi32>
  %v34 = stablehlo.xor %i, %i : tensor<8x16xi32>
  %v35 = stablehlo.shift_left %i, %i : tensor<8x16xi32>
  %v36 = stablehlo.shift_right_arithmetic %i, %i : tensor<8x16xi32>
  %v37 = stablehlo.shift_right_logical %i, %i : tensor<8x16xi32>
  %v38 = stablehlo.complex %x, %y : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xcomplex<f32>>
  %v39 = stablehlo.real %v38 : (tensor<8x16xcomplex<f32>>) -> tensor<8x16xf32>
  %v40 = stablehlo.imag %v38 : (tensor<8x16xcomplex<f32>>) -> tensor<8x16xf32>
  %v41 = stablehlo.convert %x : (tensor<8x16xf32>) -> tensor<8x16xbf16>
  %cmp = stablehlo.compare  GE, %x, %y,  FLOAT : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1>
  %rp = stablehlo.reduce_precision %x, format = e5m10 : tensor<8x16xf32>
  return %rp : tensor<8x16xf32>
}

func.func @generic(%x: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %y: tensor<8x16xf32>, %i: tensor<8x16xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %v0 = "stablehlo.abs"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v1 = "stablehlo.cbrt"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v2 = "stablehlo.ceil"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v3 = "stablehlo.cosine"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v4 = "stablehlo.exponential"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v5 = "stablehlo.exponential_minus_one"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v6 = "stablehlo.floor"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v7 = "stablehlo.is_finite"(%x) : (tensor<8x16xf32>) -> tensor<8x16xi1>
  %v8 = "stablehlo.log"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v9 = "stablehlo.log_plus_one"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v10 = "stablehlo.logistic"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v11 = "stablehlo.negate"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v12 = "stablehlo.round_nearest_afz"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v13 = "stablehlo.round_nearest_even"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v14 = "stablehlo.rsqrt"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v15 = "stablehlo.sign"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v16 = "stablehlo.sine"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v17 = "stablehlo.sqrt"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v18 = "stablehlo.tan"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v19 = "stablehlo.tanh"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v20 = "stablehlo.count_leading_zeros"(%i) : (tensor<8x16xi32>) -> tensor<8x16xi32>
  %v21 = "stablehlo.not"(%i) : (tensor<8x16xi32>) -> tensor<8x16xi32>
  %v22 = "stablehlo.popcnt"(%i) : (tensor<8x16xi32>) -> tensor<8x16xi32>
  %v23 = "stablehlo.add"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v24 = "stablehlo.atan2"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v25 = "stablehlo.divide"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v26 = "stablehlo.maximum"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v27 = "stablehlo.minimum"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v28 = "stablehlo.multiply"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v29 = "stablehlo.power"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v30 = "stablehlo.remainder"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v31 = "stablehlo.subtract"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %v32 = "stablehlo.and"(%i, %i) : (tensor<8x16xi32>, tensor<8x16xi32>) -> tensor<8x16xi32>
  %v33 = "stablehlo.or"(%i, %i) : (tensor<8x16xi32>, tensor<8x16xi32>) -> tensor<8x16xi32>
  %v34 = "stablehlo.xor"(%i, %i) : (tensor<8x16xi32>, tensor<8x16xi32>) -> tensor<8x16xi32>
  %v35 = "stablehlo.shift_left"(%i, %i) : (tensor<8x16xi32>, tensor<8x16xi32>) -> tensor<8x16xi32>
  %v36 = "stablehlo.shift_right_arithmetic"(%i, %i) : (tensor<8x16xi32>, tensor<8x16xi32>) -> tensor<8x16xi32>
  %v37 = "stablehlo.shift_right_logical"(%i, %i) : (tensor<8x16xi32>, tensor<8x16xi32>) -> tensor<8x16xi32>
  %v38 = "stablehlo.complex"(%x, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xcomplex<f32>>
  %v39 = "stablehlo.real"(%v38) : (tensor<8x16xcomplex<f32>>) -> tensor<8x16xf32>
  %v40 = "stablehlo.imag"(%v38) : (tensor<8x16xcomplex<f32>>) -> tensor<8x16xf32>
  %v41 = "stablehlo.convert"(%x) : (tensor<8x16xf32>) -> tensor<8x16xbf16>
  %cmp = "stablehlo.compare"(%x, %y) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = #stablehlo<comparison_direction GE>}> : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1>
  %rp = "stablehlo.reduce_precision"(%x) <{exponent_bits = 5 : i32, mantissa_bits = 10 : i32}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
  "func.return"(%rp) : (tensor<8x16xf32>) -> ()
}
