package planner

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// benchGrid is BenchmarkReshard's grid of meshes and reshards (TestAStarMatchesDijkstra
// also plans it with and without the heuristic).
var benchGrid = []struct {
	mesh     string
	shape    []int64
	src, tgt string
}{
	{"x=2,y=4", []int64{2048, 2048}, `["x",null]`, `["y","x"]`},
	{"C=1,D=2,Y=8,X=4,T=4", []int64{2048, 2048}, `[null,["X","T"]]`, `[["D","Y","X","T"],null]`},
	{"C=1,D=2,Y=8,X=4,T=4", []int64{2048, 2048}, `["D",["X","Y"]]`, `[null,["D","Y","X","T"]]`},
	{"a=4,b=4,c=4,d=2,e=2", []int64{64, 128, 256}, `["a",["b","c"],"d"]`, `[["c","e"],"a",["b","d"]]`},
	{"a=16,b=16,c=16,d=16", []int64{4096, 4096}, `[["a","b"],["c","d"]]`, `[["c","d"],["a","b"]]`},
	{"a=16,b=16,c=16,d=16", []int64{512, 1024, 2048}, `["a","b",["c","d"]]`, `[["d"],["a","c"],"b"]`},
}

// BenchmarkReshard is the planning grid: cost model x mesh size/rank x tensor rank.
// Lists (pairs, transfers) are not built here: the HTTP layer builds them only when
// asked. model=test is the fixed topology-free testModel; model=tpu-v5p is the built-in
// profile, a cost.Fabric whose LowerBound the search can use as an A* heuristic.
func BenchmarkReshard(b *testing.B) {
	grid := benchGrid
	tpu, ok := cost.Profile("tpu-v5p")
	require.True(b, ok)
	models := []struct {
		name  string
		model cost.Model
	}{{"test", testModel{}}, {"tpu-v5p", tpu}}
	for _, md := range models {
		for _, g := range grid {
			m := mustMesh(b, g.mesh)
			src := mustSharding(b, m, g.shape, g.src)
			tgt := mustSharding(b, m, g.shape, g.tgt)
			name := fmt.Sprintf("model=%s/devices=%d/mesh_rank=%d/tensor_rank=%d/%s->%s", md.name, m.NumDevices(), len(m.Axes), len(g.shape), g.src, g.tgt)
			b.Run(name, func(b *testing.B) {
				memos := newTestMemos(b)
				r := &Request{Mesh: m, Shape: g.shape, ElemBits: 32, Source: src, Target: tgt, Model: md.model, Memos: memos}
				p, err := Reshard(context.Background(), r)
				require.NoError(b, err)
				require.True(b, p.Steps == nil || p.Steps[len(p.Steps)-1].After.SameLayout(tgt))
				b.ReportAllocs()
				for b.Loop() {
					r := &Request{Mesh: m, Shape: g.shape, ElemBits: 32, Source: src, Target: tgt, Model: md.model, Memos: memos}
					if _, err := Reshard(context.Background(), r); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(p.Summary.Efficiency, "efficiency")
				b.ReportMetric(float64(p.Summary.SearchExpansions), "expansions")
			})
		}
	}
}
