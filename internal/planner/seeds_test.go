package planner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reshard examples of seed 000 (MLIR mesh notes) and seed 003 (JAX/XLA dumps).
func TestSeedReshards(t *testing.T) {
	cases := []struct {
		name     string
		mesh     string
		shape    []int64
		bits     int
		src, tgt string
		ops      []Op  // expected schedule (nil: only replay and bounds)
		bytes    int64 // expected summary bytes per device (-1: unchecked)
		lb       int64
	}{
		{"000 swap axis order [[0,1]]->[[1,0]]", "a=2,b=3", []int64{6}, 8, `[[0,1]]`, `[[1,0]]`, []Op{OpCollectivePermute}, 1, 1},
		{"000 [[0,1]]->[[1]] (ERRATA: permute, then gather)", "a=2,b=3", []int64{6}, 8, `[[0,1]]`, `[[1]]`, nil, 2, 2},
		{"000 [[],[0,1]]->[[],[0]]: gather the minor axis", "a=2,b=3", []int64{4, 6}, 8, `[[],[0,1]]`, `[[],[0]]`, []Op{OpAllGather}, 8, 8},
		{"000 [[0],[1,2]]->[[0],[2]]: gather, then slice", "a=2,b=2,c=2", []int64{4, 8}, 8, `[[0],[1,2]]`, `[[0],[2]]`, []Op{OpAllGather, OpSlice}, 12, 8},
		{"000 6x6 [[0],[1]]->[[1],[0]] on 2x3", "a=2,b=3", []int64{6, 6}, 8, `[[0],[1]]`, `[[1],[0]]`, nil, -1, -1},
		{"000 6x6 [[0],[1]]->[[1],[0]] on 2x6", "a=2,b=6", []int64{6, 6}, 8, `[[0],[1]]`, `[[1],[0]]`, nil, -1, -1},
		{"000 6x6 [[0],[]]->[[],[0]] on 3 (all_to_all)", "a=3", []int64{6, 6}, 8, `[[0],[]]`, `[[],[0]]`, []Op{OpAllToAll}, 8, 8},
		{"000 4x4 [[0],[1,2]]->[[0,1],[2]]", "a=2,b=2,c=2", []int64{4, 4}, 8, `[[0],[1,2]]`, `[[0,1],[2]]`, nil, -1, 2},
		{"000 [[3,2],[],[0,1]]->[[0],[1,2],[]]", "a=2,b=2,c=2,d=2", []int64{8, 8, 8}, 8, `[[3,2],[],[0,1]]`, `[[0],[1,2],[]]`, nil, -1, -1},
		{"003 case 1 [X,-]->[Y,X]", "X=2,Y=4", []int64{2048, 2048}, 32, `["X",null]`, `["Y","X"]`, []Op{OpSlice, OpCollectivePermute}, 2 << 20, 2 << 20},
		{"003 case 2 [Y,-]->[X,Y]", "X=2,Y=4", []int64{2048, 2048}, 32, `["Y",null]`, `["X","Y"]`, nil, -1, 2 << 20},
		{"003 case 3 [-,(X,T)]->[(D,Y,X,T),-]", "C=1,D=2,Y=8,X=4,T=4", []int64{2048, 2048}, 32, `[null,["X","T"]]`, `[["D","Y","X","T"],null]`, nil, -1, 60 << 10},
		{"003 case 4 [D,(X,Y)]->[-,(D,Y,X,T)]", "C=1,D=2,Y=8,X=4,T=4", []int64{2048, 2048}, 32, `["D",["X","Y"]]`, `[null,["D","Y","X","T"]]`, nil, -1, 64 << 10},
		{"003 case 2 transposed to uneven dims", "X=2,Y=4", []int64{2047, 2045}, 32, `["Y",null]`, `["X","Y"]`, nil, -1, -1},
		{"uneven: 7 rows from 2-way to 4-way", "x=2,y=2", []int64{7, 3}, 32, `["x",null]`, `[["x","y"],null]`, nil, -1, -1},
		{"uneven: 5 rows from 2-way to 4-way (slice invalid)", "x=2,y=2", []int64{5, 3}, 32, `["x",null]`, `[["x","y"],null]`, nil, -1, -1},
		{"dims smaller than the shard count", "x=4,y=4", []int64{2, 3}, 32, `[["x","y"],null]`, `[null,["y","x"]]`, nil, -1, -1},
		{"non-power-of-two: [x]->[y] on x=4,y=6", "x=4,y=6", []int64{24}, 32, `["x"]`, `["y"]`, nil, -1, -1},
		{"partial sums reduce-scatter", "x=4", []int64{16, 8}, 32, `{"dims":[{"axes":[]},{"axes":[]}],"unreduced":["x"]}`, `["x",null]`, []Op{OpReduceScatter}, 384, 384},
		{"partial sums all-reduce", "x=4,y=2", []int64{16, 8}, 32, `{"dims":[{"axes":["y"]},{"axes":[]}],"unreduced":["x"]}`, `["y",null]`, []Op{OpAllReduce}, 384, 384},
		{"identity", "x=4", []int64{16}, 32, `["x"]`, `["x"]`, []Op{}, 0, 0},
		{"replicated to sharded", "x=4", []int64{16}, 32, `[null]`, `["x"]`, []Op{OpSlice}, 0, 0},
		{"sharded to replicated", "x=4", []int64{16}, 32, `["x"]`, `[null]`, []Op{OpAllGather}, 48, 48},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(t, tc.mesh, tc.shape, tc.bits, tc.src, tc.tgt)
			for i, s := range p.Steps {
				t.Logf("step %d %s %v: %s -> %s bytes=%d", i, s.Op, s.MeshAxes, s.Before, s.After, s.BytesPerDevice)
			}
			t.Logf("summary %+v", p.Summary)
			replay(t, p)
			assert.False(t, p.Summary.FullRematerialization)
			if tc.ops != nil {
				assert.Equal(t, tc.ops, ops(p))
			}
			if tc.bytes >= 0 {
				assert.Equal(t, tc.bytes, p.Summary.BytesPerDevice)
			}
			if tc.lb >= 0 {
				assert.Equal(t, tc.lb, p.Summary.LowerBoundBytesPerDevice)
			}
			// Within a budget of the larger end's buffer there is always a plan (the
			// direct exchange holds no more).
			ends := max(bufferBytes(p.Request, p.Request.Source), bufferBytes(p.Request, p.Request.Target))
			r := *p.Request
			r.MemoryBudget = ends
			pb, err := Reshard(context.Background(), &r)
			require.NoError(t, err)
			require.LessOrEqual(t, pb.Summary.PeakBytesPerDevice, ends)
			require.GreaterOrEqual(t, pb.Summary.TimeUS, p.Summary.TimeUS*(1-1e-9), "a budget never makes a plan cheaper")
			replay(t, pb)
		})
	}
}
