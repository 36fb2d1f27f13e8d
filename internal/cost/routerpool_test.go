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

	c := NewCaches(CacheLimits{})
	compared := 0
	for range 600 {
		f, m := fabrics[rng.IntN(len(fabrics))], meshes[rng.IntN(len(meshes))]
		p := DigitPermutation{Digits: binaryDigits(m)}
		p.Src = rng.Perm(len(p.Digits))
		p.Bytes = []int64{1, 4096, 1 << 20, 123456789}[rng.IntN(4)]
		r := f.AcquireRouter(c, m)
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
	p := &c.routers
	p.Lock()
	defer p.Unlock()
	assert.LessOrEqual(t, p.n, DefaultCacheLimits.Routers)
	assert.Len(t, p.order, len(p.free), "order lists the keys that hold routers")
	assert.Equal(t, int64(600), p.hits+p.misses, "every acquire is a hit or a miss")
	assert.Positive(t, p.hits)
}

// TestRouterPoolBounds releases more routers than the pool holds, over more keys than
// it keeps, from several goroutines (the race detector checks the locking): the pool
// never holds more than its Routers limit, and what it evicts is the key released
// least recently.
func TestRouterPoolBounds(t *testing.T) {
	f, ok := Profile("tpu-v5p")
	require.True(t, ok)
	const most = 8
	c := NewCaches(CacheLimits{Routers: most})
	var meshes []*sharding.Mesh
	for i := range 2 * most {
		m, err := sharding.NewMesh("m", []sharding.Axis{{Name: "x", Size: 2 + i}}, nil)
		require.NoError(t, err)
		meshes = append(meshes, m)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range meshes {
				m := meshes[(i+g)%len(meshes)]
				rs := []*Router{f.AcquireRouter(c, m), f.AcquireRouter(c, m)}
				for _, r := range rs {
					r.Release()
				}
			}
		})
	}
	wg.Wait()
	p := &c.routers
	p.Lock()
	n, keys := p.n, len(p.free)
	p.Unlock()
	assert.Equal(t, most, n)
	assert.LessOrEqual(t, keys, most)
	assert.Equal(t, most, c.Stats().IdleRouters)

	// Sequentially: the last key released stays, the oldest goes first.
	last := meshes[len(meshes)-1]
	for _, m := range meshes {
		r := f.AcquireRouter(c, m)
		r.Release()
	}
	p.Lock()
	_, lastKept := p.free[f.MeshKey(last)]
	_, firstKept := p.free[f.MeshKey(meshes[0])]
	p.Unlock()
	assert.True(t, lastKept)
	assert.False(t, firstKept, "the least recently released key is evicted")

	// A router that was never pooled is not added by Release.
	fresh := f.NewRouter(meshes[0])
	fresh.Release()
	assert.Equal(t, most, c.Stats().IdleRouters)
}

// TestNilCachesCacheNothing: without caches a router is new, prices as a fresh one, and
// Release drops it; two pools never see each other's routers.
func TestNilCachesCacheNothing(t *testing.T) {
	f, ok := Profile("tpu-v5p")
	require.True(t, ok)
	m, err := sharding.NewMesh("m", []sharding.Axis{{Name: "x", Size: 4}, {Name: "y", Size: 4}, {Name: "z", Size: 4}}, nil)
	require.NoError(t, err)
	p := DigitPermutation{Digits: binaryDigits(m), Bytes: 1 << 20}
	p.Src = []int{1, 0, 3, 2, 5, 4}

	var none *Caches
	r := f.AcquireRouter(none, m)
	require.Nil(t, r.memo)
	got, okGot := r.PriceDigitPermutation(p)
	r.Release()
	want, okWant := f.NewRouter(m).PriceDigitPermutation(p)
	require.Equal(t, okWant, okGot)
	assert.Equal(t, want.Estimate, got.Estimate)
	assert.NotSame(t, r, f.AcquireRouter(none, m), "nothing was pooled")
	assert.Equal(t, CacheStats{}, none.Stats())

	a, b := NewCaches(CacheLimits{}), &Caches{} // the zero value takes the default limits
	ra := f.AcquireRouter(a, m)
	ra.Release()
	assert.NotSame(t, ra, f.AcquireRouter(b, m), "b does not hold a's router")
	assert.Same(t, ra, f.AcquireRouter(a, m))
	assert.Equal(t, CacheStats{RouterHits: 1, RouterMisses: 1, UnitKeys: 1}, a.Stats())
}
