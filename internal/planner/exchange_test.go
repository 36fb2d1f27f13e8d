package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// TestPriceDigitExchangeIsExact: where the direct all_to_all_v is a digit map with free
// digits (digitExchange), pricing it from the map equals routing every transfer the
// pattern lists (time, latency and bandwidth within 1e-9, bytes, the busiest device's
// peers and the longest route's hops exactly), on random reshards up to 4,096 devices
// and both torus profiles, with and without paired atoms (whose transfers from a
// receiver's own tile the router leaves out); and there are such reshards to check.
func TestPriceDigitExchangeIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	var models []*cost.Fabric
	for _, name := range []string{"tpu-v5p", "tpu-v5e"} {
		f, _ := cost.Profile(name)
		models = append(models, f)
	}
	checked, big, paired := 0, 0, 0
	for i := range 600 {
		minDev, maxDev := 2, 256
		if i%10 == 0 {
			minDev, maxDev = 1025, 4096
		}
		m, shape, src, tgt := randomReshard(t, rng, minDev, maxDev, []int64{1, 16, 64})
		sp, ok := newSpace(m, shape, 16, src, tgt)
		if !ok {
			continue
		}
		b, a := sp.stateOf(src), sp.stateOf(tgt)
		dp, peers, moving, ok := sp.digitExchange(b, a)
		if !ok {
			continue
		}
		name := fmt.Sprintf("%d %s %v %s->%s", i, m, shape, src, tgt)
		for _, f := range models {
			want := f.NewRouter(m).Price(newPattern(sp, b, a, false, 0).traffic(cost.AllToAllV))
			got, ok := f.NewRouter(m).PriceDigitExchange(dp, peers, moving)
			if want.Bytes == 0 {
				require.False(t, ok, "%s: nothing moves", name)
				continue
			}
			if !ok {
				continue // more assignments than the router enumerates
			}
			msg := name + " " + f.Name()
			require.InDelta(t, want.TimeUS, got.TimeUS, 1e-9*want.TimeUS, msg)
			require.InDelta(t, want.LatencyUS, got.LatencyUS, 1e-9*want.LatencyUS, msg)
			require.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*max(1, want.BandwidthUS), msg)
			require.Equal(t, want.Bytes, got.Bytes, msg)
			require.Equal(t, want.MaxPeers, got.MaxPeers, msg)
			require.Equal(t, want.MaxHops, got.MaxHops, msg)
			require.Equal(t, want.Link, got.Link, msg)
			checked++
			if dp.Same != nil {
				paired++
			}
			if m.NumDevices() > 1024 {
				big++
			}
		}
	}
	t.Logf("%d exchanges checked, %d with paired atoms, %d on more than 1,024 devices", checked, paired, big)
	require.Greater(t, checked, 100)
	require.Greater(t, paired, 30)
	require.Greater(t, big, 5)
}
