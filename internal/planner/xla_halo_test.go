package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// haloWant is one expected halo collective-permute: the dim it fills, its
// source_target_pairs (sorted by sender) and what every sender sends.
type haloWant struct {
	dim   int
	pairs [][2]int
	bytes int64
}

// The expectations are worked by hand from XLA's code (spmd_partitioner.cc
// ReshardFromPartialReplicateWithDynamicSlice / ReshardToPartialReplicateWithAllGather,
// spmd_partitioner_util.cc PadFromPartialReplicateShape,
// TileToPartialReplicateHaloExchange and ExchangeHaloCompact): the windows each shard
// needs, the pieces of them other shards hold, and how the pieces pack into permutes.
// Device ids are row-major over the mesh axes. Elements are f32 (4 bytes).
func TestXLAHaloExchange(t *testing.T) {
	cases := []struct {
		name     string
		mesh     string
		shape    []int64
		src, tgt string
		ops      []Op
		halos    []haloWant // the collective_permutes that carry transfers, in order
		path     []string
		fallback bool
	}{
		{
			// [x] -> [x,y] on a dim of 6. 2-way tiles 3+3, 4-way tiles 2+2+2+0 (padded
			// to 8): x=0 needs the window [0,4), whose element 3 lies on x=1; x=1's
			// window [4,8) is its own data and padding. Each x=1 device sends its first row to the x=0
			// device of its y replica (both replicas get it), then each slices.
			name: "size 6 [x] -> [x,y] on x=2,y=2", mesh: "x=2,y=2", shape: []int64{6, 4},
			src: `["x",null]`, tgt: `[["x","y"],null]`,
			ops:   []Op{OpCollectivePermute, OpSlice},
			halos: []haloWant{{dim: 0, pairs: [][2]int{{2, 0}, {3, 1}}, bytes: 1 * 4 * 4}},
			path:  []string{"partial_dynamic_slice"},
		},
		{
			// [x,y] -> [x], the way back. 4-way tiles [0,2) [2,4) [4,6) [6,6); the 2-way
			// tile of the second pair is [3,6), so shard 2's window is [3,5) and shard
			// 3's [5,7): shard 1 sends element 3 to shard 2, shard 2 element 5 to shard
			// 3 (one permute), then an all-gather over y.
			name: "size 6 [x,y] -> [x] on x=2,y=2", mesh: "x=2,y=2", shape: []int64{6, 4},
			src: `[["x","y"],null]`, tgt: `["x",null]`,
			ops:   []Op{OpCollectivePermute, OpAllGather},
			halos: []haloWant{{dim: 0, pairs: [][2]int{{1, 2}, {2, 3}}, bytes: 1 * 4 * 4}},
			path:  []string{"partial_all_gather"},
		},
		{
			// Size 7 on 4: tiles 2+2+2+1 padded to 8, and 4+3 padded to 8 on 2: the
			// padded tiles nest, so no halo.
			name: "size 7 [x] -> [x,y]: padded tiles nest, no halo", mesh: "x=2,y=2", shape: []int64{7},
			src: `["x"]`, tgt: `[["x","y"]]`,
			ops: []Op{OpSlice}, path: []string{"partial_dynamic_slice"},
		},
		{
			name: "size 7 [x,y] -> [x]: padded tiles nest, no halo", mesh: "x=2,y=2", shape: []int64{7},
			src: `[["x","y"]]`, tgt: `["x"]`,
			ops: []Op{OpAllGather}, path: []string{"partial_all_gather"},
		},
		{
			// 2 -> 8 shards of 10: tiles 5 vs 2 (padded 16), window [0,8) of x=0 takes
			// [5,8) from x=1: three rows to each x=0 device from the x=1 device with
			// its y.
			name: "size 10 [x] -> [x,y] on x=2,y=4", mesh: "x=2,y=4", shape: []int64{10, 2},
			src: `["x",null]`, tgt: `[["x","y"],null]`,
			ops:   []Op{OpCollectivePermute, OpSlice},
			halos: []haloWant{{dim: 0, pairs: [][2]int{{4, 0}, {5, 1}, {6, 2}, {7, 3}}, bytes: 3 * 2 * 4}},
			path:  []string{"partial_dynamic_slice"},
		},
		{
			// 4 -> 16 shards of 18: source tiles 5 (padded 20), target tiles 2 (padded
			// 32), so windows of 8: [0,8) takes [5,8) from shard 1; [8,16) takes
			// [10,15) from shard 2 and [15,16) from shard 3; [16,24) takes shard 3's
			// [16,20) (valid [16,18)). Shard 3 sends to two shards, so two permutes:
			// first 1->0, 2->1, 3->2 carrying each sender's whole buffer [0,5), then
			// 3->1 carrying [0,1).
			name: "size 18 [a] -> [a,b] on a=4,b=4: two permutes", mesh: "a=4,b=4", shape: []int64{18, 2},
			src: `["a",null]`, tgt: `[["a","b"],null]`,
			ops: []Op{OpCollectivePermute, OpCollectivePermute, OpSlice},
			halos: []haloWant{
				{dim: 0, pairs: [][2]int{{4, 0}, {5, 1}, {6, 2}, {7, 3}, {8, 4}, {9, 5}, {10, 6}, {11, 7}, {12, 8}, {13, 9}, {14, 10}, {15, 11}}, bytes: 5 * 2 * 4},
				{dim: 0, pairs: [][2]int{{12, 4}, {13, 5}, {14, 6}, {15, 7}}, bytes: 1 * 2 * 4},
			},
			path: []string{"partial_dynamic_slice"},
		},
		{
			// Two expanded dims: dim 0 first (a row of dim 1's tile of 3), then dim 1
			// over the dim-0 windows of 4 (a column of 4), then one slice.
			name: "size 6x6 [x,y] -> [(x,z0),(y,z1)]: halos on both dims", mesh: "x=2,y=2,z=4", shape: []int64{6, 6},
			src: `["x","y"]`, tgt: `[["x","z:(1)2"],["y","z:(2)2"]]`,
			ops: []Op{OpCollectivePermute, OpCollectivePermute, OpSlice},
			halos: []haloWant{
				{dim: 0, pairs: [][2]int{{8, 0}, {9, 1}, {10, 2}, {11, 3}, {12, 4}, {13, 5}, {14, 6}, {15, 7}}, bytes: 1 * 3 * 4},
				{dim: 1, pairs: [][2]int{{4, 0}, {5, 1}, {6, 2}, {7, 3}, {12, 8}, {13, 9}, {14, 10}, {15, 11}}, bytes: 4 * 1 * 4},
			},
			path: []string{"partial_dynamic_slice"},
		},
		{
			// The source order differs from the compatible one: a full-tile permute to
			// [(x,y)] first, then the halo of the [x,y] -> [x] case, then the all-gather.
			name: "size 6 [(y,x)] -> [x]: permute, halo, all-gather", mesh: "x=2,y=2", shape: []int64{6},
			src: `[["y","x"]]`, tgt: `["x"]`,
			ops:   []Op{OpCollectivePermute, OpCollectivePermute, OpAllGather},
			halos: []haloWant{{dim: 0, pairs: [][2]int{{1, 2}, {2, 3}}, bytes: 4}},
			path:  []string{"partial_all_gather"},
		},
		{
			// 2 -> 3 shards: neither count divides the other, so no compatible
			// sharding, no halo: XLA's fallback, as before.
			name: "2 -> 3 ratio: no halo, XLA falls back", mesh: "x=2,y=3", shape: []int64{6, 4},
			src: `["x",null]`, tgt: `["y",null]`,
			ops: []Op{OpAllGather, OpSlice}, path: []string{"full_rematerialization"}, fallback: true,
		},
		{
			// 2 -> 6 shards of 7: tiles 4 vs 2 (padded 12), windows of 6: x=0's [0,6)
			// takes [4,6) from x=1.
			name: "size 7 [x] -> [x,y] on x=2,y=3: 2 -> 6", mesh: "x=2,y=3", shape: []int64{7},
			src: `["x"]`, tgt: `[["x","y"]]`,
			ops:   []Op{OpCollectivePermute, OpSlice},
			halos: []haloWant{{dim: 0, pairs: [][2]int{{3, 0}, {4, 1}, {5, 2}}, bytes: 2 * 4}},
			path:  []string{"partial_dynamic_slice"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, info := xplan(t, tc.mesh, tc.shape, 32, tc.src, tc.tgt)
			checkXLA(t, p, info)
			assert.Equal(t, tc.ops, ops(p))
			assert.Equal(t, tc.path, info.Path)
			assert.Equal(t, tc.fallback, info.Fallback)
			var got []haloWant
			for _, st := range p.Steps {
				if st.Halo == nil {
					continue
				}
				assert.True(t, st.Before.SameLayout(st.After), "a halo exchange keeps the sharding")
				assert.Equal(t, st.Dim, st.Halo.Dim)
				got = append(got, haloWant{dim: st.Halo.Dim, pairs: st.Halo.Pairs(), bytes: st.BytesPerDevice})
			}
			assert.Equal(t, tc.halos, got)
		})
	}
}

// TestXLAHaloTransfers checks the [x] -> [x,y] case's transfers field by field: the
// valid rows, where they sit in the sender's buffer and in the receiver's window.
func TestXLAHaloTransfers(t *testing.T) {
	p, _ := xplan(t, "x=2,y=2", []int64{6, 4}, 32, `["x",null]`, `[["x","y"],null]`)
	require.NotNil(t, p.Steps[0].Halo)
	got := p.Steps[0].Halo.Transfers()
	want := []Transfer{
		{From: 2, To: 0, Ranges: Range{{3, 4}, {0, 4}}, SourceLocal: Range{{0, 1}, {0, 4}}, TargetLocal: Range{{3, 4}, {0, 4}}, Bytes: 16},
		{From: 3, To: 1, Ranges: Range{{3, 4}, {0, 4}}, SourceLocal: Range{{0, 1}, {0, 4}}, TargetLocal: Range{{3, 4}, {0, 4}}, Bytes: 16},
	}
	assert.Equal(t, want, got)
	runs, ok := p.Steps[0].Halo.PairRuns(4)
	require.True(t, ok)
	var expanded [][2]int
	for _, r := range runs {
		expanded = append(expanded, r.Expand()...)
	}
	assert.ElementsMatch(t, p.Steps[0].Halo.Pairs(), expanded)
	truns, ok := p.Steps[0].Halo.TransferRuns(4)
	require.True(t, ok)
	var texp []Transfer
	for _, r := range truns {
		texp = append(texp, r.Expand()...)
	}
	assert.ElementsMatch(t, got, texp)
}

// TestXLAHaloPricing: a halo permute is priced by routing its transfers on a model with
// links, and costs less than moving whole tiles would.
func TestXLAHaloPricing(t *testing.T) {
	f, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	m := mustMesh(t, "x=2,y=2")
	shape := []int64{6, 4096}
	r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: mustSharding(t, m, shape, `["x",null]`), Target: mustSharding(t, m, shape, `[["x","y"],null]`), Model: f}
	p, info, err := ReshardXLA(context.Background(), r)
	require.NoError(t, err)
	checkXLA(t, p, info)
	st := p.Steps[0]
	require.NotNil(t, st.Halo)
	assert.Equal(t, int64(4096*4), st.BytesPerDevice, "one row")
	assert.Positive(t, st.Cost.TimeUS)
	assert.Equal(t, "ici", st.Cost.Link)
	full := r.Model.Estimate(cost.Collective{Kind: cost.CollectivePermute, Bytes: 3 * 4096 * 4, Mesh: m, Axes: st.MeshAxes})
	assert.Less(t, st.Cost.TimeUS, full.TimeUS, "a halo row costs less than a whole tile")
}

// TestXLAPlansReplayOnRandomUnevenProblems: XLA's predicted plans (and the chains
// through their suggestions) replay on random reshards with odd dim sizes, where tiles
// are uneven and halo exchanges happen.
func TestXLAPlansReplayOnRandomUnevenProblems(t *testing.T) {
	n := 300
	if !*long {
		n = 80
	}
	rng := rand.New(rand.NewPCG(5, 9))
	halos, a2av := 0, 0
	for i := range n {
		m, shape, src, tgt := randomReshard(t, rng, 2, 64, []int64{1, 3, 5, 7})
		t.Run(fmt.Sprintf("%d %s %v %s->%s", i, m, shape, src, tgt), func(t *testing.T) {
			r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: src, Target: tgt, Model: testModel{}}
			p, info, err := ReshardXLA(context.Background(), r)
			require.NoError(t, err)
			checkXLA(t, p, info)
			for _, st := range p.Steps {
				if st.Halo != nil {
					halos++
					break
				}
			}
			if slices.Contains(ops(p), OpAllToAllV) {
				a2av++
			}
		})
	}
	t.Logf("%d plans: %d with halo exchanges, %d with all_to_all_v", n, halos, a2av)
	assert.Positive(t, halos, "the set exercises halo exchanges")
}
