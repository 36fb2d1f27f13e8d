package cost

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// flow is an explicit transfer between row-major positions.
type flow struct {
	from, to int
	bytes    int64
}

// listTraffic is the Traffic of an explicit list (no offsets).
func listTraffic(m *sharding.Mesh, kind Kind, fs []flow) *Traffic {
	return &Traffic{Kind: kind, Mesh: m, Each: func(yield func(from, to []int, bytes int64) bool) {
		a, b := make([]int, len(m.Axes)), make([]int, len(m.Axes))
		for _, f := range fs {
			m.Coords(f.from, a)
			m.Coords(f.to, b)
			if !yield(a, b, f.bytes) {
				return
			}
		}
	}}
}

// uniformA2A is the direct all_to_all of v bytes (B.0 convention) over the whole mesh:
// every device sends v/N² to every other.
func uniformA2A(m *sharding.Mesh, v int64) []flow {
	n := m.NumDevices()
	var out []flow
	for i := range n {
		for j := range n {
			if i != j {
				out = append(out, flow{i, j, v / int64(n*n)})
			}
		}
	}
	return out
}

func oneLinkModel(t testing.TB, topo string) *Fabric {
	t.Helper()
	f, err := New(ProfileInfo{Name: "t-" + topo, Links: map[string]LinkInfo{"ici": {BandwidthGBps: 100, LatencyUS: 1, Topology: topo}}})
	require.NoError(t, err)
	return f
}

// TestRouterUniformAllToAllIsTheClosedForm: the direct all_to_all routed link by link
// costs exactly COSTMODEL.md B.1's formula on every one-axis topology, and B.2's
// bisection form on a 2D torus: the structured all_to_all's price is its own traffic's.
func TestRouterUniformAllToAllIsTheClosedForm(t *testing.T) {
	const v = 1 << 30
	for _, topo := range []string{"ring_bidi", "line", "ring_uni", "switch"} {
		for _, n := range []int{3, 4, 7, 8, 16} {
			t.Run(fmt.Sprintf("%s/n=%d", topo, n), func(t *testing.T) {
				f := oneLinkModel(t, topo)
				m := testMesh(t, fmt.Sprintf("x=%d", n))
				vv := int64(v / (n * n) * n * n)
				got := f.NewRouter(m).Price(listTraffic(m, AllToAllV, uniformA2A(m, vv)))
				want := f.Estimate(Collective{Kind: AllToAll, Bytes: vv, Mesh: m, Axes: group(t, m, "x")})
				assert.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*want.BandwidthUS)
				assert.Equal(t, int64(n*(n-1))*(vv/int64(n*n)), got.Bytes)
				assert.Equal(t, n-1, got.MaxPeers)
			})
		}
	}
	t.Run("2D torus", func(t *testing.T) {
		f := oneLinkModel(t, "ring_bidi")
		m := testMesh(t, "x=4,y=8")
		vv := int64(v / (32 * 32) * 32 * 32)
		got := f.NewRouter(m).Price(listTraffic(m, AllToAllV, uniformA2A(m, vv)))
		want := f.Estimate(Collective{Kind: AllToAll, Bytes: vv, Mesh: m, Axes: group(t, m, "x", "y")})
		assert.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*want.BandwidthUS)
	})
}

// TestRouterShift: a shift by d on a ring loads each link with min(d, n-d) transfers
// (the short way), on a line with d, and takes min(d, n-d) hops.
func TestRouterShift(t *testing.T) {
	const b = 1 << 20
	for _, tc := range []struct {
		topo      string
		n, d      int
		load, hop int
	}{
		{"ring_bidi", 8, 1, 1, 1}, {"ring_bidi", 8, 3, 3, 3}, {"ring_bidi", 8, 6, 2, 2},
		{"ring_uni", 8, 6, 6, 6}, {"switch", 8, 3, 1, 1},
	} {
		t.Run(fmt.Sprintf("%s/n=%d/d=%d", tc.topo, tc.n, tc.d), func(t *testing.T) {
			f := oneLinkModel(t, tc.topo)
			m := testMesh(t, fmt.Sprintf("x=%d", tc.n))
			var fs []flow
			for i := range tc.n {
				fs = append(fs, flow{i, (i + tc.d) % tc.n, b})
			}
			got := f.NewRouter(m).Price(listTraffic(m, CollectivePermute, fs))
			assert.InDelta(t, float64(tc.load*b)/1e5, got.BandwidthUS, 1e-9)
			assert.Equal(t, tc.hop, got.MaxHops)
			assert.InDelta(t, float64(tc.hop), got.LatencyUS, 1e-12)
		})
	}
}

// TestRouterIssueExample: [d, -] -> [-, d] of a 4096x4096 bf16 on tpu-v5p's 256-ring is
// an all-to-all of 32 MiB; half of it must cross the bisection (4 links of 90 GB/s, two
// each way), so no schedule beats V/(8W) = 46.6 µs. The router prices exactly that.
func TestRouterIssueExample(t *testing.T) {
	f, _ := Profile("tpu-v5p")
	m := testMesh(t, "d=256")
	v := int64(4096 * 4096 * 2)
	got := f.NewRouter(m).Price(listTraffic(m, AllToAllV, uniformA2A(m, v)))
	assert.InDelta(t, float64(v)/(8*90e3), got.BandwidthUS, 1e-6)
	assert.Greater(t, got.TimeUS, 46.6)
	// 255 peers at 1 µs each beyond the first, plus the longest route of 128 hops.
	assert.InDelta(t, 128+254, got.LatencyUS, 1e-9)
}

// TestRouterNodes: on a GPU model, traffic inside a node rides the devices' NVLink
// ports, traffic between nodes the nodes' NICs (one per GPU, shared by the node).
func TestRouterNodes(t *testing.T) {
	f, _ := Profile("h100")
	m := testMesh(t, "node=2,gpu=8")
	r := f.NewRouter(m)
	// One GPU sends 1 GB to a GPU of the other node: all 8 NICs of the node carry it,
	// each at the rate the transport reaches (collectives.p2p).
	eff := f.Info().Collectives.P2P.NetEfficiency
	require.Less(t, eff, 1.0)
	one := r.Price(listTraffic(m, CollectivePermute, []flow{{0, 8, 1e9}}))
	assert.Equal(t, "ib", one.Link)
	assert.InDelta(t, 1e9/(8*50e3*eff), one.BandwidthUS, 1e-6)
	assert.InDelta(t, 6.6+2.7+f.Info().Collectives.P2P.MessageOverheadUS, one.LatencyUS, 1e-9)
	// Every GPU sends 1 GB across: 8 GB over 8 NICs.
	var all []flow
	for i := range 8 {
		all = append(all, flow{i, 8 + i, 1e9}, flow{8 + i, i, 1e9})
	}
	every := r.Price(listTraffic(m, CollectivePermute, all))
	assert.InDelta(t, 1e9/(50e3*eff), every.BandwidthUS, 1e-6)
	assert.Contains(t, every.Resource(), "ib egress of node")
	// Inside the node: the NVLink port.
	in := r.Price(listTraffic(m, CollectivePermute, []flow{{0, 1, 1e9}, {1, 0, 1e9}}))
	assert.Equal(t, "nvlink", in.Link)
	nvEff := f.Info().Collectives.P2P.NVLinkEfficiency
	if nvEff == 0 {
		nvEff = 1
	}
	assert.InDelta(t, 1e9/(450e3*nvEff), in.BandwidthUS, 1e-6)
	assert.InDelta(t, 6.6+0.6, in.LatencyUS, 1e-9)
}

// randomMesh draws a mesh of 1-4 axes and at most maxDev devices.
func randomMesh(t testing.TB, rng *rand.Rand, maxDev int) *sharding.Mesh {
	sizes := []int{1, 2, 3, 4, 6, 8, 16}
	for {
		k := 1 + rng.IntN(4)
		s, n := "", 1
		for i := range k {
			z := sizes[rng.IntN(len(sizes))]
			n *= z
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf("a%d=%d", i, z)
		}
		if n <= maxDev && n > 1 {
			return testMesh(t, s)
		}
	}
}

func routerModels(t testing.TB) []*Fabric {
	var out []*Fabric
	for _, name := range []string{"tpu-v5p", "tpu-v5e", "h100"} {
		f, _ := Profile(name)
		out = append(out, f)
	}
	for _, topo := range []string{"ring_uni", "line", "ring_bidi"} {
		out = append(out, oneLinkModel(t, topo))
	}
	out = append(out, mustResolve(t, `{"base":"tpu-v5p","axis_links":{"a0":"dcn"}}`).(*Fabric))
	return out
}

// TestPropertyOffsetsAreExact: a pattern given as one representative and its translates
// prices exactly like the same transfers listed in full.
func TestPropertyOffsetsAreExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	switched := 0
	for i := range 300 {
		m := randomMesh(t, rng, 512)
		// Per axis: a digit split n = hi * lo; the pattern varies on one part, repeats
		// along the other (or along the whole axis, or varies on all of it).
		na := len(m.Axes)
		offsets := make([][]int, na)
		varyMul, varyN := make([]int, na), make([]int, na)
		for a, ax := range m.Axes {
			varyMul[a], varyN[a] = 1, ax.Size
			switch rng.IntN(3) {
			case 0: // all offsets: the pattern does not move along a
				offsets[a], varyN[a] = AllOffsets(ax.Size), 1
			case 1: // the minor factor is fixed
				for _, lo := range []int{2, 3} {
					if ax.Size%lo == 0 && ax.Size > lo {
						offsets[a] = AllOffsets(lo)
						varyMul[a], varyN[a] = lo, ax.Size/lo
						break
					}
				}
			}
		}
		// Random representative transfers on the varying digits.
		var rep []flow
		reps := 1
		for a := range na {
			reps *= varyN[a]
		}
		coord := func(k int) []int {
			c := make([]int, na)
			for a := na - 1; a >= 0; a-- {
				c[a] = (k % varyN[a]) * varyMul[a]
				k /= varyN[a]
			}
			return c
		}
		for range 1 + rng.IntN(3*reps) {
			rep = append(rep, flow{rng.IntN(reps), rng.IntN(reps), 1 + rng.Int64N(1<<20)})
		}
		// The explicit list: every translate.
		var full []flow
		var odo func(a int, off []int)
		odo = func(a int, off []int) {
			if a == na {
				for _, f := range rep {
					x, y := coord(f.from), coord(f.to)
					for i := range na {
						x[i] += off[i]
						y[i] += off[i]
					}
					full = append(full, flow{m.PositionOfCoords(x), m.PositionOfCoords(y), f.bytes})
				}
				return
			}
			if offsets[a] == nil {
				odo(a+1, off)
				return
			}
			for _, o := range offsets[a] {
				off[a] = o
				odo(a+1, off)
			}
			off[a] = 0
		}
		odo(0, make([]int, na))
		compact := &Traffic{Kind: AllToAllV, Mesh: m, Offsets: offsets, Each: func(yield func(from, to []int, bytes int64) bool) {
			for _, f := range rep {
				if !yield(coord(f.from), coord(f.to), f.bytes) {
					return
				}
			}
		}}
		for _, f := range routerModels(t) {
			want := f.NewRouter(m).Price(listTraffic(m, AllToAllV, full))
			got := f.NewRouter(m).Price(compact)
			name := fmt.Sprintf("%d %s %s offsets %v", i, f.Name(), m, offsets)
			require.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*max(1, want.BandwidthUS), name)
			require.InDelta(t, want.LatencyUS, got.LatencyUS, 1e-9*max(1, want.LatencyUS), name)
			require.Equal(t, want.Bytes, got.Bytes, name)
			require.Equal(t, want.MaxPeers, got.MaxPeers, name)
			require.Equal(t, want.MaxHops, got.MaxHops, name)
		}
		// On GPU models the translates are routed by position shifts (routeSwitched);
		// routing every transfer through add, axis by axis, prices the same.
		// Some translates left out, so that an axis' first offset is not 0.
		shifted := *compact
		shifted.Offsets = make([][]int, na)
		for a, o := range offsets {
			shifted.Offsets[a] = o
			if len(o) > 1 && rng.IntN(2) == 0 {
				shifted.Offsets[a] = o[1+rng.IntN(len(o)-1):]
			}
		}
		for k, f := range switchedModels(t) {
			tr := compact
			if k%2 == 1 {
				tr = &shifted
			}
			gen := f.NewRouter(m)
			gen.generic = true
			want := gen.Price(tr)
			got := f.NewRouter(m).Price(tr)
			name := fmt.Sprintf("%d %s %s offsets %v", i, f.Name(), m, offsets)
			require.Equal(t, want.Estimate, got.Estimate, name)
			require.Equal(t, want.MaxLinkBytes, got.MaxLinkBytes, name)
			require.Equal(t, want.Bytes, got.Bytes, name)
			require.Equal(t, want.MaxPeers, got.MaxPeers, name)
			require.Equal(t, want.MaxHops, got.MaxHops, name)
			require.Equal(t, want.Resource(), got.Resource(), name)
			switched++
		}
	}
	require.Greater(t, switched, 500)
}

// switchedModels are GPU models with 8, 4 and 2 GPUs a node (the last in max mode), and
// one whose axis a0 rides IB whatever the nodes (not routed by routeSwitched).
func switchedModels(t testing.TB) []*Fabric {
	h100, _ := Profile("h100")
	return []*Fabric{
		h100,
		mustResolve(t, `{"base":"b200","gpus_per_node":4}`).(*Fabric),
		mustResolve(t, `{"base":"h100","gpus_per_node":2,"mode":"max"}`).(*Fabric),
		mustResolve(t, `{"base":"h100","gpus_per_node":2,"axis_links":{"a0":"ib"}}`).(*Fabric),
	}
}

// TestPropertyRouterAtOrAbovePhysics: for random transfer sets, the priced bandwidth
// term is never below the physical bounds of the same bytes computed independently:
// the injection bound (what a device sends or receives over all its links) and, on
// every torus axis, the cut bound (bytes that cross between the two halves of the ring
// over the links that cross the cut).
func TestPropertyRouterAtOrAbovePhysics(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 300 {
		m := randomMesh(t, rng, 256)
		n := m.NumDevices()
		var fs []flow
		for range 1 + rng.IntN(4*n) {
			fs = append(fs, flow{rng.IntN(n), rng.IntN(n), 1 + rng.Int64N(1<<24)})
		}
		for _, f := range routerModels(t) {
			got := f.NewRouter(m).Price(listTraffic(m, AllToAllV, fs))
			name := fmt.Sprintf("%d %s %s", i, f.Name(), m)
			in, out := make([]float64, n), make([]float64, n)
			for _, x := range fs {
				if x.from != x.to {
					out[x.from] += float64(x.bytes)
					in[x.to] += float64(x.bytes)
				}
			}
			peak := f.PeakIngress(m)
			for d := range n {
				assert.GreaterOrEqual(t, got.BandwidthUS*(1+1e-9), max(in[d], out[d])/peak/float64(max(1, nodeShare(f, m))), "%s: injection of %d", name, d)
			}
			if f.gpusPerNode > 0 {
				continue
			}
			for a, rt := range f.routes(m) {
				if rt.topo == switched || rt.n < 2 {
					continue
				}
				// Bytes whose ends lie in different halves of axis a.
				half := rt.n / 2
				cross := 0.0
				coords := make([]int, len(m.Axes))
				for _, x := range fs {
					ca := m.Coords(x.from, coords)[a] < half
					cb := m.Coords(x.to, coords)[a] < half
					if ca != cb {
						cross += float64(x.bytes)
					}
				}
				// Links across the cut, both directions: per line 1 each way on a line,
				// 2 each way on a ring (1 on a one-way ring).
				lines := float64(n / rt.n)
				links := 2 * lines
				switch rt.topo {
				case ringBidi:
					links = 4 * lines
				case ringUni:
					links = 2 * lines
				}
				assert.GreaterOrEqual(t, got.BandwidthUS*(1+1e-9), cross/(links*rt.bw), "%s: cut of axis %d", name, a)
			}
		}
	}
}

// nodeShare is how many devices' worth of NICs one device may borrow on a GPU model: a
// lone device sending across nodes uses every NIC of its node.
func nodeShare(f *Fabric, m *sharding.Mesh) int {
	if f.gpusPerNode == 0 {
		return 1
	}
	return min(f.gpusPerNode, m.NumDevices())
}

func TestRouterEmpty(t *testing.T) {
	f, _ := Profile("tpu-v5p")
	m := testMesh(t, "x=4")
	got := f.NewRouter(m).Price(listTraffic(m, CollectivePermute, []flow{{1, 1, 100}}))
	assert.Zero(t, got.TimeUS)
	assert.False(t, math.IsNaN(got.TimeUS))
}
