package cost

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// docDelta is the tolerance against COSTMODEL.md's figures, which are rounded to 3
// decimals (µs); it is far inside the 0.5% the issue allows.
const docDelta = 0.001

func testMesh(t testing.TB, s string) *sharding.Mesh {
	t.Helper()
	m, err := sharding.ParseMeshString(s, "mesh")
	require.NoError(t, err)
	return m
}

// group returns the full axes of m with the given names.
func group(t testing.TB, m *sharding.Mesh, names ...string) []sharding.AxisRef {
	t.Helper()
	refs := make([]sharding.AxisRef, len(names))
	for i, n := range names {
		j := m.AxisIndex(n)
		require.GreaterOrEqual(t, j, 0, "axis %q", n)
		refs[i] = sharding.FullAxis(m.Axes[j])
	}
	return refs
}

func mustResolve(t testing.TB, raw string) Model {
	t.Helper()
	m, err := Resolve(json.RawMessage(raw), "cost_model")
	require.NoError(t, err)
	return m
}

// formulas is m priced by B.1-B.4's formulas: without its collectives figures (which
// price GPU collectives as NCCL runs them, see nccl_test.go).
func formulas(t testing.TB, m Model) Model {
	t.Helper()
	info := m.(*Fabric).Info()
	if info.Collectives == nil {
		return m
	}
	info.Collectives = nil
	info.Name += "-formulas"
	f, err := New(info)
	require.NoError(t, err)
	return f
}

// TestWorkedExamples reproduces COSTMODEL.md (d) with the exact forms. Where an example
// gives several figures (sequential and overlapped, additive and max), each one has its
// own case with the model option that produces it.
func TestWorkedExamples(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		name   string
		model  string // cost_model JSON
		mesh   string
		kind   Kind
		bytes  int64
		axes   []string
		hops   int
		wantBW float64
		wantT  float64 // 0: not given by the doc (latency not pinned)
		link   string  // "": not checked
	}{
		{"1 AG v5p wrapped axis of 4x4x4", `"tpu-v5p"`, "x=4,y=4,z=4", AllGather, 16777216, []string{"x"}, 0, 69.905, 71.905, "ici"},
		{"1b AG v5p unwrapped axis of 2x4x4", `"tpu-v5p"`, "x=2,y=4,z=4", AllGather, 16777216, []string{"y"}, 0, 139.810, 142.810, "ici"},
		{"2 AG_Y v5e {X:8,Y:4} no wrap", `"tpu-v5e"`, "X=8,Y=4", AllGather, 33554432, []string{"Y"}, 0, 559.241, 562.241, "ici"},
		{"3 AG_X v4 per Y-slice", `"tpu-v4"`, "X=4,Y=4,Z=4", AllGather, 2097152, []string{"X"}, 0, 17.476, 19.476, "ici"},
		{"4 AG_XY v4 concurrent", `"tpu-v4"`, "X=4,Y=4,Z=4", AllGather, 8388608, []string{"X", "Y"}, 0, 43.691, 47.691, "ici"},
		{"5 AR_Z v4", `"tpu-v4"`, "X=4,Y=4,Z=4", AllReduce, 524288, []string{"Z"}, 0, 8.738, 12.738, "ici"},
		{"6 latency-bound AG v4 additive", `"tpu-v4"`, "X=4,Y=4,Z=4", AllGather, 256, []string{"X"}, 0, 0.002, 2.002, "ici"},
		{"6 latency-bound AG v4 max mode", `{"base":"tpu-v4","mode":"max"}`, "X=4,Y=4,Z=4", AllGather, 256, []string{"X"}, 0, 0.002, 2.000, "ici"},
		{"7 A2A v5p wrapped 8-axis", `"tpu-v5p"`, "x=4,y=4,z=8", AllToAll, 134217728, []string{"z"}, 0, 186.414, 190.414, "ici"},
		{"7 AG of the same V", `"tpu-v5p"`, "x=4,y=4,z=8", AllGather, 134217728, []string{"z"}, 0, 652.447, 656.447, "ici"},
		{"8 AG 8xH100", `"h100"`, "gpu=8", AllGather, 33554432, []string{"gpu"}, 0, 65.245, 76.045, "nvlink"},
		{"9 AR 8xH100 ring", `"h100"`, "gpu=8", AllReduce, 58720256, []string{"gpu"}, 0, 228.357, 243.357, "nvlink"},
		{"9 AR 8xH100 at NCCL's 370.8 GB/s", `{"base":"h100","efficiency":0.824}`, "gpu=8", AllReduce, 58720256, []string{"gpu"}, 0, 277.132, 277.132 + 15, "nvlink"},
		{"10 A2A 8xH100", `"h100-nvlink"`, "gpu=8", AllToAll, 536870912, []string{"gpu"}, 0, 130.489, 141.289, "nvlink"},
		{"10 AG of the same V", `"h100"`, "gpu=8", AllGather, 536870912, []string{"gpu"}, 0, 1043.916, 1043.916 + 10.8, "nvlink"},
		{"11 AG 2x8 H100 sequential", `"h100"`, "node=2,gpu=8", AllGather, gib, []string{"node", "gpu"}, 0, 3430.009, 0, "nvlink"},
		{"11 AG 2x8 H100 overlapped", `{"base":"h100","hierarchy":"overlapped"}`, "node=2,gpu=8", AllGather, gib, []string{"node", "gpu"}, 0, 2087.831, 0, "nvlink"},
		{"12 AR 4x8 H100 sequential", `"h100"`, "node=4,gpu=8", AllReduce, 268435456, []string{"node", "gpu"}, 0, 2050.549, 0, "nvlink"},
		{"12 AR 4x8 H100 pipelined", `{"base":"h100","hierarchy":"overlapped"}`, "node=4,gpu=8", AllReduce, 268435456, []string{"node", "gpu"}, 0, 1043.916, 0, "nvlink"},
		{"13 A2A v6e 16x16", `"tpu-v6e"`, "x=16,y=16", AllToAll, gib, []string{"x", "y"}, 0, 93.207, 93.207 + 16, "ici"},
		{"13 AG v6e 16x16", `"tpu-v6e"`, "x=16,y=16", AllGather, gib, []string{"x", "y"}, 0, 2970.965, 2970.965 + 16, "ici"},
		// 14: DTensor's allgather_cost as a custom model. DTensor divides GiB by
		// GB/s, so its 87.7 "GB/s" is 87.7 GiB/s = 87.7*1.073741824 GB/s.
		{"14 DTensor-compat intra-host", `{"name":"dtensor","gpus_per_node":8,"links":{
			"nvlink":{"bandwidth_gbps":94.1671579648,"latency_us":0.6,"base_latency_us":6.6,"topology":"switch"},
			"ib":{"bandwidth_gbps":20.716774752256,"latency_us":2.7,"base_latency_us":6.6,"topology":"switch"}}}`,
			"gpu=8", AllGather, gib, []string{"gpu"}, 0, 9977.195, 9987.995, "nvlink"},
		{"14 DTensor-compat inter-host", `{"name":"dtensor","gpus_per_node":8,"axis_links":{"gpu":"ib"},"links":{
			"nvlink":{"bandwidth_gbps":94.1671579648,"latency_us":0.6,"base_latency_us":6.6,"topology":"switch"},
			"ib":{"bandwidth_gbps":20.716774752256,"latency_us":2.7,"base_latency_us":6.6,"topology":"switch"}}}`,
			"gpu=8", AllGather, gib, []string{"gpu"}, 0, 45376.386 - 6.6 - 18.9, 45376.386, "ib"},
		{"16 permute shift +1 wrapped v5p", `"tpu-v5p"`, "x=4,y=4,z=4", CollectivePermute, 67108864, []string{"x"}, 1, 745.654, 746.654, "ici"},
		{"17 AR 2 v5p slices over DCN", `{"base":"tpu-v5p","axis_links":{"dcn":"dcn"}}`, "dcn=2,x=4,y=4,z=4", AllReduce, gib, []string{"dcn", "x", "y", "z"}, 0, 6599.038, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := formulas(t, mustResolve(t, tc.model))
			m := testMesh(t, tc.mesh)
			got := model.Estimate(Collective{Kind: tc.kind, Bytes: tc.bytes, Mesh: m, Axes: group(t, m, tc.axes...), Hops: tc.hops})
			assert.InDelta(t, tc.wantBW, got.BandwidthUS, docDelta, "bandwidth term")
			if tc.wantT != 0 {
				assert.InDelta(t, tc.wantT, got.TimeUS, docDelta, "time")
			}
			if tc.link != "" {
				assert.Equal(t, tc.link, got.Link)
			}
		})
	}
}

// TestWorkedExampleSequentialAxes is example 4's cross-check: gathering X then Y, one
// axis at a time, is the sum of two one-axis estimates (X on V/|Y|, then Y on V).
func TestWorkedExampleSequentialAxes(t *testing.T) {
	model, _ := Profile("tpu-v4")
	m := testMesh(t, "X=4,Y=4,Z=4")
	x := model.Estimate(Collective{Kind: AllGather, Bytes: 8388608 / 4, Mesh: m, Axes: group(t, m, "X")})
	y := model.Estimate(Collective{Kind: AllGather, Bytes: 8388608, Mesh: m, Axes: group(t, m, "Y")})
	assert.InDelta(t, 87.381, x.BandwidthUS+y.BandwidthUS, docDelta)
	both := model.Estimate(Collective{Kind: AllGather, Bytes: 8388608, Mesh: m, Axes: group(t, m, "X", "Y")})
	assert.Less(t, both.BandwidthUS, x.BandwidthUS+y.BandwidthUS, "concurrent axes beat one at a time")
}

// TestWorkedExampleP2P is example 15, a single transfer (0,0) -> (3,3) on a v5e 4x4
// using 2 ports: that is exactly the lower bound of section (c) for a permute over both
// axes (V/E with E = 2 links, 6 hops). The model itself prices a whole permutation in
// which every device sends, which can only cost more.
func TestWorkedExampleP2P(t *testing.T) {
	model, _ := Profile("tpu-v5e")
	m := testMesh(t, "x=4,y=4")
	c := Collective{Kind: CollectivePermute, Bytes: 16777216, Mesh: m, Axes: group(t, m, "x", "y"), Hops: 6}
	lb := model.LowerBound(c)
	assert.InDelta(t, 186.414, lb.BandwidthUS, docDelta)
	assert.InDelta(t, 192.414, lb.BandwidthUS+lb.LatencyUS, docDelta)
	assert.GreaterOrEqual(t, model.Estimate(c).TimeUS, lb.BandwidthUS+lb.LatencyUS)
}

// TestAllToAllRatios checks B.1's ratios of all_to_all to the exact all_gather.
func TestAllToAllRatios(t *testing.T) {
	cases := []struct {
		name     string
		topology string
		n        int
		want     float64
	}{
		{"wrapped ring N=4", "ring_bidi", 4, 1.0 / 3},
		{"wrapped ring N=8", "ring_bidi", 8, 0.2857142857},
		{"one-way ring N=8", "ring_uni", 8, 0.5},
		{"switch N=8", "switch", 8, 1.0 / 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := mustResolve(t, `{"links":{"ici":{"bandwidth_gbps":100,"topology":"`+tc.topology+`"}}}`)
			m := testMesh(t, "x="+strconv.Itoa(tc.n))
			c := Collective{Kind: AllToAll, Bytes: 1 << 30, Mesh: m, Axes: group(t, m, "x")}
			a2a := model.Estimate(c)
			c.Kind = AllGather
			ag := model.Estimate(c)
			assert.InDelta(t, tc.want, a2a.BandwidthUS/ag.BandwidthUS, 1e-9)
		})
	}
}
