package planner

import (
	"context"
	"math/rand/v2"
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

// TestOptimalNotSlowerThanXLA: the optimal strategy's plan is never slower than strategy
// xla's (its plan is a candidate), on a reshard where the searches alone ordered the
// same four ops' gathers worse.
func TestOptimalNotSlowerThanXLA(t *testing.T) {
	m := mustMesh(t, "x=8,y=2,z=3")
	shape := []int64{7, 3, 8}
	model, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	mk := func() *Request {
		return &Request{Mesh: m, Shape: shape, ElemBits: 32, Model: model, AllowFullRemat: true,
			Source: mustSharding(t, m, shape, `[["x"],["y"],["z"]]`), Target: mustSharding(t, m, shape, `[["z"],["x"],["y"]]`)}
	}
	xp, _, err := ReshardXLA(context.Background(), mk())
	require.NoError(t, err)
	op, err := Reshard(context.Background(), mk())
	require.NoError(t, err)
	t.Logf("optimal %.4f µs%s\nxla %.4f µs%s", op.Summary.TimeUS, describeSteps(op), xp.Summary.TimeUS, describeSteps(xp))
	require.LessOrEqual(t, op.Summary.TimeUS, xp.Summary.TimeUS+1e-9)
	// And on seeded random reshards of 8-128 devices, with every op and without.
	rng := rand.New(rand.NewPCG(4, 37))
	for i := range 24 {
		r := structuredCase(t, rng, 128)
		r.Model, r.AllowFullRemat = model, true
		if i%2 == 1 {
			r.AllowedOps = []Op{OpSlice, OpAllGather, OpAllToAll, OpCollectivePermute, OpAllReduce, OpReduceScatter}
		}
		q := *r
		xp, _, err := ReshardXLA(context.Background(), &q)
		require.NoError(t, err)
		op, err := Reshard(context.Background(), r)
		require.NoError(t, err)
		require.LessOrEqual(t, op.Summary.TimeUS, xp.Summary.TimeUS*(1+1e-9)+1e-9, "case %d %s %v %s -> %s%s", i, r.Mesh, r.Shape, r.Source, r.Target, describeSteps(op))
	}
}
