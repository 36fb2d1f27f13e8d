package planner

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

func xplan(t testing.TB, mesh string, shape []int64, bits int, src, tgt string) (*Plan, *XLAInfo) {
	m := mustMesh(t, mesh)
	r := &Request{Mesh: m, Shape: shape, ElemBits: bits, Source: mustSharding(t, m, shape, src), Target: mustSharding(t, m, shape, tgt), Model: testModel{}}
	p, info, err := ReshardXLA(context.Background(), r)
	require.NoError(t, err)
	return p, info
}

func logPlan(t *testing.T, p *Plan, info *XLAInfo) {
	t.Helper()
	for i, s := range p.Steps {
		t.Logf("step %d %s %v g=%d: %s -> %s bytes=%d", i, s.Op, s.MeshAxes, s.GroupSize, s.Before, s.After, s.BytesPerDevice)
	}
	t.Logf("summary %+v", p.Summary)
	if info != nil {
		t.Logf("path %v; %s -> %s; fallback %v", info.Path, info.SourceHlo, info.TargetHlo, info.Fallback)
		for _, s := range info.Suggested {
			t.Logf("suggest %s | %s", s.PartitionSpec, s.Shardy)
		}
	}
}

func sortedPairs(ps [][2]int) [][2]int {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b [2]int) int { return a[0] - b[0] })
	return out
}

// checkXLA runs the invariants every XLA plan obeys: it replays, it is labelled xla, a
// fallback carries a warning naming both HloShardings, and every suggested chain
// passes the emulation hop by hop without fallback and replays.
func checkXLA(t *testing.T, p *Plan, info *XLAInfo) {
	t.Helper()
	logPlan(t, p, info)
	replay(t, p)
	assert.Equal(t, XLA, p.Summary.Strategy)
	if !info.Fallback {
		assert.Empty(t, info.Warning)
		assert.False(t, p.Summary.FullRematerialization)
		return
	}
	assert.Contains(t, info.Warning, "[SPMD] Involuntary full rematerialization. The compiler cannot go from sharding "+info.SourceHlo+" to "+info.TargetHlo+" efficiently")
	if info.Chain == nil {
		return
	}
	logPlan(t, info.Chain, nil)
	replay(t, info.Chain)
	r := p.Request
	hops := []sharding.Sharding{r.Source}
	for _, s := range info.Suggested {
		hops = append(hops, s.Sharding)
		ps, ok := s.Sharding.PartitionSpecText()
		assert.Equal(t, ps, s.PartitionSpec)
		assert.Equal(t, ok, s.PartitionSpec != "")
		assert.Equal(t, s.Sharding.Text(r.Mesh.Name), s.Shardy)
	}
	hops = append(hops, r.Target)
	for i := 0; i+1 < len(hops); i++ {
		hp, fb, err := xlaHop(r, hops[i], hops[i+1])
		require.NoError(t, err)
		assert.Falsef(t, fb, "hop %d %s -> %s falls back", i, hops[i], hops[i+1])
		replay(t, hp)
	}
	assert.False(t, info.Chain.Summary.FullRematerialization)
}

// The four JAX/XLA dumps of seed 003.
func TestXLASeed003(t *testing.T) {
	const small, big = "X=2,Y=4", "C=1,D=2,Y=8,X=4,T=4"
	shape := []int64{2048, 2048}

	t.Run("case 1 [X,-]->[Y,X]: dynamic-slice + collective-permute", func(t *testing.T) {
		p, info := xplan(t, small, shape, 32, `["X",null]`, `["Y","X"]`)
		checkXLA(t, p, info)
		require.Equal(t, []Op{OpSlice, OpCollectivePermute}, ops(p))
		assert.Equal(t, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", info.SourceHlo)
		assert.Equal(t, "{devices=[4,2]<=[2,4]T(1,0)}", info.TargetHlo)
		assert.Equal(t, []int64{512, 1024}, p.Steps[0].LocalShapeAfter)
		cp := p.Steps[1]
		// source_target_pairs={{0,0},{1,4},{2,1},{3,5},{4,2},{5,6},{6,3},{7,7}}
		assert.Equal(t, [][2]int{{0, 0}, {1, 4}, {2, 1}, {3, 5}, {4, 2}, {5, 6}, {6, 3}, {7, 7}}, sortedPairs(Pairs(p.Request.Mesh, shape, cp.Before, cp.After)))
		assert.Equal(t, int64(2<<20), p.Summary.BytesPerDevice)
		assert.Equal(t, []string{"partial_dynamic_slice"}, info.Path)
	})

	t.Run("case 2 [Y,-]->[X,Y]: slice + all-to-all + collective-permute", func(t *testing.T) {
		p, info := xplan(t, small, shape, 32, `["Y",null]`, `["X","Y"]`)
		checkXLA(t, p, info)
		require.Equal(t, []Op{OpSlice, OpAllToAll, OpCollectivePermute}, ops(p))
		assert.Equal(t, "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}", info.SourceHlo)
		assert.Equal(t, "{devices=[2,4]<=[8]}", info.TargetHlo)
		// replica_groups=[4,2]<=[2,2,2]T(1,0,2): pairs differing in the minor half of Y.
		a2a := p.Steps[1]
		assert.Equal(t, []sharding.AxisRef{{Name: "Y", Pre: 2, Size: 2, Of: 4}}, a2a.MeshAxes)
		assert.Equal(t, 2, a2a.GroupSize)
		assert.Equal(t, 4, a2a.GroupCount)
		assert.Equal(t, []int64{512, 1024}, a2a.LocalShapeBefore) // f32[512,1,512] x 2 pieces
		assert.Equal(t, []int64{1024, 512}, a2a.LocalShapeAfter)
		cp := p.Steps[2]
		// source_target_pairs={{0,0},{1,1},{4,2},{5,3},{2,4},{3,5},{6,6},{7,7}}
		assert.Equal(t, [][2]int{{0, 0}, {1, 1}, {2, 4}, {3, 5}, {4, 2}, {5, 3}, {6, 6}, {7, 7}}, sortedPairs(Pairs(p.Request.Mesh, shape, cp.Before, cp.After)))
		assert.Equal(t, []string{"replication_to_dim", "all_to_all"}, info.Path)
	})

	t.Run("case 3 [-,(X,T)]->[(D,Y,X,T),-]: slices + one 16-way all-to-all", func(t *testing.T) {
		p, info := xplan(t, big, shape, 32, `[null,["X","T"]]`, `[["D","Y","X","T"],null]`)
		checkXLA(t, p, info)
		require.Equal(t, []Op{OpSlice, OpAllToAll}, ops(p))
		assert.Equal(t, "{devices=[1,16,16]<=[16,16]T(1,0) last_tile_dim_replicate}", info.SourceHlo)
		assert.Equal(t, "{devices=[256,1]<=[256]}", info.TargetHlo)
		a2a := p.Steps[1]
		// replica_groups=[16,16]<=[256]: 16 consecutive devices, the X and T axes.
		assert.Equal(t, 16, a2a.GroupSize)
		assert.Equal(t, 16, a2a.GroupCount)
		assert.Equal(t, []string{"X", "T"}, []string{a2a.MeshAxes[0].Name, a2a.MeshAxes[1].Name})
		assert.Equal(t, []int64{8, 2048}, a2a.LocalShapeAfter)
		assert.Equal(t, p.Summary.LowerBoundBytesPerDevice, p.Summary.BytesPerDevice) // 60 KiB, the bound
		assert.Equal(t, []string{"replication_to_dim", "merge_split"}, info.Path)
	})

	t.Run("case 4 [D,(X,Y)]->[-,(D,Y,X,T)]: involuntary full rematerialization", func(t *testing.T) {
		p, info := xplan(t, big, shape, 32, `["D",["X","Y"]]`, `[null,["D","Y","X","T"]]`)
		checkXLA(t, p, info)
		require.Equal(t, []Op{OpAllGather, OpAllGather, OpSlice}, ops(p))
		// all-gather dimensions={1} replica_groups=[8,32], then dimensions={0} [128,2].
		assert.Equal(t, 1, p.Steps[0].Dim)
		assert.Equal(t, 32, p.Steps[0].GroupSize)
		assert.Equal(t, 0, p.Steps[1].Dim)
		assert.Equal(t, 2, p.Steps[1].GroupSize)
		assert.Equal(t, []int64{2048, 8}, p.Steps[2].LocalShapeAfter)
		assert.Equal(t, int64(15.75*(1<<20)), p.Summary.BytesPerDevice)
		assert.Equal(t, int64(64<<10), p.Summary.LowerBoundBytesPerDevice)
		assert.True(t, p.Summary.FullRematerialization)
		assert.True(t, info.Fallback)
		assert.Equal(t, "{devices=[2,32,4]<=[2,8,4,4]T(0,2,1,3) last_tile_dim_replicate}", info.SourceHlo)
		assert.Equal(t, "{devices=[1,256]<=[256]}", info.TargetHlo)
		assert.Equal(t, "[SPMD] Involuntary full rematerialization. The compiler cannot go from sharding {devices=[2,32,4]<=[2,8,4,4]T(0,2,1,3) last_tile_dim_replicate} to {devices=[1,256]<=[256]} efficiently", info.Warning[:strings.Index(info.Warning, " efficiently")+len(" efficiently")])
		require.Len(t, info.Suggested, 1)
		assert.Equal(t, "P('D', ('X','Y','T'))", info.Suggested[0].PartitionSpec)
		assert.Equal(t, `sharding<@mesh, [{"D"}, {"X", "Y", "T"}]>`, info.Suggested[0].Shardy)
		require.NotNil(t, info.Chain)
		assert.Equal(t, []Op{OpSlice, OpAllToAll, OpCollectivePermute}, ops(info.Chain))
		assert.Equal(t, int64(96<<10), info.Chain.Summary.BytesPerDevice)
	})
}

// One row per ReshardNoCache branch, with cases where it applies and where it does not.
func TestXLADispatch(t *testing.T) {
	cases := []struct {
		name     string
		mesh     string
		shape    []int64
		src, tgt string
		path     []string
		ops      []Op // nil: unchecked
		fallback bool
	}{
		{"identity", "x=4", []int64{16}, `["x"]`, `["x"]`, nil, []Op{}, false},
		{"replicated source: dynamic-slice", "x=2,y=4", []int64{8, 8}, `[null,null]`, `["x","y"]`, []string{"replicated_source"}, []Op{OpSlice}, false},
		{"replicated target: all-gathers, no remat flag", "x=2,y=4", []int64{8, 8}, `["x","y"]`, `[null,null]`, []string{"replicate"}, []Op{OpAllGather, OpAllGather}, false},

		{"collective-permute: same counts, other axes", "x=2,y=2", []int64{8}, `["x"]`, `["y"]`, []string{"collective_permute"}, []Op{OpCollectivePermute}, false},
		{"collective-permute: order within a dim", "x=2,y=4", []int64{16, 4}, `[["x","y"],null]`, `[["y","x"],null]`, []string{"collective_permute"}, []Op{OpCollectivePermute}, false},
		{"collective-permute: partially replicated, uneven", "x=2,y=2,z=2", []int64{7, 5}, `["x","y"]`, `["y","x"]`, []string{"collective_permute"}, []Op{OpCollectivePermute}, false},

		{"all-to-all: both partial, swap dims", "x=2,y=4", []int64{16, 16}, `["x",null]`, `[null,"x"]`, []string{"all_to_all"}, []Op{OpAllToAll}, false},
		{"all-to-all: tiled swap of counts, then permute", "x=2,y=4", []int64{16, 16}, `["x","y"]`, `["y","x"]`, []string{"all_to_all"}, []Op{OpAllToAll, OpCollectivePermute}, false},
		{"all-to-all on uneven dims: flat-ceil tiles stay aligned", "x=4", []int64{5, 6}, `["x",null]`, `[null,"x"]`, []string{"all_to_all"}, nil, false},
		{"all-to-all does not apply: partial vs tiled (case 1 goes to dynamic-slice)", "X=2,Y=4", []int64{64, 64}, `["X",null]`, `["Y","X"]`, []string{"partial_dynamic_slice"}, []Op{OpSlice, OpCollectivePermute}, false},

		{"partial dynamic-slice: refinement is one slice", "x=2,y=2", []int64{8, 8}, `["x",null]`, `[["x","y"],null]`, []string{"partial_dynamic_slice"}, []Op{OpSlice}, false},
		{"partial dynamic-slice on uneven dims: halo exchange", "x=2,y=2", []int64{5, 3}, `["x",null]`, `[["x","y"],null]`, []string{"partial_dynamic_slice"}, []Op{OpCollectivePermute, OpSlice}, false},
		{"partial dynamic-slice does not apply: 2 % 4 != 0 (rule c instead)", "X=2,Y=4", []int64{64, 64}, `["Y",null]`, `["X","Y"]`, []string{"replication_to_dim", "all_to_all"}, nil, false},

		{"partial all-gather: coarsening", "x=2,y=2", []int64{8, 8}, `[["x","y"],null]`, `["x",null]`, []string{"partial_all_gather"}, []Op{OpAllGather}, false},
		{"partial all-gather after a permute to the compatible order", "x=2,y=2", []int64{8, 8}, `[["y","x"],null]`, `["x",null]`, []string{"partial_all_gather"}, []Op{OpCollectivePermute, OpAllGather}, false},
		{"partial all-gather on uneven dims: halo exchange", "x=2,y=2", []int64{5, 3}, `[["x","y"],null]`, `["x",null]`, []string{"partial_all_gather"}, nil, false},

		{"narrow partial all-to-all from partial", "a=2,b=3", []int64{6, 6}, `[null,"a"]`, `["a","b"]`, []string{"partial_all_to_all"}, []Op{OpAllToAll, OpSlice}, false},
		{"narrow partial all-to-all to partial", "a=2,b=3", []int64{6, 6}, `["a","b"]`, `[null,"a"]`, []string{"partial_all_to_all"}, []Op{OpAllGather, OpAllToAll}, false},
		{"narrow partial all-to-all, 3 % 4 != 0", "a=2,b=3,c=2", []int64{12, 12}, `[null,"b"]`, `["b",["a","c"]]`, []string{"partial_all_to_all"}, []Op{OpAllToAll, OpSlice}, false},
		{"narrow partial all-to-all does not apply: other device order", "a=2,b=3,c=2", []int64{12, 12}, `[null,"b"]`, `["b",["c","a"]]`, []string{"full_rematerialization"}, nil, true},
		{"partial dynamic-slice wins over the narrow all-to-all", "a=2,b=3", []int64{6, 6}, `[null,"a"]`, `["b","a"]`, []string{"partial_dynamic_slice"}, []Op{OpSlice}, false},

		{"merge/split: [4,4]->[16,1]", "a=4,b=4", []int64{16, 16}, `["a","b"]`, `[["a","b"],null]`, []string{"merge_split"}, []Op{OpAllToAll}, false},
		{"merge/split does not apply: padded size 8 not divisible by 16", "a=4,b=4", []int64{6, 16}, `["a","b"]`, `[["a","b"],null]`, []string{"full_rematerialization"}, nil, true},
		{"rule (b): replicate a dim, then all-to-all", "a=2,b=3,c=2", []int64{12, 12}, `["a","b"]`, `[null,"c"]`, []string{"replicate_dim", "all_to_all"}, []Op{OpAllGather, OpAllToAll, OpCollectivePermute}, false},
		{"rule (c): replication into a count-1 dim", "X=2,Y=4", []int64{2048, 2048}, `["Y",null]`, `["X","Y"]`, []string{"replication_to_dim", "all_to_all"}, []Op{OpSlice, OpAllToAll, OpCollectivePermute}, false},
		{"rule (c) does not apply: no count-1 dim (case 4)", "D=2,Y=8,X=4,T=4", []int64{256, 256}, `["D",["X","Y"]]`, `[null,["D","Y","X","T"]]`, []string{"full_rematerialization"}, nil, true},

		{"fallback (a): [2,1,4]->[1,8,1], jax#21562", "p=2,q=2,r=2", []int64{8, 8, 8}, `["p",null,["q","r"]]`, `[null,["p","q","r"],null]`, []string{"full_rematerialization"}, []Op{OpAllGather, OpAllGather, OpSlice}, true},
		{"fallback (c): [16,1]->[1,4]+repl4, jax#18591", "a=4,b=4", []int64{64, 64}, `[["a","b"],null]`, `[null,"a"]`, []string{"full_rematerialization"}, nil, true},
		{"group equal dims: fallback inside the groups", "w=2,p=2,q=2,r=2", []int64{4, 8, 8, 8}, `["w","p",null,["q","r"]]`, `["w",null,["p","q","r"],null]`, []string{"group_equal_dims", "full_rematerialization"}, []Op{OpAllGather, OpAllGather, OpSlice}, true},
		{"uneven case 2", "X=2,Y=4", []int64{2047, 2045}, `["Y",null]`, `["X","Y"]`, nil, nil, false},
		{"partial sums are all-reduced first", "x=4,y=2", []int64{16, 8}, `{"dims":[{"axes":["y"]},{"axes":[]}],"unreduced":["x"]}`, `["y",null]`, nil, []Op{OpAllReduce}, false},
		{"kept partial sums are not replication", "x=4,y=2", []int64{16, 8}, `{"dims":[{"axes":["y"]},{"axes":[]}],"unreduced":["x"]}`, `{"dims":[{"axes":[]},{"axes":["y"]}],"unreduced":["x"]}`, []string{"all_to_all"}, []Op{OpAllToAll}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, info := xplan(t, tc.mesh, tc.shape, 32, tc.src, tc.tgt)
			checkXLA(t, p, info)
			if tc.path != nil {
				assert.Equal(t, tc.path, info.Path)
			}
			if tc.ops != nil {
				assert.Equal(t, tc.ops, ops(p))
			}
			assert.Equal(t, tc.fallback, info.Fallback)
			if tc.fallback {
				assert.NotEmpty(t, info.Warning)
				grouped := slices.Contains(info.Path, "group_equal_dims")
				assert.Equal(t, !grouped, p.Summary.FullRematerialization, "full remat unless the fallback runs inside device groups")
				if !strings.Contains(tc.name, "padded") {
					assert.NotEmpty(t, info.Suggested, "suggestions avoid the fallback")
				}
			}
		})
	}
}

// xlaHop emulates one hop and reports whether XLA falls back on it.
func xlaHop(r *Request, from, to sharding.Sharding) (*Plan, bool, error) {
	h := *r
	h.Source, h.Target = from, to
	p, e, err := xlaPlan(&h)
	if err != nil {
		return nil, false, err
	}
	return p, e.fallback, nil
}
