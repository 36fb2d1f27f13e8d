package planner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// TestModelChangesThePlan: the same reshard on the same mesh gets a different schedule
// when the bandwidth model changes. On a TPU torus every axis rides ICI, so the direct
// exchange that moves only the bytes each device lacks (the lower bound) wins. On a
// DGX H100 cluster (node=4 x gpu=8) the node axis crosses InfiniBand, 9x slower than
// NVLink, so the planner keeps the traffic inside the node: an all_to_all over gpu that
// moves 3.5x the bytes on NVLink, then a local slice over node.
func TestModelChangesThePlan(t *testing.T) {
	m := mustMesh(t, "node=4,gpu=8")
	shape := []int64{4096, 4096}
	src := mustSharding(t, m, shape, `["gpu", null]`)
	tgt := mustSharding(t, m, shape, `["node", "gpu"]`)
	plan := func(profile string) *Plan {
		f, ok := cost.Profile(profile)
		require.True(t, ok, profile)
		p, err := Reshard(context.Background(), &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: src, Target: tgt, Model: f})
		require.NoError(t, err)
		replay(t, p)
		return p
	}

	tpu := plan("tpu-v5p")
	require.Len(t, tpu.Steps, 1)
	assert.Equal(t, OpAllToAllV, tpu.Steps[0].Op)
	assert.Equal(t, "ici", tpu.Steps[0].Cost.Link)
	assert.Equal(t, tpu.Summary.LowerBoundBytesPerDevice, tpu.Summary.BytesPerDevice, "on one fabric the fewest bytes win")

	gpu := plan("h100")
	for i, st := range gpu.Steps {
		assert.NotEqual(t, "ib", st.Cost.Link, "step %d %s crosses InfiniBand", i, st.Op)
	}
	assert.Greater(t, gpu.Summary.BytesPerDevice, gpu.Summary.LowerBoundBytesPerDevice, "it moves more bytes...")
	var direct *Candidate
	for i, c := range gpu.Summary.Candidates {
		if c.Name == "all_to_all_v" {
			direct = &gpu.Summary.Candidates[i]
		}
	}
	require.NotNil(t, direct, "the direct exchange was priced: %+v", gpu.Summary.Candidates)
	assert.Less(t, gpu.Summary.TimeUS, direct.TimeUS, "...but sooner than the direct exchange over InfiniBand")
	assert.NotEqual(t, ops(tpu), ops(gpu))
}
