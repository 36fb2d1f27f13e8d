package planner

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestByColumn: placing pairs by a column that is a permutation of 0..n-1 gives the
// sorted order; anything else (a repeat, an id out of range) falls back on a stable
// sort, so equal keys keep their input order.
func TestByColumn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pairs [][2]int
		col   int
		want  [][2]int
	}{
		{"permutation by receiver", [][2]int{{3, 2}, {0, 0}, {2, 3}, {1, 1}}, 1, [][2]int{{0, 0}, {1, 1}, {3, 2}, {2, 3}}},
		{"permutation by sender", [][2]int{{3, 2}, {0, 0}, {2, 3}, {1, 1}}, 0, [][2]int{{0, 0}, {1, 1}, {2, 3}, {3, 2}}},
		{"repeated sender keeps input order", [][2]int{{1, 5}, {0, 4}, {1, 2}}, 0, [][2]int{{0, 4}, {1, 5}, {1, 2}}},
		{"id past the count", [][2]int{{7, 0}, {2, 1}}, 0, [][2]int{{2, 1}, {7, 0}}},
		{"empty", nil, 0, [][2]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.pairs)
			got := ByColumn(in, tc.col)
			assert.Equal(t, len(tc.want), len(got))
			for i := range tc.want {
				assert.Equal(t, tc.want[i], got[i], "pair %d", i)
			}
			assert.True(t, slices.IsSortedFunc(got, func(a, b [2]int) int { return cmp.Compare(a[tc.col], b[tc.col]) }))
		})
	}
}

// TestPairsByDigitsMatchThePattern: where a permute is a digit permutation, the pairs
// read off the digit map are the pattern walk's, pair for pair, on random permutes up
// to 4,096 devices (device orders included), and there are such permutes to check.
func TestPairsByDigitsMatchThePattern(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	checked := 0
	for i := range 300 {
		minDev, maxDev := 2, 256
		if i%10 == 0 {
			minDev, maxDev = 1025, 4096
		}
		m, shape, src, _ := randomReshard(t, rng, minDev, maxDev, []int64{1, 16, 64})
		if i%3 == 0 {
			m = withShuffledDevices(rng, m)
		}
		tgt := shuffleAtoms(rng, m, src)
		sp, ok := newSpace(m, shape, 8, src, tgt)
		if !ok {
			continue
		}
		p := newPattern(sp, sp.stateOf(src), sp.stateOf(tgt), true, 1)
		dp, ok := p.digitPermutation()
		if !ok {
			continue
		}
		name := fmt.Sprintf("%d %s %v %s->%s", i, m, shape, src, tgt)
		require.Equal(t, pairsByPattern(m, p), pairsByDigits(m, dp), name)
		checked++
	}
	require.Greater(t, checked, 100)
}

// withShuffledDevices is m with a random device order.
func withShuffledDevices(rng *rand.Rand, m *sharding.Mesh) *sharding.Mesh {
	c := *m
	c.DeviceIDs = rng.Perm(m.NumDevices())
	if err := c.Validate("mesh"); err != nil {
		panic(err)
	}
	return &c
}
