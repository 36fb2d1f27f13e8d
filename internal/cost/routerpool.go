package cost

import (
	"fmt"
	"slices"
	"sync"

	"github.com/shardplan/shardplan/internal/sharding"
)

// A Router's memos (digitUnits, axisLoads) hold what a digit permutation costs on its
// fabric and mesh whatever the tensor: they depend on the fabric's figures and the
// mesh alone. A planner request starts with none and fills them as its search prices
// permutes, and the next request on the same mesh would compute the same entries again
// (on testgen.RandomSet: about 28 cold digit units per median request, a tenth of its
// time). The pool (Caches) keeps routers with their memos warm between requests: a
// request takes one for its fabric and mesh (AcquireRouter) and gives it back when
// done (Release); a router is still used by one goroutine at a time.
//
// Bounds (CacheLimits): memos past RouterMemo entries are cleared before a router goes
// back, a router of a mesh larger than RouterDevices drops its per-device arrays, and
// the pool holds at most Routers routers, so it holds a few MiB whatever it has
// served.

// routerPool holds idle routers by pool key (poolKey), most recently returned last;
// order lists the keys that have some, by their last Release, oldest first, to evict
// from. hits and misses count AcquireRouter's calls that found one and that did not.
type routerPool struct {
	sync.Mutex
	free         map[string][]*Router
	order        []string
	n            int
	hits, misses int64
}

// take pops an idle router of key (nil: none); p is locked.
func (p *routerPool) take(key string) *Router {
	rs := p.free[key]
	if len(rs) == 0 {
		return nil
	}
	r := rs[len(rs)-1]
	rs[len(rs)-1] = nil
	p.free[key] = rs[:len(rs)-1]
	p.n--
	if len(rs) == 1 {
		delete(p.free, key)
		p.order = slices.DeleteFunc(p.order, func(k string) bool { return k == key })
	}
	return r
}

// AcquireRouter returns an idle router for m on f from c's pool, with the memos of the
// requests it served, or a new one. Give it back with Release when done; a router that
// is never released is simply collected. With c nil the router is new and its memos
// are its own.
func (f *Fabric) AcquireRouter(c *Caches, m *sharding.Mesh) *Router {
	if c == nil {
		return f.NewRouter(m)
	}
	key := f.poolKey(m)
	p := &c.routers
	p.Lock()
	r := p.take(key)
	if r == nil {
		p.misses++
	} else {
		p.hits++
	}
	p.Unlock()
	if r == nil {
		r = f.NewRouter(m)
		r.poolKey, r.caches = key, c
	}
	r.memo = c.units.of(c, key) // a pooled router's may have been dropped since (Units' bound)
	return r
}

// Release gives r back to the pool it came from (AcquireRouter's routers only; others
// are left to the collector). r must not be used after.
func (r *Router) Release() {
	r.done, r.stopped = nil, false
	c := r.caches
	if c == nil {
		return
	}
	if most := c.maxRouterMemo(); len(r.digitUnits) > most || len(r.axisLoads) > most {
		clear(r.digitUnits)
		clear(r.axisLoads)
	}
	if r.n > c.maxRouterDevices() {
		r.ring, r.devGen, r.devSlot, r.cnt, r.devs = nil, nil, nil, [2][]int32{}, nil
	}
	key := r.poolKey
	p := &c.routers
	p.Lock()
	defer p.Unlock()
	if p.free == nil {
		p.free = map[string][]*Router{}
	}
	if p.n >= c.maxRouters() && len(p.order) > 0 {
		p.take(p.order[0]) // evict from the key released least recently
	}
	p.free[key] = append(p.free[key], r)
	p.n++
	p.order = slices.DeleteFunc(p.order, func(k string) bool { return k == key })
	p.order = append(p.order, key)
}

// MeshKey names what f's prices on m depend on: equal keys price every collective and
// every transfer alike, so what is computed from those prices alone can be memoized by
// it across requests.
func (f *Fabric) MeshKey(m *sharding.Mesh) string { return f.poolKey(m) }

// poolKey names what a router's prices depend on: the fabric's figures (its validated
// profile: links, mode, hierarchy, nodes, axis links) and the mesh's axes. Equal keys
// price every transfer alike, so their routers' memos are interchangeable.
func (f *Fabric) poolKey(m *sharding.Mesh) string {
	if k := f.lastKey.Load(); k != nil && k.mesh == m {
		return k.key
	}
	f.keyOnce.Do(func() {
		i := f.info
		f.key = fmt.Sprintf("%s|%s|%g|%d|%v|%v|%s", i.Mode, i.Hierarchy, i.Efficiency, i.GPUsPerNode, i.AxisLinks, i.Links, collectivesKey(i.Collectives))
	})
	key := f.key + "|" + m.String()
	f.lastKey.Store(&meshKey{m, key})
	return key
}

// meshKey is a mesh's poolKey. Meshes are not changed once built, and the pointer keeps
// the mesh alive, so a pointer match is the same mesh.
type meshKey struct {
	mesh *sharding.Mesh
	key  string
}
