package testgen

import (
	"encoding/json"
	"math/rand/v2"

	"github.com/shardplan/shardplan/internal/sharding"
)

// RandomSetMesh is the mesh of the random set: 256 devices in five axes.
const RandomSetMesh = "a=2,b=2,c=4,d=4,e=4"

// Reshard is one reshard of the random set: a shape and its two shardings on the mesh.
type Reshard struct {
	Shape          []int64
	Source, Target sharding.Sharding
}

// RandomSet draws 250 random reshards of rank 2-4 on m (the mesh RandomSetMesh parses
// to), seeded: the same set on every run. It is the set the planner's latency and plan
// quality are measured on (docs/PERFORMANCE.md). Every axis, or for a
// size-4 axis (one time in three) its two halves, goes to a random dim or stays
// replicated, independently in the source and the target.
func RandomSet(m *sharding.Mesh) []Reshard {
	rng := rand.New(rand.NewPCG(2026, 12))
	out := make([]Reshard, 0, 250)
	for len(out) < 250 {
		rank := 2 + rng.IntN(3)
		shape := make([]int64, rank)
		for d := range shape {
			shape[d] = []int64{128, 256, 512, 1024, 2048, 4096, 96, 384}[rng.IntN(8)]
		}
		src, tgt := RandomSetSharding(rng, m, rank), RandomSetSharding(rng, m, rank)
		if src.SameLayout(tgt) {
			continue
		}
		out = append(out, Reshard{shape, src, tgt})
	}
	return out
}

// RandomSetSharding draws one sharding of RandomSet from rng.
func RandomSetSharding(rng *rand.Rand, m *sharding.Mesh, rank int) sharding.Sharding {
	s := sharding.Replicated(rank)
	var pieces []sharding.AxisRef
	for _, a := range m.Axes {
		full := sharding.FullAxis(a)
		if a.Size == 4 && rng.IntN(3) == 0 {
			pieces = append(pieces, full.Sub(1, 2), full.Sub(2, 2))
			continue
		}
		pieces = append(pieces, full)
	}
	for _, i := range rng.Perm(len(pieces)) {
		if k := rng.IntN(rank + 1); k < rank {
			s.Dims[k].Axes = append(s.Dims[k].Axes, pieces[i])
		}
	}
	s.Canonicalize(m)
	return s
}

// RandomSetBodies is the random set as POST /v1/reshard bodies on tpu-v5p in bf16.
func RandomSetBodies(m *sharding.Mesh) [][]byte {
	set := RandomSet(m)
	out := make([][]byte, len(set))
	for i, rs := range set {
		body, err := json.Marshal(map[string]any{
			"mesh": RandomSetMesh, "shape": rs.Shape, "dtype": "bf16", "cost_model": "tpu-v5p",
			"source": rs.Source.String(), "target": rs.Target.String(),
		})
		if err != nil {
			panic(err) // a map of strings and ints always marshals
		}
		out[i] = body
	}
	return out
}
