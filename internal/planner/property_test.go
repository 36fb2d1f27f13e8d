package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// randomMesh draws 1-5 axes of sizes 1-8 and, half the time, a device_ids permutation.
func randomMesh(t *testing.T, rng *rand.Rand, maxDevices int) *sharding.Mesh {
	for {
		n := 1 + rng.IntN(5)
		axes := make([]sharding.Axis, n)
		total := 1
		for i := range axes {
			axes[i] = sharding.Axis{Name: fmt.Sprintf("a%d", i), Size: 1 + rng.IntN(8)}
			total *= axes[i].Size
		}
		if total > maxDevices {
			continue
		}
		var ids []int
		if rng.IntN(2) == 0 {
			ids = rng.Perm(total)
		}
		m, err := sharding.NewMesh("mesh", axes, ids)
		require.NoError(t, err)
		return m
	}
}

// randomPieces splits each axis into random sub-axes pieces (a piece list per axis).
func randomPieces(rng *rand.Rand, m *sharding.Mesh) []sharding.AxisRef {
	var out []sharding.AxisRef
	for _, a := range m.Axes {
		if a.Size == 1 {
			continue
		}
		full := sharding.FullAxis(a)
		f := primeFactors(a.Size)
		if len(f) > 1 && rng.IntN(2) == 0 {
			cut := 1 + rng.IntN(len(f)-1)
			p := 1
			for _, x := range f[:cut] {
				p *= x
			}
			out = append(out, full.Sub(1, p), full.Sub(p, a.Size/p))
			continue
		}
		out = append(out, full)
	}
	return out
}

// randomSharding places pieces on random dims (or leaves them replicated), optionally
// marking one unused piece unreduced.
func randomSharding(rng *rand.Rand, m *sharding.Mesh, rank int, pieces []sharding.AxisRef, unreduced bool) sharding.Sharding {
	s := sharding.Replicated(rank)
	perm := rng.Perm(len(pieces))
	for _, i := range perm {
		p := pieces[i]
		switch k := rng.IntN(rank + 2); {
		case k < rank:
			s.Dims[k].Axes = append(s.Dims[k].Axes, p)
		case k == rank && unreduced && len(s.Unreduced) == 0:
			s.Unreduced = append(s.Unreduced, p)
		}
	}
	s.Canonicalize(m)
	return s
}

func TestPlansReplayOnRandomProblems(t *testing.T) {
	cases := 300
	if !*long {
		cases = 60
	}
	effs := []float64{}
	for c, pr := range randomProblems(t, cases) {
		m, shape, src, tgt := pr.mesh, pr.shape, pr.src, pr.tgt
		name := fmt.Sprintf("%d %s %v %s->%s", c, m, shape, src, tgt)
		t.Run(name, func(t *testing.T) {
			r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: src, Target: tgt, Model: testModel{}}
			p, err := Reshard(context.Background(), r)
			require.NoError(t, err)
			replay(t, p)
			eff := p.Summary.Efficiency
			if p.Summary.BytesPerDevice > 0 {
				assert.InDelta(t, float64(p.Summary.LowerBoundBytesPerDevice)/float64(p.Summary.BytesPerDevice), eff, 1e-12)
			} else {
				assert.Equal(t, 1.0, eff)
			}
			if !src.IsFullyReplicated() && !tgt.IsFullyReplicated() {
				assert.False(t, p.Summary.FullRematerialization, "plan: %s", describe(p))
			}
			effs = append(effs, eff)
		})
	}
	worst := 1.0
	for _, e := range effs {
		worst = min(worst, e)
	}
	t.Logf("%d plans, worst efficiency %.3f", len(effs), worst)
}

func describe(p *Plan) string {
	var b strings.Builder
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "%s%v %s->%s; ", s.Op, s.MeshAxes, s.Before, s.After)
	}
	return b.String()
}
