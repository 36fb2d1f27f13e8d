package cost

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRooflines: every built-in profile has a compute roof with a source for each
// figure, and the time is the longer of the FLOP and byte bounds.
func TestRooflines(t *testing.T) {
	for _, p := range Profiles() {
		r, ok := RooflineOf(p.Name)
		require.True(t, ok, p.Name)
		assert.Positive(t, r.PeakBF16TFLOPS, p.Name)
		assert.Positive(t, r.HBMGBps, p.Name)
		assert.NotEmpty(t, r.Sources["peak_bf16_tflops"], p.Name)
		assert.NotEmpty(t, r.Sources["hbm_gbps"], p.Name)
		for _, a := range p.Aliases {
			ra, ok := RooflineOf(a)
			require.True(t, ok, a)
			assert.Equal(t, r.PeakBF16TFLOPS, ra.PeakBF16TFLOPS)
		}
	}
	v5p, _ := RooflineOf("tpu-v5p")
	// 459e12 FLOP/s: 459e6 FLOPs a microsecond; 2765e9 B/s: 2.765e6 B a microsecond
	assert.InDelta(t, 2.0, v5p.TimeUS(918e6, 1), 1e-12)
	assert.InDelta(t, 3.0, v5p.TimeUS(1, 3*2.765e6), 1e-12)
	_, ok := RooflineOf("no-such-model")
	assert.False(t, ok)
}
