package cost

// Test helpers the internal tests and, through export_test.go, the external ones share.

import (
	"fmt"
	"math/rand/v2"
	"testing"

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

// randomMeshOf draws a mesh of least to most axes named a0, a1, ..., each of a size from
// sizes.
func randomMeshOf(t testing.TB, r *rand.Rand, least, most int, sizes []int) *sharding.Mesh {
	var axes []sharding.Axis
	for i := range least + r.IntN(most-least+1) {
		axes = append(axes, sharding.Axis{Name: fmt.Sprintf("a%d", i), Size: sizes[r.IntN(len(sizes))]})
	}
	m, err := sharding.NewMesh("m", axes, nil)
	require.NoError(t, err)
	return m
}

// randomCase draws a mesh of up to 4 axes and a group of some of its axes or sub-axes.
func randomCase(r *rand.Rand, t testing.TB) Collective {
	m := randomMeshOf(t, r, 1, 4, sizes)
	var refs []sharding.AxisRef
	for _, a := range m.Axes {
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

// binaryDigits splits every axis of m (power-of-two sizes) into digits of size 2, minor
// first: the digits of a DigitPermutation that may move any bit of any coordinate.
func binaryDigits(m *sharding.Mesh) []Digit {
	var ds []Digit
	for i, a := range m.Axes {
		for w := 1; w < a.Size; w *= 2 {
			ds = append(ds, Digit{Axis: i, Size: 2, Weight: w})
		}
	}
	return ds
}
