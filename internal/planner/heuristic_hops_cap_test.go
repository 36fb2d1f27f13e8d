package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// TestHopTablesBounded checks that the hop bound enumerates a table only when its work
// is within maxHopTableWork: a 65,536-device ring (one atom, 2^32 distances) gets none and
// a bound of 0 at once, a small ring its full table and a positive bound.
func TestHopTablesBounded(t *testing.T) {
	tpu, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	tests := []struct {
		mesh     string
		shape    []int64
		enumed   bool
		positive bool
	}{
		{"x=65536", []int64{65536}, false, false},
		{"x=4096", []int64{4096}, false, false},
		{"x=256", []int64{256}, true, true},
		{"x=8", []int64{8}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.mesh, func(t *testing.T) {
			m := mustMesh(t, tc.mesh)
			src, tgt := mustSharding(t, m, tc.shape, `[["x"]]`), mustSharding(t, m, tc.shape, `[null]`)
			sp, ok := newSpace(m, tc.shape, 32, src, tgt)
			require.True(t, ok)
			r := &Request{Mesh: m, Shape: tc.shape, ElemBits: 32, Source: src, Target: tgt, Model: tpu}
			hb := newHopBound(sp, r, sp.stateOf(tgt))
			require.NotNil(t, hb)
			got := hb.dist(sp.stateOf(src))
			assert.Equal(t, tc.positive, got > 0, "bound %v", got)
			for k, ax := range hb.axes {
				assert.Equal(t, tc.enumed, ax.tab != nil, "axis %d's table", k)
			}
		})
	}
}

func TestHopTableWork(t *testing.T) {
	m := mustMesh(t, "x=65536,y=4")
	shape := []int64{65536, 4}
	src := mustSharding(t, m, shape, `[["x"],["y"]]`)
	sp, ok := newSpace(m, shape, 32, src, src)
	require.True(t, ok)
	var big, small []uint8
	for a, at := range sp.atoms {
		if at.Size == 65536 {
			big = append(big, uint8(a))
		} else {
			small = append(small, uint8(a))
		}
	}
	require.NotEmpty(t, big)
	require.NotEmpty(t, small)
	assert.Equal(t, 4*4, hopTableWork(sp, 4, small, nil))
	assert.Equal(t, maxHopTableWork+1, hopTableWork(sp, 1, big, big), "saturates, never overflows")
	assert.Equal(t, maxHopTableWork+1, hopTableWork(sp, 1<<40, small, small))
}
