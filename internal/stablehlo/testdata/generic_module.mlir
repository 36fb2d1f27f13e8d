"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["a"=2, "b"=2]>, sym_name = "mesh_a_2_b_2"}> : () -> ()
  "func.func"() <{arg_attrs = [{sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a"}, {"b"}]>}, {}, {}], function_type = (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>, sym_name = "simple"}> ({
  ^bb0(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>):
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = "stablehlo.dot_general"(%0, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    "func.return"(%1) : (tensor<8x16xf32>) -> ()
  }) : () -> ()
}) : () -> ()
