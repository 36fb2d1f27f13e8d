package cost

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

func TestEstimateZero(t *testing.T) {
	model, _ := Profile("h100")
	m := testMesh(t, "node=2,gpu=8,one=1")
	cases := []struct {
		name string
		c    Collective
		link string
	}{
		{"zero bytes", Collective{Kind: AllGather, Bytes: 0, Mesh: m, Axes: group(t, m, "gpu")}, "nvlink"},
		{"negative bytes", Collective{Kind: AllReduce, Bytes: -5, Mesh: m, Axes: group(t, m, "node", "gpu")}, "ib"},
		{"no axes", Collective{Kind: AllReduce, Bytes: 1 << 20, Mesh: m}, ""},
		{"size-1 axis", Collective{Kind: AllToAll, Bytes: 1 << 20, Mesh: m, Axes: group(t, m, "one")}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, Estimate{Link: tc.link}, model.Estimate(tc.c))
		})
	}
}

// TestLinkAssignment checks which link class a group rides on GPU and TPU models.
func TestLinkAssignment(t *testing.T) {
	sub := func(m *sharding.Mesh, name string, pre, size int) sharding.AxisRef {
		return sharding.FullAxis(m.Axes[m.AxisIndex(name)]).Sub(pre, size)
	}
	// The formulas' link classes (the NCCL prices' bounding side depends on fitted
	// efficiencies).
	h100x, _ := Profile("h100")
	h100 := formulas(t, h100x)
	nvl72, _ := Profile("gb200-nvl72")
	v5p, _ := Profile("tpu-v5p")
	m2x8 := testMesh(t, "node=2,gpu=8")
	m16 := testMesh(t, "gpu=16")
	m4x4x4 := testMesh(t, "data=4,model=4,seq=4")
	cases := []struct {
		name  string
		model Model
		mesh  *sharding.Mesh
		axes  []sharding.AxisRef
		want  string
	}{
		{"minor axis in a node", h100, m2x8, group(t, m2x8, "gpu"), "nvlink"},
		{"major axis across nodes", h100, m2x8, group(t, m2x8, "node"), "ib"},
		{"both levels: NVLink carries the most time", h100, m2x8, group(t, m2x8, "node", "gpu"), "nvlink"},
		{"an axis larger than a node: NVLink in each node, the node's NICs between", h100, m16, group(t, m16, "gpu"), "nvlink"},
		{"a 64-device mesh inside a 72-GPU domain", nvl72, testMesh(t, "gpu=64"), nil, "nvlink"},
		{"minor sub-axis inside a node", h100, m16, []sharding.AxisRef{sub(m16, "gpu", 2, 8)}, "nvlink"},
		{"major sub-axis, stride 8", h100, m16, []sharding.AxisRef{sub(m16, "gpu", 1, 2)}, "ib"},
		{"72 GPUs in one NVLink domain", nvl72, testMesh(t, "rack=2,gpu=72"), nil, "nvlink"},
		{"axis_links override", mustResolve(t, `{"base":"h100","axis_links":{"gpu":"ib"}}`), m2x8, group(t, m2x8, "gpu"), "ib"},
		{"TPU axes ride ICI", v5p, m4x4x4, group(t, m4x4x4, "data", "seq"), "ici"},
		{"TPU axis marked DCN", mustResolve(t, `{"base":"tpu-v5p","axis_links":{"data":"dcn"}}`), m4x4x4, group(t, m4x4x4, "data"), "dcn"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			axes := tc.axes
			if axes == nil {
				axes = group(t, tc.mesh, "gpu")
			}
			e := tc.model.Estimate(Collective{Kind: AllGather, Bytes: 1 << 30, Mesh: tc.mesh, Axes: axes})
			assert.Equal(t, tc.want, e.Link)
		})
	}
}

// TestTorusShapes checks the per-axis shape each profile's wrap rule gives, by the ratio
// of the all-gather bandwidth term to the unwrapped (line) form (N-1)/N·V/W.
func TestTorusShapes(t *testing.T) {
	const v = 1 << 30
	cases := []struct {
		profile, mesh string
		axis          sharding.AxisRef // zero: the full axis "x"
		wrapped       bool
		share         float64 // bandwidth divisor from link sharing
	}{
		{"tpu-v5e", "x=16,y=16", sharding.AxisRef{}, true, 1},
		{"tpu-v5e", "x=8,y=16", sharding.AxisRef{}, false, 1},
		{"tpu-v6e", "x=16,y=4", sharding.AxisRef{}, true, 1},
		{"tpu-v5p", "x=4,y=4,z=4", sharding.AxisRef{}, true, 1},
		{"tpu-v5p", "x=4,y=4,z=8", sharding.AxisRef{}, true, 1},
		{"tpu-v5p", "x=4,y=4", sharding.AxisRef{}, false, 1},       // 16 chips: not a cube
		{"tpu-v4", "x=4,y=2,z=4", sharding.AxisRef{}, false, 1},    // 2 breaks the cube
		{"tpu-v4", "x=4,y=4,z=4,w=1", sharding.AxisRef{}, true, 1}, // size-1 axes do not count
		// sub-axes of a wrapped 16-ring: strided (pre 1) keeps the wrap and shares links
		// with 4 interleaved groups; a contiguous segment (pre 4) is a line.
		{"tpu-v6e", "x=16,y=16", sharding.AxisRef{Name: "x", Pre: 1, Size: 4, Of: 16}, true, 4},
		{"tpu-v6e", "x=16,y=16", sharding.AxisRef{Name: "x", Pre: 4, Size: 4, Of: 16}, false, 1},
		{"tpu-v6e", "x=16,y=16", sharding.AxisRef{Name: "x", Pre: 2, Size: 2, Of: 16}, false, 4},
	}
	for _, tc := range cases {
		t.Run(tc.profile+" "+tc.mesh+" "+tc.axis.String(), func(t *testing.T) {
			model, ok := Profile(tc.profile)
			require.True(t, ok)
			m := testMesh(t, tc.mesh)
			ref := tc.axis
			if ref.Name == "" {
				ref = sharding.FullAxis(m.Axes[0])
			}
			e := model.Estimate(Collective{Kind: AllGather, Bytes: v, Mesh: m, Axes: []sharding.AxisRef{ref}})
			n := float64(ref.Size)
			w := model.Info().Links["ici"].BandwidthGBps * 1e3 / tc.share
			lineBW := (n - 1) / n * v / w
			want := lineBW
			if tc.wrapped {
				want /= 2
			}
			assert.InDelta(t, want, e.BandwidthUS, 1e-6*want)
		})
	}
}

func TestUniform(t *testing.T) {
	u := Uniform(100, 2)
	assert.Equal(t, "uniform", u.Name())
	m := testMesh(t, "x=4,y=2")
	for _, axes := range [][]string{{"x"}, {"y", "x"}} {
		n := 1.0
		for _, a := range axes {
			n *= float64(m.AxisSize(a))
		}
		e := u.Estimate(Collective{Kind: AllGather, Bytes: 1e6, Mesh: m, Axes: group(t, m, axes...)})
		assert.InDelta(t, (n-1)*2+(n-1)/n*1e6/1e5, e.TimeUS, 1e-9, "%v", axes)
		assert.Equal(t, "ici", e.Link)
	}
	assert.Panics(t, func() { Uniform(0, 1) })
	assert.Panics(t, func() { Uniform(1, -1) })
}

func TestProfiles(t *testing.T) {
	ps := Profiles()
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"a100", "b200", "gb200-nvl72", "h100", "h200", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"}, names)
	for _, p := range ps {
		t.Run(p.Name, func(t *testing.T) {
			assert.NotEmpty(t, p.Description)
			if p.GPUsPerNode > 0 {
				assert.NotEmpty(t, p.Sources["gpus_per_node"])
			}
			for class, l := range p.Links {
				assert.NotEmpty(t, l.Sources["bandwidth_gbps"], "%s bandwidth", class)
				assert.NotEmpty(t, l.Sources["latency_us"], "%s latency", class)
				if l.BaseLatencyUS != 0 {
					assert.NotEmpty(t, l.Sources["base_latency_us"], "%s base latency", class)
				}
				if l.Topology == "torus" {
					assert.NotEmpty(t, l.Sources["wrap"], "%s wrap", class)
					assert.NotEmpty(t, l.Sources["links_per_chip"], "%s links per chip", class)
				}
			}
			if c := p.Collectives; c != nil {
				assert.NotEmpty(t, c.Sources["nvls"])
				for name, a := range c.Algorithms {
					for _, fig := range []string{"nvlink_efficiency", "net_efficiency", "half_bytes", "base_latency_us", "net_half_bytes", "net_latency_us"} {
						assert.NotEmpty(t, a.Sources[fig], "%s %s", name, fig)
					}
					if a.CurveExponent != 0 {
						assert.NotEmpty(t, a.Sources["curve_exponent"], "%s curve_exponent", name)
					}
				}
				if q := c.P2P; q != nil {
					assert.NotEmpty(t, q.Sources["net_efficiency"])
					assert.NotEmpty(t, q.Sources["message_overhead_us"])
				}
			} else {
				assert.Zero(t, p.GPUsPerNode, "every built-in GPU profile prices collectives as NCCL runs them")
			}
		})
	}
	// the figures
	for name, want := range map[string]struct {
		link string
		gbps float64
		gpn  int
	}{
		"tpu-v4": {"ici", 45, 0}, "tpu-v5e": {"ici", 45, 0}, "tpu-v5p": {"ici", 90, 0}, "tpu-v6e": {"ici", 90, 0},
		"h100": {"nvlink", 450, 8}, "h200": {"nvlink", 450, 8}, "b200": {"nvlink", 900, 8}, "gb200-nvl72": {"nvlink", 900, 72},
		"a100": {"nvlink", 300, 8},
	} {
		p, ok := Lookup(name)
		require.True(t, ok, name)
		assert.Equal(t, want.gbps, p.Links[want.link].BandwidthGBps, name)
		assert.Equal(t, want.gpn, p.GPUsPerNode, name)
	}

	alias, ok := Lookup("h100-nvlink")
	require.True(t, ok)
	assert.Equal(t, "h100", alias.Name)
	_, ok = Lookup("h100-pcie")
	assert.False(t, ok)

	// results are copies
	ps[1].Links["nvlink"] = LinkInfo{}
	ps[1].Sources["gpus_per_node"] = "changed"
	ps[1].Collectives.Algorithms["ring"] = AlgorithmInfo{}
	again, _ := Lookup(ps[1].Name)
	assert.Equal(t, 900.0, again.Links["nvlink"].BandwidthGBps)
	assert.NotZero(t, again.Collectives.Algorithms["ring"].NVLinkEfficiency)
	assert.NotEqual(t, "changed", again.Sources["gpus_per_node"])
}

func TestEstimateDoesNotAllocate(t *testing.T) {
	model, _ := Profile("h100")
	m := testMesh(t, "node=4,gpu=8")
	c := Collective{Kind: AllReduce, Bytes: 1 << 28, Mesh: m, Axes: group(t, m, "node", "gpu")}
	for _, kind := range allKinds {
		c.Kind = kind
		assert.Zero(t, testing.AllocsPerRun(100, func() { model.Estimate(c) }), kind)
	}
}

// TestMalformedCollectives: Estimate must not panic on inconsistent groups.
func TestMalformedCollectives(t *testing.T) {
	m := testMesh(t, "x=4,y=4")
	for _, p := range Profiles() {
		model, _ := Profile(p.Name)
		for _, refs := range [][]sharding.AxisRef{
			{{Name: "nope", Pre: 1, Size: 4, Of: 4}},
			{{Name: "x", Pre: 0, Size: 4, Of: 0}},
			{{Name: "x", Pre: 3, Size: 4, Of: 4}},
			{{Name: "x", Pre: 1 << 40, Size: 1 << 40, Of: 4}},
			{{Name: "x", Pre: -1, Size: 2, Of: -8}},
		} {
			for _, kind := range append(allKinds, Kind("bogus")) {
				for _, mesh := range []*sharding.Mesh{m, nil} {
					assert.NotPanics(t, func() {
						e := model.Estimate(Collective{Kind: kind, Bytes: 1 << 20, Mesh: mesh, Axes: refs, Hops: -3})
						assert.GreaterOrEqual(t, e.TimeUS, 0.0)
						model.LowerBound(Collective{Kind: kind, Bytes: 1 << 20, Mesh: mesh, Axes: refs, Hops: -3})
					})
				}
			}
		}
	}
}
