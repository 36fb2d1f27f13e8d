package cost_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

func TestPropertyMonotonicInBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, model := range cost.RandomModels(t) {
		t.Run(model.Name(), func(t *testing.T) {
			for range 500 {
				c := cost.RandomCase(r, t)
				a := model.Estimate(c)
				c.Bytes += r.Int64N(1 << 30)
				b := model.Estimate(c)
				require.LessOrEqual(t, a.TimeUS, b.TimeUS, "%+v", c)
				require.LessOrEqual(t, a.BandwidthUS, b.BandwidthUS, "%+v", c)
			}
		})
	}
}

func TestPropertyNeverBelowLowerBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, model := range cost.RandomModels(t) {
		f := model.(*cost.Fabric)
		t.Run(model.Name(), func(t *testing.T) {
			for range 1000 {
				c := cost.RandomCase(r, t)
				e, lb := f.Estimate(c), f.LowerBound(c)
				const slack = 1 + 1e-9
				require.LessOrEqual(t, lb.TimeUS, e.TimeUS*slack, "%+v: %+v < %+v", c, e, lb)
				require.LessOrEqual(t, lb.BandwidthUS, e.BandwidthUS*slack, "%+v: %+v < %+v", c, e, lb)
				require.LessOrEqual(t, lb.LatencyUS, e.LatencyUS*slack, "%+v: %+v < %+v", c, e, lb)
			}
		})
	}
}

// TestPropertyMonotonicInGroupSize: with V fixed, all-gather, reduce-scatter and
// all-reduce never get cheaper on a bigger group of the same shape (all-to-all and
// permutes may: each device moves less).
func TestPropertyMonotonicInGroupSize(t *testing.T) {
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "switch"} {
		model := cost.MustResolve(t, `{"links":{"ici":{"bandwidth_gbps":45,"latency_us":1,"base_latency_us":2,"topology":"`+topo+`"}}}`)
		for _, kind := range []cost.Kind{cost.AllGather, cost.ReduceScatter, cost.AllReduce} {
			t.Run(topo+"/"+string(kind), func(t *testing.T) {
				for _, bytes := range []int64{1, 1 << 10, 1 << 20, 1 << 30} {
					prev, prev2 := 0.0, 0.0
					for n := 1; n <= 40; n++ {
						m := cost.TestMesh(t, fmt.Sprintf("x=%d", n))
						e := model.Estimate(cost.Collective{Kind: kind, Bytes: bytes, Mesh: m, Axes: cost.Group(t, m, "x")})
						require.GreaterOrEqual(t, e.TimeUS, prev, "N=%d V=%d", n, bytes)
						prev = e.TimeUS
						if n == 1 {
							continue // x=1 drops out of the 2D group below, with its links
						}
						// and growing one axis of a 2D group
						m2 := cost.TestMesh(t, fmt.Sprintf("x=%d,y=4", n))
						e2 := model.Estimate(cost.Collective{Kind: kind, Bytes: bytes, Mesh: m2, Axes: cost.Group(t, m2, "x", "y")})
						require.GreaterOrEqual(t, e2.TimeUS, prev2, "N=%dx4 V=%d", n, bytes)
						prev2 = e2.TimeUS
					}
				}
			})
		}
	}
}

// TestPropertyWrapNeverSlower compares every collective on the same mesh with the
// torus wrapped and unwrapped.
func TestPropertyWrapNeverSlower(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const tmpl = `{"mode":%q,"hierarchy":%q,"axis_links":{"a0":"dcn"},"links":{
		"ici":{"bandwidth_gbps":45,"latency_us":1,"topology":"torus","wrap":%q},
		"dcn":{"bandwidth_gbps":6.25,"latency_us":10,"topology":"switch"}}}`
	for _, mode := range []string{"additive", "max"} {
		for _, h := range []string{"sequential", "overlapped"} {
			t.Run(mode+"/"+h, func(t *testing.T) {
				wrapped := cost.MustResolve(t, fmt.Sprintf(tmpl, mode, h, "always"))
				open := cost.MustResolve(t, fmt.Sprintf(tmpl, mode, h, "never"))
				for range 2000 {
					c := cost.RandomCase(r, t)
					w, o := wrapped.Estimate(c), open.Estimate(c)
					require.LessOrEqual(t, w.TimeUS, o.TimeUS*(1+1e-12), "%+v", c)
				}
			})
		}
	}
	t.Run("tpu-v5p cube rule", func(t *testing.T) {
		wrapped, _ := cost.Profile("tpu-v5p")
		open := cost.MustResolve(t, `{"base":"tpu-v5p","links":{"ici":{"wrap":"never"}}}`)
		m := cost.TestMesh(t, "x=4,y=4,z=8")
		for _, kind := range cost.AllKinds {
			for _, axes := range [][]string{{"x"}, {"z"}, {"x", "y", "z"}} {
				c := cost.Collective{Kind: kind, Bytes: 1 << 26, Mesh: m, Axes: cost.Group(t, m, axes...), Hops: 3}
				w, o := wrapped.Estimate(c), open.Estimate(c)
				assert.LessOrEqual(t, w.TimeUS, o.TimeUS, "%s %v", kind, axes)
				if kind == cost.AllGather {
					assert.Less(t, w.TimeUS, o.TimeUS, "the wrap must help an all-gather")
				}
			}
		}
	})
}
