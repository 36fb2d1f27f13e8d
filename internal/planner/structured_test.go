package planner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// structuredOpsMLIR are the ops of a stack without point-to-point steps (MLIR's shard
// dialect).
var structuredOpsMLIR = []Op{OpSlice, OpAllGather, OpAllToAll}

// TestStructuredExamples: reshards whose cheapest plans under structured ops are chains
// of all-to-alls that never replicate the tensor, above the complete pass's full size.
func TestStructuredExamples(t *testing.T) {
	for _, tc := range []struct {
		name, profile, mesh string
		shape               []int64
		src, tgt            string
		forbid              bool
		maxUS               float64 // the three-all-to-all chain's price
	}{
		{"x16y8z8 three all-to-alls", "tpu-v5p", "x=16,y=8,z=8", []int64{32, 8192, 8192}, `[[],["x"],["y","z"]]`, `[[],["z","x","y"],[]]`, false, 490.5},
		{"24 devices rank 3 forbid remat", "tpu-v5p", "x=4,y=3,z=2", []int64{96, 1024, 24}, `[["z"],["y"],["x"]]`, `[[],["z","x"],["y"]]`, true, 20.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMesh(t, tc.mesh)
			model, ok := cost.Profile(tc.profile)
			require.True(t, ok)
			r := &Request{Mesh: m, Shape: tc.shape, ElemBits: 32, Source: mustSharding(t, m, tc.shape, tc.src), Target: mustSharding(t, m, tc.shape, tc.tgt),
				Model: model, AllowedOps: structuredOpsMLIR, AllowFullRemat: !tc.forbid}
			p, err := Reshard(context.Background(), r)
			require.NoError(t, err)
			t.Logf("%.3f µs %s%s", p.Summary.TimeUS, p.Summary.Optimality, describeSteps(p))
			require.False(t, p.Summary.FullRematerialization, describeSteps(p))
			require.LessOrEqual(t, p.Summary.TimeUS, tc.maxUS, describeSteps(p))
			require.Equal(t, OptimalityProven, p.Summary.Optimality)
		})
	}
}
