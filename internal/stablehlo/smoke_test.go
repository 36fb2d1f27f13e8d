package stablehlo

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/propagation"
)

func TestSmoke(t *testing.T) {
	src, _ := os.ReadFile("testdata/mlp_jax.mlir")
	imp, err := Read(string(src), Options{})
	require.NoError(t, err)
	res, err := propagation.Propagate(context.Background(), imp.Graph, imp.Mesh, propagation.DefaultOptions())
	require.NoError(t, err)
	t.Log(imp.Annotate(res.Shardings))
	for _, r := range res.Reshards { t.Log(r.Op, r.Tensor, r.From, r.To) }
	for _, r := range res.Reductions { t.Log(r.Op, r.Tensor, r.Kind, r.Axes) }
	t.Log(imp.Opaque)
}
