package propagation

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// opsPerLayer is the number of ops transformerGraph emits per layer.
const opsPerLayer = 19

func TestTransformerGraph(t *testing.T) {
	g, m := transformerGraph(t, 3)
	require.Len(t, g.Ops, 3*opsPerLayer)
	r, err := Propagate(context.Background(), g, m, DefaultOptions())
	require.NoError(t, err)
	for l := range 3 {
		p := func(n string) string { return fmt.Sprintf("l%d.%s", l, n) }
		require.Equal(t, `[{"data", ?}, {?}, {"model", ?}, {?}]`, r.Shardings[p("q")].Body())
		require.Equal(t, `[{"data", ?}, {?}, {"model", ?}]`, r.Shardings[p("h")].Body())
		require.Equal(t, `[{"data", ?}, {?}, {?}]`, r.Shardings[p("out")].Body())
	}
	var kinds = map[string]int{}
	for _, red := range r.Reductions {
		kinds[red.Kind+":"+axesText(red.Axes)]++
	}
	require.Equal(t, map[string]int{"all_reduce:model": 6}, kinds) // attn and mlp2 per layer
}

func BenchmarkPropagateTransformer(b *testing.B) {
	for _, nOps := range []int{1_000, 10_000, 100_000} {
		for _, strategy := range []string{Aggressive, Basic} {
			b.Run(fmt.Sprintf("ops=%d/%s", nOps, strategy), func(b *testing.B) {
				g, m := transformerGraph(b, nOps/opsPerLayer)
				opts := Options{ConflictResolution: strategy, OpPriority: true}
				r, err := Propagate(context.Background(), g, m, opts)
				require.NoError(b, err)
				require.Equal(b, `[{"data", ?}, {?}, {?}]`, r.Shardings[g.Outputs[0]].Body())
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Propagate(context.Background(), g, m, opts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(g.Ops)), "ops")
			})
		}
	}
}
