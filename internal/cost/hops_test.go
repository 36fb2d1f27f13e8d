package cost

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// groupHops is the largest hop latency AxisHops gives a move between two devices that
// differ only in the digits of c's group, by brute force over every difference of the
// digits (the distance depends on the coordinates' difference only).
func groupHops(hops []AxisHop, c Collective) float64 {
	type digit struct{ axis, size, weight int }
	var ds []digit
	for _, r := range c.Axes {
		if r.Size > 1 {
			ds = append(ds, digit{c.Mesh.AxisIndex(r.Name), r.Size, r.Minor()})
		}
	}
	delta := make([]int, len(ds))
	coord := make([]int, len(hops))
	worst := 0.0
	var walk func(k int)
	walk = func(k int) {
		if k < len(ds) {
			for x := 1 - ds[k].size; x < ds[k].size; x++ {
				delta[k] = x
				walk(k + 1)
			}
			return
		}
		clear(coord)
		for i, d := range ds {
			coord[d.axis] += delta[i] * d.weight
		}
		sum := 0.0
		for i, h := range hops {
			sum += h.LatencyUS * float64(h.Distance(0, coord[i]))
		}
		worst = max(worst, sum)
	}
	walk(0)
	return worst
}

// TestLatencyCoversHops holds every model to AxisHops' contract: a structured
// collective's latency covers the hop latency between any two members of its group, and
// a routed step's latency covers the hop latency of each of its transfers.
func TestLatencyCoversHops(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	counted := 0
	for _, model := range randomModels(t) {
		f := model.(*Fabric)
		for range 200 {
			c := randomCase(r, t)
			if c.Kind == CollectivePermute || c.Kind == AllToAllV || c.Bytes == 0 {
				continue
			}
			hops := f.AxisHops(c.Mesh)
			want := groupHops(hops, c)
			if want > 0 {
				counted++
			}
			got := f.Estimate(c).LatencyUS
			require.GreaterOrEqual(t, got*(1+1e-12), want, "%s %s %+v", f.Name(), c.Kind, c.Axes)
		}
		for range 40 {
			c := randomCase(r, t)
			m := c.Mesh
			if m.NumDevices() > 4096 {
				continue // the router's per-device marks; the metric does not depend on the size
			}
			hops := f.AxisHops(m)
			type tr struct{ from, to []int }
			var trs []tr
			for range 1 + r.IntN(6) {
				a, b := make([]int, len(m.Axes)), make([]int, len(m.Axes))
				for i, ax := range m.Axes {
					a[i], b[i] = r.IntN(ax.Size), r.IntN(ax.Size)
				}
				trs = append(trs, tr{a, b})
			}
			router := f.NewRouter(m)
			for _, kind := range []Kind{CollectivePermute, AllToAllV} {
				e := router.Price(&Traffic{Kind: kind, Mesh: m, Each: func(yield func(from, to []int, bytes int64) bool) {
					for _, x := range trs {
						if !yield(x.from, x.to, 1<<20) {
							return
						}
					}
				}})
				for _, x := range trs {
					sum := 0.0
					for i, h := range hops {
						sum += h.LatencyUS * float64(h.Distance(x.from[i], x.to[i]))
					}
					if sum > 0 {
						counted++
					}
					require.GreaterOrEqual(t, e.LatencyUS*(1+1e-12), sum, "%s %s %v -> %v", f.Name(), kind, x.from, x.to)
				}
			}
		}
	}
	require.Greater(t, counted, 500, "the hop bound must be positive on most cases")
}

// TestAxisHopsDistance pins the metric: a line's difference, a ring's short way.
func TestAxisHopsDistance(t *testing.T) {
	line := AxisHop{LatencyUS: 1, Size: 8}
	ring := AxisHop{LatencyUS: 1, Size: 8, Wrapped: true}
	require.Equal(t, 7, line.Distance(0, 7))
	require.Equal(t, 7, line.Distance(7, 0))
	require.Equal(t, 1, ring.Distance(0, 7))
	require.Equal(t, 4, ring.Distance(6, 2))
	require.Equal(t, 3, ring.Distance(2, 5))
	m, err := sharding.NewMesh("m", []sharding.Axis{{Name: "x", Size: 4}, {Name: "y", Size: 2}}, nil)
	require.NoError(t, err)
	f, ok := Profile("tpu-v5p")
	require.True(t, ok)
	hs := f.AxisHops(m)
	require.Equal(t, []AxisHop{{LatencyUS: 1, Size: 4}, {LatencyUS: 1, Size: 2}}, hs) // 4x2 is not whole cubes: lines
	g, ok := Profile("h100")
	require.True(t, ok)
	for _, h := range g.AxisHops(m) {
		require.Zero(t, h.LatencyUS, "a GPU model's axes count no hops")
	}
}
