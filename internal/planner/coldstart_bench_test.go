package planner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// firstReshards are reshards on 65,536 devices whose planning, in a process that has
// priced nothing on their mesh, is mostly the router's digit units: what each digit
// permutation and exchange the search meets costs on the fabric and mesh.
var firstReshards = []struct {
	name, model, mesh string
	shape             []int64
	src, tgt          string
}{
	{"transpose_256x256", "tpu-v5p", "a=256,b=256", []int64{65536, 65536}, `[["a","b"],null]`, `[null,["a","b"]]`},
	{"swap_256x256", "tpu-v5p", "a=256,b=256", []int64{65536, 65536}, `["a","b"]`, `["b","a"]`},
	{"swap_16^4", "tpu-v5p", "a=16,b=16,c=16,d=16", []int64{65536, 65536}, `[["a","b"],["c","d"]]`, `[["c","d"],["a","b"]]`},
	{"h100_transpose_256x256", "h100", "a=256,b=256", []int64{65536, 65536}, `[["a","b"],null]`, `[null,["a","b"]]`},
	{"exchange_64x32x32", "tpu-v5p", "x=64,y=32,z=32", []int64{50176, 4096}, `[["x"],["z","y"]]`, `[["y","z"],["x"]]`},
}

// BenchmarkFirstReshard65536 plans each of firstReshards as the first request of a
// server does (cold: new memos every time, so every digit unit is computed) and as a
// later one (warm: the memos of the requests before).
//
//	go test -run '^$' -bench BenchmarkFirstReshard65536 -benchtime 3x ./internal/planner/
func BenchmarkFirstReshard65536(b *testing.B) {
	for _, c := range firstReshards {
		model, ok := cost.Profile(c.model)
		require.True(b, ok)
		m := mustMesh(b, c.mesh)
		src := mustSharding(b, m, c.shape, c.src)
		tgt := mustSharding(b, m, c.shape, c.tgt)
		for _, warm := range []bool{false, true} {
			name := c.name + "/cold"
			if warm {
				name = c.name + "/warm"
			}
			b.Run(name, func(b *testing.B) {
				memos := newTestMemos(b)
				r := &Request{Mesh: m, Shape: c.shape, ElemBits: 16, Source: src, Target: tgt, Model: model, Memos: memos}
				p, err := Reshard(context.Background(), r)
				require.NoError(b, err)
				for b.Loop() {
					if !warm {
						memos = newTestMemos(b)
					}
					r := &Request{Mesh: m, Shape: c.shape, ElemBits: 16, Source: src, Target: tgt, Model: model, Memos: memos}
					if _, err := Reshard(context.Background(), r); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(p.Summary.TimeUS, "plan_us")
			})
		}
	}
}
