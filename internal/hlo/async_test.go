package hlo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// asyncModule has the async forms XLA schedules on GPUs and TPUs (operand shapes printed
// inline, as older XLA prints them): an all-gather-start/done pair that gathers a
// [2,128] tile of a [8,128] array over x back whole, a dynamic-slice that keeps one row
// block of it, a collective-permute-start/done, and a reduce-scatter and an all-reduce
// over y.
const asyncModule = `HloModule jit_async, is_scheduled=true, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (p: f32[2,128]) -> f32[2,128] {
  %p = f32[2,128]{1,0} parameter(0), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  %ags = (f32[2,128]{1,0}, f32[8,128]{1,0}) all-gather-start(f32[2,128]{1,0} %p), channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}, use_global_device_ids=true
  %agd = f32[8,128]{1,0} all-gather-done((f32[2,128]{1,0}, f32[8,128]{1,0}) %ags)
  %pid = u32[] partition-id()
  %c2 = u32[] constant(2)
  %div = u32[] divide(u32[] %pid, u32[] %c2)
  %c2b = u32[] constant(2)
  %row = u32[] multiply(u32[] %div, u32[] %c2b)
  %zero = u32[] constant(0)
  %ds = f32[2,128]{1,0} dynamic-slice(f32[8,128]{1,0} %agd, u32[] %row, u32[] %zero), dynamic_slice_sizes={2,128}
  %cps = (f32[2,128]{1,0}, f32[2,128]{1,0}, u32[], u32[]) collective-permute-start(f32[2,128]{1,0} %ds), channel_id=2, source_target_pairs={{0,1},{1,0},{2,3},{3,2},{4,5},{5,4},{6,7},{7,6}}
  %cpd = f32[2,128]{1,0} collective-permute-done((f32[2,128]{1,0}, f32[2,128]{1,0}, u32[], u32[]) %cps)
  %rs = f32[1,128]{1,0} reduce-scatter(f32[2,128]{1,0} %cpd), channel_id=3, replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}, to_apply=%add
  %ar = f32[1,128]{1,0} all-reduce(f32[1,128]{1,0} %rs), channel_id=4, replica_groups={{0,1},{2,3},{4,5},{6,7}}, to_apply=%add
  ROOT %out = f32[2,128]{1,0} copy(f32[2,128]{1,0} %cpd)
}
`

func TestAsyncForms(t *testing.T) {
	m, err := Parse(asyncModule, Limits{})
	require.NoError(t, err)
	mesh, err := sharding.ParseMeshString("x=4,y=2", "mesh")
	require.NoError(t, err)
	model, _ := cost.Profile("tpu-v5p")
	a, err := Analyze(context.Background(), m, Options{Mesh: mesh, Model: model})
	require.NoError(t, err)
	type want struct {
		name      string
		kind      cost.Kind
		axes      string
		in, out   int64
		received  int64
		groupSize int
	}
	const tile = 2 * 128 * 4
	wants := []want{
		{"ags", cost.AllGather, "x", tile, 4 * tile, 3 * tile, 4},
		{"cps", cost.CollectivePermute, "y", tile, tile, tile, 2},
		{"rs", cost.ReduceScatter, "y", tile, tile / 2, tile / 2, 2},
		{"ar", cost.AllReduce, "y", tile / 2, tile / 2, tile / 2, 2},
	}
	require.Len(t, a.Collectives, len(wants))
	for i, w := range wants {
		c := a.Collectives[i]
		assert.Equal(t, w.name, c.Name)
		assert.Equal(t, w.kind, c.Kind, c.Name)
		assert.Equal(t, w.axes, axesText(c.MeshAxes), "%s: %s", c.Name, c.AxesNote)
		assert.Equal(t, w.in, c.InBytes, c.Name)
		assert.Equal(t, w.out, c.OutBytes, c.Name)
		assert.Equal(t, w.received, c.BytesPerDevice, c.Name)
		assert.Equal(t, w.groupSize, c.GroupSize, c.Name)
		assert.Positive(t, c.Cost.TimeUS, c.Name)
	}
	// The async gather makes the [8,128] array whole (4 tiles, one gather over x of 4)
	// and the dynamic-slice keeps row block pid/2: the remat, its sides read back.
	require.Len(t, a.Remats, 1)
	r := a.Remats[0]
	assert.Equal(t, []string{"ags"}, r.Gathers)
	assert.Equal(t, "ds", r.Slice)
	require.NotNil(t, r.From, r.Note)
	require.NotNil(t, r.To, r.Note)
	assert.Equal(t, `[{"x"}, {}]`, r.From.Body())
	assert.Equal(t, `[{"x"}, {}]`, r.To.Body())
	assert.True(t, a.Collectives[0].FullRematerialization)
}
