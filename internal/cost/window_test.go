package cost

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWindowMatchesTranslates: window by progressions gives exactly the floats of
// translating by every offset, on rings and lines, for offsets that are sums of
// progressions (shifted, in any order) and for offsets that are not.
func TestWindowMatchesTranslates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	fast := 0
	for i := range 3000 {
		n := 1 + rng.IntN(300)
		load := make([]float64, n)
		for x := range load {
			if rng.IntN(3) > 0 {
				load[x] = float64(rng.IntN(1<<20)) / 2 // whole and half bytes
			}
		}
		var offs []int
		if i%4 == 3 {
			for range 1 + rng.IntN(20) {
				offs = append(offs, rng.IntN(n))
			}
		} else {
			offs = []int{0}
			span := 0
			for range 1 + rng.IntN(3) {
				k := 2 + rng.IntN(4)
				room := (n - 1 - span) / (k - 1)
				if room < 1 {
					break
				}
				step := 1 + rng.IntN(room)
				var next []int
				for _, o := range offs {
					for j := range k {
						next = append(next, o+j*step)
					}
				}
				offs, span = next, span+(k-1)*step
			}
			shift := rng.IntN(n - span)
			for j := range offs {
				offs[j] += shift
			}
			rng.Shuffle(len(offs), func(a, b int) { offs[a], offs[b] = offs[b], offs[a] })
		}
		if len(offs) == 0 {
			continue
		}
		if _, _, ok := progressions(offs); ok {
			fast++
		}
		for _, cyclic := range []bool{true, false} {
			want, got := slices.Clone(load), slices.Clone(load)
			windowBy(want, make([]float64, n), offs, cyclic)
			window(got, make([]float64, n), offs, cyclic)
			require.Equal(t, want, got, "n=%d offs=%v cyclic=%v", n, offs, cyclic)
		}
	}
	require.Greater(t, fast, 500, "cases windowed by progressions")
}

// TestProgressionsOfDigitOffsets: the translates of binary digits factor into one
// progression per run of digits.
func TestProgressionsOfDigitOffsets(t *testing.T) {
	offs := []int{}
	for _, a := range []int{0, 8, 16, 24} {
		for _, b := range []int{0, 1, 2, 3} {
			offs = append(offs, a+b)
		}
	}
	shift, aps, ok := progressions(offs)
	require.True(t, ok)
	require.Equal(t, 0, shift)
	require.Equal(t, []progression{{1, 4}, {8, 4}}, aps)
	_, _, ok = progressions([]int{0, 1, 2, 3, 5, 6, 7, 9})
	require.False(t, ok)
}
