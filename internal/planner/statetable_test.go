package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStateTableActsAsAMap: random puts and gets on the search's state table agree with
// a Go map, through growth and clearing, for every key type the search uses (keys drawn
// from a small range so they collide and repeat).
func TestStateTableActsAsAMap(t *testing.T) {
	t.Run("smallKey", func(t *testing.T) {
		checkStateTable(t, func(rng *rand.Rand) smallKey { return smallKey(rng.Uint64N(3000)) })
	})
	t.Run("packedKey", func(t *testing.T) {
		checkStateTable(t, func(rng *rand.Rand) packedKey { return packedKey{rng.Uint64N(40), 7, rng.Uint64N(40), 0} })
	})
	t.Run("stringKey", func(t *testing.T) {
		checkStateTable(t, func(rng *rand.Rand) stringKey { return stringKey(fmt.Sprint(rng.IntN(2000))) })
	})
}

func checkStateTable[K searchKey](t *testing.T, key func(*rand.Rand) K) {
	rng := rand.New(rand.NewPCG(3, 5))
	tab := newStateTable[K]()
	want := map[K]seen{}
	for round := range 3 {
		for i := range 20000 {
			k := key(rng)
			if rng.IntN(2) == 0 {
				v := seen{g: rng.Float64(), h: float64(i), pass: int32(1 + rng.IntN(4))}
				tab.put(k, v)
				want[k] = v
				continue
			}
			got, ok := tab.get(k)
			w, wok := want[k]
			require.Equal(t, wok, ok, "round %d op %d: presence of %v", round, i, k)
			require.Equal(t, w, got, "round %d op %d: value of %v", round, i, k)
		}
		require.Equal(t, len(want), tab.len())
		require.LessOrEqual(t, 2*tab.len(), len(tab.slots), "at most half full")
		tab.clear()
		clear(want)
		require.Zero(t, tab.len())
	}
}
