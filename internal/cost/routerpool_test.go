package cost

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TestPooledRouterPricesAsFresh prices random digit permutations with pooled routers,
// released and acquired between calls and shared by several models and meshes (so
// memos filled under one key must not serve another), and checks every answer equals,
// bit for bit, a fresh router's. Models that differ only in a figure the memo holds
// (a latency, a bandwidth) get different keys.
func TestPooledRouterPricesAsFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 24))
	v5p, ok := Profile("tpu-v5p")
	require.True(t, ok)
	slow := mustResolve(t, `{"base":"tpu-v5p","links":{"ici":{"bandwidth_gbps":45,"latency_us":2,"topology":"torus","wrap":"cube"}}}`).(*Fabric)
	ring := mustResolve(t, `{"links":{"ici":{"bandwidth_gbps":90,"latency_us":1,"topology":"ring_bidi"}}}`).(*Fabric)
	fabrics := []*Fabric{v5p, slow, ring}
	meshes := []*sharding.Mesh{}
	for _, spec := range [][]sharding.Axis{
		{{Name: "x", Size: 4}, {Name: "y", Size: 4}, {Name: "z", Size: 4}},
		{{Name: "x", Size: 8}, {Name: "y", Size: 8}},
		{{Name: "x", Size: 4}, {Name: "y", Size: 16}},
	} {
		m, err := sharding.NewMesh("m", spec, nil)
		require.NoError(t, err)
		meshes = append(meshes, m)
	}
	keys := map[string]bool{}
	for _, f := range fabrics {
		for _, m := range meshes {
			keys[f.MeshKey(m)] = true
		}
	}
	require.Len(t, keys, len(fabrics)*len(meshes), "every fabric and mesh has its own key")

	compared := 0
	for range 600 {
		f, m := fabrics[rng.IntN(len(fabrics))], meshes[rng.IntN(len(meshes))]
		p := DigitPermutation{Digits: binaryDigits(m)}
		p.Src = rng.Perm(len(p.Digits))
		p.Bytes = []int64{1, 4096, 1 << 20, 123456789}[rng.IntN(4)]
		r := f.AcquireRouter(m)
		got, okGot := r.PriceDigitPermutation(p)
		r.Release()
		want, okWant := f.NewRouter(m).PriceDigitPermutation(p)
		require.Equal(t, okWant, okGot)
		assert.Equal(t, want.Estimate, got.Estimate)
		assert.Equal(t, want.MaxLinkBytes, got.MaxLinkBytes)
		assert.Equal(t, want.MaxHops, got.MaxHops)
		compared++
	}
	require.Equal(t, 600, compared)
	routerPool.Lock()
	defer routerPool.Unlock()
	assert.LessOrEqual(t, routerPool.n, maxPooledRouters)
	assert.Len(t, routerPool.order, len(routerPool.free), "order lists the keys that hold routers")
}

// TestRouterPoolBounds releases more routers than the pool holds, over more keys than
// it keeps, from several goroutines (the race detector checks the locking): the pool
// never holds more than maxPooledRouters, and what it evicts is the key released least
// recently.
func TestRouterPoolBounds(t *testing.T) {
	f, ok := Profile("tpu-v5p")
	require.True(t, ok)
	var meshes []*sharding.Mesh
	for i := range 2 * maxPooledRouters {
		m, err := sharding.NewMesh("m", []sharding.Axis{{Name: "x", Size: 2 + i}}, nil)
		require.NoError(t, err)
		meshes = append(meshes, m)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range meshes {
				m := meshes[(i+g)%len(meshes)]
				rs := []*Router{f.AcquireRouter(m), f.AcquireRouter(m)}
				for _, r := range rs {
					r.Release()
				}
			}
		})
	}
	wg.Wait()
	routerPool.Lock()
	n, keys := routerPool.n, len(routerPool.free)
	routerPool.Unlock()
	assert.Equal(t, maxPooledRouters, n)
	assert.LessOrEqual(t, keys, maxPooledRouters)

	// Sequentially: the last key released stays, the oldest goes first.
	last := meshes[len(meshes)-1]
	for _, m := range meshes {
		r := f.AcquireRouter(m)
		r.Release()
	}
	routerPool.Lock()
	_, lastKept := routerPool.free[f.MeshKey(last)]
	_, firstKept := routerPool.free[f.MeshKey(meshes[0])]
	routerPool.Unlock()
	assert.True(t, lastKept)
	assert.False(t, firstKept, "the least recently released key is evicted")

	// A router that was never pooled is not added by Release.
	fresh := f.NewRouter(meshes[0])
	fresh.Release()
	routerPool.Lock()
	assert.Equal(t, maxPooledRouters, routerPool.n)
	routerPool.Unlock()
}
