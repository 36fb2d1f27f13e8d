package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TestTransferCountBounds: TransferCount is an upper bound of len(Transfers), and
// TransfersContext stops on a done context.
func TestTransferCountBounds(t *testing.T) {
	tests := []struct {
		name, mesh, src, tgt string
		shape                []int64
	}{
		{"transpose 2x4", "x=2,y=4", `[{"x"}, {"y"}]`, `[{"y"}, {"x"}]`, []int64{64, 128}},
		{"rows to cols", "a=4,b=4", `[{"a", "b"}, {}]`, `[{}, {"a", "b"}]`, []int64{64, 64}},
		{"uneven", "x=3", `[{"x"}]`, `[{}]`, []int64{10}},
		{"replicated to sharded", "x=4", `[{}]`, `[{"x"}]`, []int64{16}},
		{"shift", "x=4", `[{"x"}]`, `[{"x"}]`, []int64{7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := sharding.ParseMeshString(tc.mesh, "mesh")
			require.NoError(t, err)
			src, err := sharding.ParseText(tc.src, m, tc.shape, "source")
			require.NoError(t, err)
			tgt, err := sharding.ParseText(tc.tgt, m, tc.shape, "target")
			require.NoError(t, err)
			got := int64(len(Transfers(m, tc.shape, 32, src, tgt, false)))
			bound := TransferCount(m, tc.shape, src, tgt)
			assert.LessOrEqual(t, got, bound)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err = TransfersContext(ctx, m, tc.shape, 32, src, tgt, false)
			assert.ErrorIs(t, err, context.Canceled, "a done context stops the list")
		})
	}
}

func TestTransferCountAmplifying(t *testing.T) {
	m, err := sharding.ParseMeshString("a=32,b=32", "mesh")
	require.NoError(t, err)
	shape := []int64{1024, 1024}
	src, err := sharding.ParseText(`[{"a", "b"}, {}]`, m, shape, "source")
	require.NoError(t, err)
	tgt, err := sharding.ParseText(`[{}, {"a", "b"}]`, m, shape, "target")
	require.NoError(t, err)
	assert.Equal(t, int64(1024*1024), TransferCount(m, shape, src, tgt), "every target column meets every source row")
}

// TestTransferCountIsAnUpperBound checks TransferCount >= len(Transfers) over every pair
// of a set of shardings (replicated, split, nested, uneven) on a 3-axis mesh.
func TestTransferCountIsAnUpperBound(t *testing.T) {
	m, err := sharding.ParseMeshString("x=2,y=2,z=2", "mesh")
	require.NoError(t, err)
	specs := []string{`[{}, {}]`, `[{"x"}, {}]`, `[{}, {"y"}]`, `[{"x"}, {"y"}]`, `[{"y"}, {"x"}]`, `[{"x", "y"}, {}]`,
		`[{}, {"z", "x"}]`, `[{"x", "y", "z"}, {}]`, `[{"z"}, {"x", "y"}]`, `[{"y", "x"}, {"z"}]`}
	for _, shape := range [][]int64{{8, 8}, {6, 10}, {3, 5}} {
		for _, a := range specs {
			for _, b := range specs {
				src, err := sharding.ParseText(a, m, shape, "source")
				require.NoError(t, err)
				tgt, err := sharding.ParseText(b, m, shape, "target")
				require.NoError(t, err)
				got, bound := len(Transfers(m, shape, 16, src, tgt, false)), TransferCount(m, shape, src, tgt)
				require.LessOrEqual(t, int64(got), bound, fmt.Sprintf("%v %s -> %s", shape, a, b))
			}
		}
	}
}

// transferCountByDevice is TransferCount device by device: the reference its per-dim
// closed form is held to.
func transferCountByDevice(m *sharding.Mesh, shape []int64, before, after sharding.Sharding) int64 {
	lb := sharding.NewLayout(m, shape, before)
	la := sharding.NewLayout(m, shape, after)
	coords := make([]int, len(m.Axes))
	var total int64
	for pos := range m.NumDevices() {
		m.Coords(pos, coords)
		boxes := int64(1)
		for d := range shape {
			s, e := la.Range(d, la.ShardIndex(d, coords))
			if s >= e {
				boxes = 0
				break
			}
			boxes *= (e-1)/lb.Tile[d] - s/lb.Tile[d] + 1
		}
		total += boxes
	}
	return total
}

// TestTransferCountIsTheSumOverDevices: the per-dim closed form equals the count device
// by device on random reshards (uneven tiles, sub-axes, replicated dims, up to 4,096
// devices), and bounds the transfers listed.
func TestTransferCountIsTheSumOverDevices(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 17))
	for i := range 300 {
		minDev, maxDev := 2, 64
		if i%10 == 0 {
			minDev, maxDev = 256, 4096
		}
		m, shape, src, tgt := randomReshard(t, rng, minDev, maxDev, []int64{1, 7, 16})
		name := fmt.Sprintf("%d %s %v %s->%s", i, m, shape, src, tgt)
		got := TransferCount(m, shape, src, tgt)
		require.Equal(t, transferCountByDevice(m, shape, src, tgt), got, name)
		if m.NumDevices() <= 64 {
			require.LessOrEqual(t, int64(len(Transfers(m, shape, 32, src, tgt, false))), got, name)
		}
	}
}
