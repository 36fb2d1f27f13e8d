package stablehlo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/propagation"
)

func TestSmoke(t *testing.T) {
	src := `sdy.mesh @mesh_a_2_b_2 = <["a"=2, "b"=2]>

func.func @simple(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_a_2_b_2, [{"a"}, {"b"}]>},
                  %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] :
    (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
`
	imp, err := Read(src, Options{})
	require.NoError(t, err)
	res, err := propagation.Propagate(context.Background(), imp.Graph, imp.Mesh, propagation.DefaultOptions())
	require.NoError(t, err)
	t.Log(imp.Annotate(res.Shardings))
}
