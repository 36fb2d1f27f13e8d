package planner

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunsExpandToTheLists: expanded runs are exactly the explicit lists (as multisets),
// for random reshards up to 4,096 devices; and on a large transpose (d=1024) the runs are
// few (the compact form is what makes their lists usable).
func TestRunsExpandToTheLists(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for i := range 120 {
		minDev, maxDev := 2, 64
		if i%6 == 0 {
			minDev, maxDev = 256, 4096
		}
		m, shape, src, tgt := randomReshard(t, rng, minDev, maxDev, []int64{1, 16})
		name := fmt.Sprintf("%d %s %v %s->%s", i, m, shape, src, tgt)
		want, err := TransfersContext(context.Background(), m, shape, 32, src, tgt, false)
		require.NoError(t, err, name)
		runs, complete, err := TransferRunsContext(context.Background(), m, shape, 32, src, tgt, false, 1<<20)
		require.NoError(t, err, name)
		require.True(t, complete, name)
		var got []Transfer
		for _, r := range runs {
			got = append(got, r.Expand()...)
		}
		sortTransfers(want)
		sortTransfers(got)
		require.Equal(t, want, got, name)
		if len(want) > 0 {
			_, complete, _ = TransferRunsContext(context.Background(), m, shape, 32, src, tgt, false, len(runs)-1)
			assert.Equal(t, len(runs) == 0, complete, "%s: a budget below the runs needed is reported", name)
		}
		shuffled := shuffleAtoms(rng, m, src)
		prs, ok := PairRuns(m, shape, src, shuffled, 1<<20)
		require.True(t, ok, name)
		var pairs [][2]int
		for _, r := range prs {
			pairs = append(pairs, r.Expand()...)
		}
		wantPairs := Pairs(m, shape, src, shuffled)
		slices.SortFunc(pairs, func(a, b [2]int) int { return cmp.Compare(a[1], b[1]) })
		require.Equal(t, wantPairs, pairs, name)
	}
	// The large-mesh transpose, on 1,024 devices: 1,024 x 1,023 transfers in a few runs.
	m := mustMesh(t, "d=1024")
	shape := []int64{4096, 4096}
	src, tgt := mustSharding(t, m, shape, `["d", null]`), mustSharding(t, m, shape, `[null, "d"]`)
	runs, complete, err := TransferRunsContext(context.Background(), m, shape, 16, src, tgt, false, 1<<16)
	require.NoError(t, err)
	require.True(t, complete)
	n := 0
	for _, r := range runs {
		n += r.Count
	}
	assert.Equal(t, 1024*1023, n)
	assert.LessOrEqual(t, len(runs), 2*1024, "one or two runs per receiver at most")
	t.Logf("d=1024 transpose: %d transfers in %d runs", n, len(runs))
}

func sortTransfers(ts []Transfer) {
	slices.SortFunc(ts, func(a, b Transfer) int {
		return cmp.Or(cmp.Compare(a.To, b.To), cmp.Compare(a.From, b.From), cmp.Compare(a.Ranges[0][0], b.Ranges[0][0]))
	})
}

// TestPairRunsFromDigitsEqualTheListedRuns: the pair runs written from a digit
// permutation's digits are exactly the runs of its listed pairs (same runs, same order,
// same budget verdict), on random permutes up to 4,096 devices over even and uneven
// dims, and on 65,536-device swaps.
func TestPairRunsFromDigitsEqualTheListedRuns(t *testing.T) {
	type reshard struct {
		m        *sharding.Mesh
		shape    []int64
		src, tgt sharding.Sharding
	}
	var cases []reshard
	rng := rand.New(rand.NewPCG(65, 536))
	for i := range 300 {
		minDev, maxDev := 2, 64
		if i%5 == 0 {
			minDev, maxDev = 256, 4096
		}
		m, shape, src, tgt := randomReshard(t, rng, minDev, maxDev, []int64{1, 16})
		if i%3 != 0 {
			tgt = shuffleAtoms(rng, m, src)
		}
		cases = append(cases, reshard{m, shape, src, tgt})
	}
	// 300 cases above, then the 65,536-device swaps.
	for _, c := range []struct{ mesh, src, tgt string }{
		{"a=16,b=16,c=16,d=16", `[["a","b"],["c","d"]]`, `[["c","d"],["a","b"]]`},
		{"a=16,b=16,c=16,d=16", `[["a","b"],["c","d"]]`, `[["a","d"],["c","b"]]`},
		{"a=256,b=256", `[["a","b"],null]`, `[["b","a"],null]`},
		{"a=256,b=256", `["a","b"]`, `["b","a"]`},
		{"x=64,y=32,z=32", `[["y","z"],"x"]`, `[["z","y"],"x"]`},
		{"x=64,y=32,z=32", `["y","z"]`, `["z","y"]`},
	} {
		m := mustMesh(t, c.mesh)
		for _, shape := range [][]int64{{65536, 65536}, {65535, 1000}} {
			cases = append(cases, reshard{m, shape, mustSharding(t, m, shape, c.src), mustSharding(t, m, shape, c.tgt)})
		}
	}
	direct := 0
	for i, c := range cases {
		name := fmt.Sprintf("%d %s %v %s->%s", i, c.m, c.shape, c.src, c.tgt)
		sp, ok := newSpace(c.m, c.shape, 8, c.src, c.tgt)
		if !ok {
			continue
		}
		dp, ok := newPattern(sp, sp.stateOf(c.src), sp.stateOf(c.tgt), true, 1).digitPermutation()
		if !ok {
			require.Less(t, i, 300, "%s: the 65,536-device swaps are digit permutations", name)
			continue
		}
		direct++
		want, wantOK := pairRunsListed(c.m, c.shape, c.src, c.tgt, 1<<20)
		got, gotOK := pairRunsByDigits(c.m, dp, 1<<20)
		require.Equal(t, wantOK, gotOK, name)
		require.Equal(t, want, got, name)
		for _, budget := range []int{0, 1, len(want) - 1, len(want)} {
			want, wantOK := pairRunsListed(c.m, c.shape, c.src, c.tgt, budget)
			got, gotOK := pairRunsByDigits(c.m, dp, budget)
			require.Equal(t, wantOK, gotOK, "%s: budget %d", name, budget)
			require.Equal(t, want, got, "%s: budget %d", name, budget)
		}
	}
	assert.Greater(t, direct, 150, "most cases are digit permutations")
	t.Logf("%d of %d reshards checked", direct, len(cases))
}

// pairRunsListed is PairRuns by listing and joining the pairs, whatever the pattern.
func pairRunsListed(m *sharding.Mesh, shape []int64, before, after sharding.Sharding, maxRuns int) ([]PairRun, bool) {
	sp, ok := newSpace(m, shape, 8, before, after)
	return listedPairRuns(m, shape, before, after, sp, ok, maxRuns)
}
