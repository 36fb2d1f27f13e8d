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

// TestByReceiverOrder: byReceiver orders any list of transfers (in the walk's order,
// shuffled, or already in order) as a comparison sort by receiver, then by the ranges'
// starts does; and Transfers' lists of random exchanges come in that order.
func TestByReceiverOrder(t *testing.T) {
	less := func(a, b Transfer) int {
		if c := cmp.Compare(a.To, b.To); c != 0 {
			return c
		}
		for d := range a.Ranges {
			if c := cmp.Compare(a.Ranges[d][0], b.Ranges[d][0]); c != 0 {
				return c
			}
		}
		return 0
	}
	rng := rand.New(rand.NewPCG(5, 13))
	for i := range 300 {
		n := 1 + rng.IntN(40)
		var ts []Transfer
		for to := range n {
			// Distinct starts per receiver, as distinct source tiles have.
			for _, s := range rng.Perm(6)[:rng.IntN(4)] {
				ts = append(ts, Transfer{From: rng.IntN(n), To: to, Ranges: Range{{int64(s % 2), 9}, {int64(s), 9}}})
			}
		}
		want := slices.Clone(ts)
		slices.SortFunc(want, less)
		switch i % 3 {
		case 0:
			rng.Shuffle(len(ts), func(a, b int) { ts[a], ts[b] = ts[b], ts[a] })
		case 1:
			slices.Reverse(ts)
		}
		require.Equal(t, want, byReceiver(ts, n), "case %d", i)
	}
	m := mustMesh(t, "x=4,y=2,z=2")
	for _, c := range []struct{ src, tgt string }{
		{`[["x"],["y","z"]]`, `[["z","y"],["x"]]`},
		{`[["x","y"],null]`, `[null,["y","x"]]`},
		{`[["z"],["x"]]`, `[["x","z"],["y"]]`},
	} {
		shape := []int64{48, 20}
		got := Transfers(m, shape, 16, mustSharding(t, m, shape, c.src), mustSharding(t, m, shape, c.tgt), false)
		require.NotEmpty(t, got)
		assert.True(t, slices.IsSortedFunc(got, less), "%s -> %s", c.src, c.tgt)
	}
}
