package cost

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDigitUnitScalingIsExact prices random digit permutations on one router at many
// byte counts (the memo scales per-byte loads, or falls back past 2^40) and checks each
// answer equals, bit for bit, digitLinkLoad run on those bytes by a fresh router.
// (A failure past 2^40 bytes would be the fallback's, which is digitLinkLoad itself.)
func TestDigitUnitScalingIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 40))
	f, ok := Profile("tpu-v5p")
	require.True(t, ok)
	compared := 0
	for range 200 {
		m := randomMeshOf(t, rng, 1, 4, []int{2, 4, 8, 16})
		p := DigitPermutation{Digits: binaryDigits(m)}
		p.Src = rng.Perm(len(p.Digits))
		r := f.NewRouter(m)
		for _, b := range []int64{0, 1, 3, 4096, 1 << 20, 123456789, 1 << 33, 1 << 40, 1<<52 + 1} {
			p.Bytes = b
			got, ok := r.PriceDigitPermutation(p)
			ref := f.NewRouter(m)
			onAxis, sSet := ref.digitScratch()
			wantOK := ref.digitsOnAxes(p, onAxis)
			segmentSets(p, onAxis, sSet)
			w, base, used, okLoad := ref.digitLinkLoad(p, onAxis, sSet, float64(b), nil)
			require.Equal(t, wantOK && okLoad, ok || !used)
			if !ok || !used {
				continue
			}
			compared++
			lat, hops, _ := ref.digitLongestRoute(p, onAxis, sSet, maxDigitEnum)
			require.Equal(t, w.time, got.BandwidthUS, "bytes %d", b)
			if b < 1<<40 {
				// Past it sums round, and which of the lines of equal time the
				// unordered walk meets first decides the load, in both.
				require.Equal(t, w.load, got.MaxLinkBytes, "bytes %d", b)
			}
			require.Equal(t, w.class.String(), got.Link)
			require.Equal(t, base+lat, got.LatencyUS)
			require.Equal(t, hops, got.MaxHops)
		}
	}
	require.Greater(t, compared, 1000)
}
