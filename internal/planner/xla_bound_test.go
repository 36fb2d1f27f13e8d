package planner

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// TestPropertyXLAPlansAtOrAboveTimeBound: XLA's predicted plans (strategy xla, with
// their halo permutes and fallbacks) are priced at or above the reshard's time lower
// bound too, whose latency part includes the hop bound on torus profiles.
func TestPropertyXLAPlansAtOrAboveTimeBound(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 30
	}
	pbs := append(randomProblems(t, n), randomSet(t)[:n]...)
	checked := 0
	for _, name := range []string{"tpu-v5p", "h100"} {
		f, ok := cost.Profile(name)
		require.True(t, ok)
		for i, pb := range pbs {
			r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f}
			p, _, err := ReshardXLA(context.Background(), r)
			if err != nil {
				continue
			}
			checked++
			assert.GreaterOrEqual(t, p.Summary.TimeUS*(1+1e-9), p.Summary.TimeLowerBoundUS,
				fmt.Sprintf("%d %s %s %v %s->%s", i, name, pb.mesh, pb.shape, pb.src, pb.tgt))
		}
	}
	require.Greater(t, checked, n)
}
