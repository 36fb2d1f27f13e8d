package cost

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

var allKinds = []Kind{AllGather, ReduceScatter, AllReduce, AllToAll, CollectivePermute, AllToAllV}

// randomModels are the built-in profiles plus custom models of every topology, both
// modes and both hierarchies, some with a DCN axis.
func randomModels(t testing.TB) []Model {
	var ms []Model
	for _, p := range Profiles() {
		m, ok := Profile(p.Name)
		require.True(t, ok)
		ms = append(ms, m)
	}
	for _, topo := range []string{"ring_bidi", "ring_uni", "line", "switch", "torus"} {
		for _, mode := range []string{"additive", "max"} {
			for _, h := range []string{"sequential", "overlapped"} {
				ms = append(ms, mustResolve(t, fmt.Sprintf(`{"mode":%q,"hierarchy":%q,"axis_links":{"a0":"dcn"},"links":{
					"ici":{"bandwidth_gbps":40,"latency_us":0.5,"base_latency_us":1,"topology":%q},
					"dcn":{"bandwidth_gbps":5,"latency_us":8,"topology":"switch"}}}`, mode, h, topo)))
			}
		}
	}
	ms = append(ms, mustResolve(t, `{"base":"h100","hierarchy":"overlapped","mode":"max"}`))
	ms = append(ms, mustResolve(t, `{"base":"gb200-nvl72","gpus_per_node":4}`))
	return ms
}

var sizes = []int{1, 2, 3, 4, 5, 8, 16}

// randomCase draws a mesh of up to 4 axes and a group of some of its axes or sub-axes.
func randomCase(r *rand.Rand, t testing.TB) Collective {
	var axes []sharding.Axis
	for i := range 1 + r.IntN(4) {
		axes = append(axes, sharding.Axis{Name: fmt.Sprintf("a%d", i), Size: sizes[r.IntN(len(sizes))]})
	}
	m, err := sharding.NewMesh("m", axes, nil)
	require.NoError(t, err)
	var refs []sharding.AxisRef
	for _, a := range axes {
		if r.IntN(3) == 0 {
			continue
		}
		ref := sharding.FullAxis(a)
		if a.Size%4 == 0 && r.IntN(3) == 0 { // a sub-axis of size 2, 4 or more
			size := 2
			pre := []int{1, a.Size / 2 / 2, a.Size / 2}[r.IntN(3)]
			if a.Size%(pre*size) == 0 && pre >= 1 {
				ref = ref.Sub(pre, size)
			}
		}
		refs = append(refs, ref)
	}
	return Collective{
		Kind:  allKinds[r.IntN(len(allKinds))],
		Bytes: r.Int64N(1 << 32),
		Mesh:  m,
		Axes:  refs,
		Hops:  r.IntN(10),
	}
}

func TestPropertyMonotonicInBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, model := range randomModels(t) {
		t.Run(model.Name(), func(t *testing.T) {
			for range 500 {
				c := randomCase(r, t)
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
	for _, model := range randomModels(t) {
		f := model.(*Fabric)
		t.Run(model.Name(), func(t *testing.T) {
			for range 1000 {
				c := randomCase(r, t)
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
		model := mustResolve(t, `{"links":{"ici":{"bandwidth_gbps":45,"latency_us":1,"base_latency_us":2,"topology":"`+topo+`"}}}`)
		for _, kind := range []Kind{AllGather, ReduceScatter, AllReduce} {
			t.Run(topo+"/"+string(kind), func(t *testing.T) {
				for _, bytes := range []int64{1, 1 << 10, 1 << 20, 1 << 30} {
					prev, prev2 := 0.0, 0.0
					for n := 1; n <= 40; n++ {
						m := testMesh(t, fmt.Sprintf("x=%d", n))
						e := model.Estimate(Collective{Kind: kind, Bytes: bytes, Mesh: m, Axes: group(t, m, "x")})
						require.GreaterOrEqual(t, e.TimeUS, prev, "N=%d V=%d", n, bytes)
						prev = e.TimeUS
						if n == 1 {
							continue // x=1 drops out of the 2D group below, with its links
						}
						// and growing one axis of a 2D group
						m2 := testMesh(t, fmt.Sprintf("x=%d,y=4", n))
						e2 := model.Estimate(Collective{Kind: kind, Bytes: bytes, Mesh: m2, Axes: group(t, m2, "x", "y")})
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
				wrapped := mustResolve(t, fmt.Sprintf(tmpl, mode, h, "always"))
				open := mustResolve(t, fmt.Sprintf(tmpl, mode, h, "never"))
				for range 2000 {
					c := randomCase(r, t)
					w, o := wrapped.Estimate(c), open.Estimate(c)
					require.LessOrEqual(t, w.TimeUS, o.TimeUS*(1+1e-12), "%+v", c)
				}
			})
		}
	}
	t.Run("tpu-v5p cube rule", func(t *testing.T) {
		wrapped, _ := Profile("tpu-v5p")
		open := mustResolve(t, `{"base":"tpu-v5p","links":{"ici":{"wrap":"never"}}}`)
		m := testMesh(t, "x=4,y=4,z=8")
		for _, kind := range allKinds {
			for _, axes := range [][]string{{"x"}, {"z"}, {"x", "y", "z"}} {
				c := Collective{Kind: kind, Bytes: 1 << 26, Mesh: m, Axes: group(t, m, axes...), Hops: 3}
				w, o := wrapped.Estimate(c), open.Estimate(c)
				assert.LessOrEqual(t, w.TimeUS, o.TimeUS, "%s %v", kind, axes)
				if kind == AllGather {
					assert.Less(t, w.TimeUS, o.TimeUS, "the wrap must help an all-gather")
				}
			}
		}
	})
}
