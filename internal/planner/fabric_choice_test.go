package planner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestModelChangesThePlan: the same reshard on the same mesh gets a different schedule
// when the bandwidth model changes, and each is priced from what its links carry. On a
// TPU torus (node=4 x gpu=8, lines: no wraparound below 4x4x4) the direct exchange is
// no bargain once its transfers are routed (its holders sit on two gpu columns per row
// block), so the planner keeps to all-to-alls. On a DGX H100 cluster the node axis
// crosses InfiniBand, 9x slower than NVLink, so the planner keeps the traffic inside
// the node: an all_to_all over gpu that moves 3.5x the bytes on NVLink, then a local
// slice over node (the direct exchange, from the nearest replicas, ties with it). The
// profiles are priced by the formulas (COSTMODEL.md B.1-B.4) the exhibit was found on.
func TestModelChangesThePlan(t *testing.T) {
	m := mustMesh(t, "node=4,gpu=8")
	shape := []int64{4096, 4096}
	src := mustSharding(t, m, shape, `["gpu", null]`)
	tgt := mustSharding(t, m, shape, `["node", "gpu"]`)
	plan := func(profile string) *Plan {
		f := formulaModel(t, profile) // the prices the exhibit was found on
		p, err := Reshard(context.Background(), &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: src, Target: tgt, Model: f})
		require.NoError(t, err)
		replay(t, p)
		assert.GreaterOrEqual(t, p.Summary.TimeUS, p.Summary.TimeLowerBoundUS, profile)
		return p
	}
	direct := func(p *Plan) Candidate {
		for _, c := range p.Summary.Candidates {
			if c.Name == "all_to_all_v" {
				return c
			}
		}
		t.Fatalf("the direct exchange was not priced: %+v", p.Summary.Candidates)
		return Candidate{}
	}

	tpu := plan("tpu-v5p")
	for i, st := range tpu.Steps {
		assert.NotEqual(t, OpAllToAllV, st.Op, "step %d", i)
		if st.Op != OpSlice {
			assert.Equal(t, "ici", st.Cost.Link, "step %d", i)
		}
	}
	assert.Less(t, tpu.Summary.TimeUS, direct(tpu).TimeUS, "routed, the exchange loses to the all-to-alls")

	gpu := plan("h100")
	for i, st := range gpu.Steps {
		assert.NotEqual(t, "ib", st.Cost.Link, "step %d %s crosses InfiniBand", i, st.Op)
	}
	assert.Equal(t, []Op{OpAllToAll, OpSlice}, ops(gpu))
	assert.Greater(t, gpu.Summary.BytesPerDevice, gpu.Summary.LowerBoundBytesPerDevice, "it moves more bytes...")
	// ...and takes as long as the direct exchange, whose holders are the nearest
	// replicas (in the same node): at equal time the standard collective wins.
	assert.LessOrEqual(t, gpu.Summary.TimeUS, direct(gpu).TimeUS)
	assert.NotEqual(t, ops(tpu), ops(gpu))
}
