// sdy.sharding_constraint, custom_call with sdy.sharding_rule, GSPMD's @Sharding custom
// call and mhlo.sharding, opaque ops (sort, optimization_barrier, a custom call without a
// rule), a token, an inlined call, an inlined sdy.named_computation, and an op shardplan
// does not model that brings its own sdy.sharding_rule; a composite (its decomposition
// inlined); an opaque sdy.manual_computation whose out_shardings annotate its result.
sdy.mesh @mesh = <["x"=2, "y"=4], device_ids=[0, 1, 2, 3, 4, 5, 6, 7]>
sdy.mesh @maximal_mesh = <[], device_ids=[0]>

func.func @pretty(%arg0: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}, %arg1: tensor<16x32xf32>, %arg2: !stablehlo.token) -> (tensor<8x32xf32>, tensor<8x16xf32>, !stablehlo.token) {
  %0 = sdy.sharding_constraint %arg1 <@mesh, [{}, {"y"}]> : tensor<16x32xf32>
  %1 = stablehlo.custom_call @matmul(%arg0, %0) {backend_config = "", sdy.sharding_rule = #sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}, custom>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %2 = stablehlo.custom_call @Sharding(%1) {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %3:2 = "stablehlo.sort"(%arg0, %arg0) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
    %10 = stablehlo.compare  GT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %10 : tensor<i1>
  }) : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  %4 = stablehlo.optimization_barrier %3#1 : tensor<8x16xf32>
  %5 = func.call @double(%4) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %n = sdy.named_computation<"square">(%5) (%x: tensor<8x16xf32>) {
    %9 = stablehlo.multiply %x, %x : tensor<8x16xf32>
    sdy.return %9 : tensor<8x16xf32>
  } : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %6 = stablehlo.custom_call @flash_attention(%n) {has_side_effect = true} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %7 = stablehlo.after_all %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh, []>]>} : !stablehlo.token
  %m = sdy.manual_computation(%arg1) in_shardings=[<@mesh, [{}, {"y"}]>] out_shardings=[<@mesh, [{}, {"y"}]>] manual_axes={"y"} (%l: tensor<16x8xf32>) {
    %z = stablehlo.negate %l : tensor<16x8xf32>
    sdy.return %z : tensor<16x8xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %c2 = stablehlo.composite "my.double" %arg0 {composite_attributes = {approximate = false}, decomposition = @double} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %t:2 = chlo.top_k(%arg0, k = 4) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, k], [i, l]) {i=8, j=16, k=4, l=4} need_replication={j}, custom>} : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)
  return %2, %6, %7 : tensor<8x32xf32>, tensor<8x16xf32>, !stablehlo.token
}

func.func @generic(%arg0: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}, %arg1: tensor<16x32xf32>, %arg2: !stablehlo.token) -> (tensor<8x32xf32>, tensor<8x16xf32>, !stablehlo.token) {
  %0 = "sdy.sharding_constraint"(%arg1) <{sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}> : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %1 = "stablehlo.custom_call"(%arg0, %0) <{backend_config = "", call_target_name = "matmul"}> {sdy.sharding_rule = #sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}, custom>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %2 = "stablehlo.custom_call"(%1) <{call_target_name = "Sharding"}> {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %3:2 = "stablehlo.sort"(%arg0, %arg0) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
    %10 = "stablehlo.compare"(%a, %b) <{comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
    "stablehlo.return"(%10) : (tensor<i1>) -> ()
  }) : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  %4 = "stablehlo.optimization_barrier"(%3#1) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %5 = "func.call"(%4) <{callee = @double}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %n = "sdy.named_computation"(%5) <{name = "square"}> ({
  ^bb0(%x: tensor<8x16xf32>):
    %9 = "stablehlo.multiply"(%x, %x) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    "sdy.return"(%9) : (tensor<8x16xf32>) -> ()
  }) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %6 = "stablehlo.custom_call"(%n) <{call_target_name = "flash_attention", has_side_effect = true}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %7 = "stablehlo.after_all"(%arg2) {sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh, []>]>} : (!stablehlo.token) -> !stablehlo.token
  %m = "sdy.manual_computation"(%arg1) <{in_shardings = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}]>]>, manual_axes = #sdy<manual_axes{"y"}>, out_shardings = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}]>]>}> ({
  ^bb0(%l: tensor<16x8xf32>):
    %z = "stablehlo.negate"(%l) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    "sdy.return"(%z) : (tensor<16x8xf32>) -> ()
  }) : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %c2 = "stablehlo.composite"(%arg0) <{composite_attributes = {approximate = false}, decomposition = @double, name = "my.double"}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %t:2 = "chlo.top_k"(%arg0) <{k = 4 : i64}> {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, k], [i, l]) {i=8, j=16, k=4, l=4} need_replication={j}, custom>} : (tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x4xi32>)
  "func.return"(%2, %6, %7) : (tensor<8x32xf32>, tensor<8x16xf32>, !stablehlo.token) -> ()
}

func.func private @double(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
