package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TestTransferCountBounds: TransferCount is an upper bound of len(Transfers).
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
			got := int64(len(Transfers(m, tc.shape, 32, src, tgt)))
			bound := TransferCount(m, tc.shape, src, tgt)
			assert.LessOrEqual(t, got, bound)
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
