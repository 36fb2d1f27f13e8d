package hlo

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// seedCollective is what seed 003's text says of one collective of its dumps.
type seedCollective struct {
	name   string
	kind   cost.Kind
	axes   string // the mesh axes, major to minor, comma-separated
	groups int
	remat  bool
}

// TestSeed003 decodes the four compiled dumps of seed 003 onto the meshes the seed's
// JAX code builds: every collective onto the axes the reshard names, the full
// rematerialization of case 4 (all-gather to [2048,2048], then a dynamic-slice fusion)
// found and none in cases 1-3.
func TestSeed003(t *testing.T) {
	big := "C=1,D=2,Y=8,X=4,T=4"
	cases := []struct {
		file   string
		mesh   string
		colls  []seedCollective
		remats int
	}{
		{"seed003_case1.hlo", "X=2,Y=4", []seedCollective{{"collective-permute", cost.CollectivePermute, "X,Y", 8, false}}, 0},
		{"seed003_case2.hlo", "X=2,Y=4", []seedCollective{
			{"all-to-all.1", cost.AllToAll, "Y:(2)2", 4, false},
			{"collective-permute", cost.CollectivePermute, "X,Y", 8, false},
		}, 0},
		{"seed003_case3.hlo", big, []seedCollective{{"all-to-all.1", cost.AllToAll, "X,T", 16, false}}, 0},
		{"seed003_case4.hlo", big, []seedCollective{
			{"all-gather", cost.AllGather, "X,Y", 8, true},
			{"all-gather.1", cost.AllGather, "D", 128, true},
		}, 1},
	}
	model, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", tc.file))
			require.NoError(t, err)
			m, err := Parse(string(src), Limits{})
			require.NoError(t, err)
			mesh, err := sharding.ParseMeshString(tc.mesh, "mesh")
			require.NoError(t, err)
			a, err := Analyze(context.Background(), m, Options{Mesh: mesh, Model: model})
			require.NoError(t, err)
			require.Len(t, a.Collectives, len(tc.colls))
			var total float64
			for i, want := range tc.colls {
				got := a.Collectives[i]
				assert.Equal(t, want.name, got.Name)
				assert.Equal(t, want.kind, got.Kind)
				assert.Equal(t, want.axes, axesText(got.MeshAxes), "%s: %s", got.Name, got.AxesNote)
				assert.Equal(t, want.groups, got.GroupCount)
				assert.Equal(t, want.remat, got.FullRematerialization, got.Name)
				assert.Positive(t, got.Cost.TimeUS, got.Name)
				assert.Positive(t, got.BytesPerDevice, got.Name)
				total += got.Cost.TimeUS
			}
			assert.InDelta(t, total, a.TimeUS, 1e-9)
			params := a.Parameters()
			require.Len(t, params, 1)
			require.NotNil(t, params[0].Read, params[0].Sharding)
			assert.Equal(t, []int64{2048, 2048}, params[0].GlobalShape, "every case reshards a [2048, 2048] array")
			require.Len(t, a.Remats, tc.remats)
			if tc.remats > 0 {
				r := a.Remats[0]
				assert.Equal(t, []string{"all-gather", "all-gather.1"}, r.Gathers)
				assert.Equal(t, "multiply_dynamic-slice_fusion", r.Slice)
				assert.Equal(t, []int64{2048, 2048}, r.Shape.Dims)
				assert.Equal(t, "param", r.Source)
				assert.Equal(t, "jit(reshard_4)/reshard", r.Metadata.OpName)
				// Both sides read back as the seed's reshard: [M @ D, N @ (X,Y)] -> [M, N @ (D,Y,X,T)].
				require.NotNil(t, r.From, r.Note)
				require.NotNil(t, r.To, r.Note)
				ps := func(s *sharding.Sharding) string { p, _ := s.PartitionSpecText(); return p }
				assert.Equal(t, "P('D', ('X','Y'))", ps(r.From))
				assert.Equal(t, "P(None, ('D','Y','X','T'))", ps(r.To))
			}
		})
	}
}

func axesText(axes []sharding.AxisRef) string {
	s := ""
	for i, a := range axes {
		if i > 0 {
			s += ","
		}
		s += a.String()
	}
	return s
}

// TestInferTargetTables evaluates seed 003 case 1's slice offsets, which XLA computes
// from tables of constants indexed by partition-id (subtracted, bitcast, through the
// fusion's parameters): within each X half, device y takes row block y/2 and column
// block y%2 of the local [1024,2048] buffer, replicated over X.
func TestInferTargetTables(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "seed003_case1.hlo"))
	require.NoError(t, err)
	m, err := Parse(string(src), Limits{})
	require.NoError(t, err)
	mesh, err := sharding.ParseMeshString("X=2,Y=4", "mesh")
	require.NoError(t, err)
	a, err := Analyze(context.Background(), m, Options{Mesh: mesh})
	require.NoError(t, err)
	fusion := m.Entry.Instr("bitcast_dynamic-slice_fusion")
	require.NotNil(t, fusion)
	got, err := a.inferTarget(m.Entry, fusion, 0, []int64{1024, 2048})
	require.NoError(t, err)
	assert.Equal(t, `[{"Y":(1)2}, {"Y":(2)2}]`, got.Body())

	_, err = a.inferTarget(m.Entry, m.Entry.Instr("collective-permute"), 0, []int64{1024, 2048})
	assert.ErrorContains(t, err, "no dynamic-slice")
}

// TestMemorySeed003Case4 follows case 4's schedule by hand (f32, one device):
//
//	param [1024,64]      256 KiB  held (parameter)
//	copy [1024,64]       256 KiB  until all-gather
//	all-gather [1024,2048] 8 MiB  until copy.1
//	copy.1 [1024,2048]     8 MiB  until all-gather.1
//	all-gather.1 [2048,2048] 16 MiB until the fusion
//	fusion [2048,8]       64 KiB  held (root)
//
// The peak is at all-gather.1: the parameter, the root, copy.1 and the whole tensor.
func TestMemorySeed003Case4(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "seed003_case4.hlo"))
	require.NoError(t, err)
	m, err := Parse(string(src), Limits{})
	require.NoError(t, err)
	a, err := Analyze(context.Background(), m, Options{})
	require.NoError(t, err)
	mem, err := a.Memory(context.Background())
	require.NoError(t, err)
	const KiB, MiB = 1 << 10, 1 << 20
	held := int64(256*KiB + 64*KiB)
	assert.Equal(t, held, mem.HeldBytes)
	got := map[string]int64{}
	for _, p := range mem.Timeline {
		got[p.Instr] = p.LiveBytes
	}
	pid := int64(4) // partition-id's u32[]
	assert.Equal(t, held+pid, got["partition-id"])
	assert.Equal(t, held+pid+256*KiB, got["copy"])
	assert.Equal(t, held+pid+256*KiB+8*MiB, got["all-gather"])
	assert.Equal(t, held+pid+8*MiB+8*MiB, got["copy.1"])
	assert.Equal(t, held+pid+8*MiB+16*MiB, got["all-gather.1"])
	assert.Equal(t, held+pid+16*MiB, got["multiply_dynamic-slice_fusion"])
	assert.Equal(t, held+pid+8*MiB+16*MiB, mem.PeakBytes)
	assert.Equal(t, "all-gather.1", mem.Timeline[mem.PeakIndex].Instr)
}
