package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// TestPropertyXLAPlansAtOrAboveTimeBound: XLA's predicted plans (strategy xla, with
// their halo permutes and fallbacks) are priced at or above the reshard's time lower
// bound too, whose latency part includes the hop bound on torus profiles.
func TestPropertyXLAPlansAtOrAboveTimeBound(t *testing.T) {
	n := 100
	if !*long {
		n = 30
	}
	pbs := append(randomProblems(t, n), randomSet(t)[:n]...)
	checked := 0
	for _, name := range []string{"tpu-v5p", "h100"} {
		f, ok := cost.Profile(name)
		require.True(t, ok)
		for i, pb := range pbs {
			r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f}
			p, _, err := ReshardXLA(context.Background(), r)
			if err != nil {
				continue
			}
			checked++
			assert.GreaterOrEqual(t, p.Summary.TimeUS*(1+1e-9), p.Summary.TimeLowerBoundUS,
				fmt.Sprintf("%d %s %s %v %s->%s", i, name, pb.mesh, pb.shape, pb.src, pb.tgt))
		}
	}
	require.Greater(t, checked, n)
}

// TestCutNeedsClosedMatchesEnumeration holds the closed-form cut needs (the time
// bound's torus term, from the atoms) to the enumeration over devices (cutNeeds), on
// random reshards of up to 1,024 devices with uneven and padded dims, sub-axes and
// odd axis sizes (where the closed form declines and the enumeration stands).
func TestCutNeedsClosedMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 71))
	f, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	closed, declined, nonzero := 0, 0, 0
	for i := range 400 {
		m, shape, src, tgt := randomReshard(t, rng, 2, 1024, []int64{1, 3, 16})
		r := &Request{Mesh: m, Shape: shape, ElemBits: []int{4, 16, 32}[rng.IntN(3)], Source: src, Target: tgt, Model: f}
		sp, ok := newSpace(m, shape, r.ElemBits, src, tgt)
		if !ok {
			continue
		}
		start, goal := sp.stateOf(src), sp.stateOf(tgt)
		for axis := range m.Axes {
			got, ok := cutNeedsClosed(r, sp, start, goal, axis)
			lo, hi, okE := cutNeeds(r, axis)
			require.True(t, okE)
			if !ok {
				declined++
				continue
			}
			closed++
			if got > 0 {
				nonzero++
			}
			require.Equal(t, max(lo, hi), got, "%d %s %v %s -> %s axis %d", i, m, shape, src, tgt, axis)
		}
	}
	t.Logf("closed %d (nonzero %d), declined %d", closed, nonzero, declined)
	require.Greater(t, nonzero, 200)
	require.Greater(t, declined, 0)
}
