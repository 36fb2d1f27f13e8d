package planner

import (
	"sync"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// mapPool recycles maps of one type between searches, cleared: a request's memos
// (prices, heuristic parts, routes) grow to hundreds of entries, and growing them anew
// on every request was a fifth of the planner's allocations, which the collector then
// paid for again.
type mapPool[K comparable, V any] struct{ p sync.Pool }

// get returns an empty map.
func (mp *mapPool[K, V]) get() map[K]V {
	if m, ok := mp.p.Get().(map[K]V); ok {
		return m
	}
	return map[K]V{}
}

// put clears m and keeps it for a later get, unless it grew past maxPooledStates
// entries (clearing costs in proportion to its size, which the small searches that
// would reuse it should not pay). m must not be used after.
func (mp *mapPool[K, V]) put(m map[K]V) {
	if m == nil || len(m) > maxPooledStates {
		return
	}
	clear(m)
	mp.p.Put(m)
}

var (
	pricePool        mapPool[priceKey, float64]
	coverPool        mapPool[string, bool]
	refsPool         mapPool[uint64, []sharding.AxisRef]
	overlapPool      mapPool[string, float64]
	crossPool        mapPool[string, [2]float64]
	hopMemoPool      mapPool[uint64, float64]
	hopTablePool     mapPool[uint64, []float64]
	routePool        mapPool[routeKey, cost.Estimate]
	digitRoutePool   mapPool[digitKey, cost.Estimate]
	overlapCachePool = sync.Pool{New: func() any { return new([ovCacheSize]ovEntry) }}
)

// release gives the heuristic's memos back to their pools; b must not be used after.
func (b *bound) release() {
	overlapPool.put(b.ov)
	crossPool.put(b.cross)
	clear(b.ovCache[:])
	overlapCachePool.Put(b.ovCache)
	b.ov, b.cross, b.ovCache = nil, nil, nil
	if hb := b.hops; hb != nil {
		hopMemoPool.put(hb.memo)
		hopTablePool.put(hb.tables)
		hb.memo, hb.tables = nil, nil
	}
}
