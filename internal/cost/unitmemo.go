package cost

import (
	"sync"
	"sync/atomic"
)

// The routers of one pool key (one fabric's figures and one mesh) share a memo of the
// digit units and axis loads they compute (unitMemo): what those cost depends on the
// key alone, and computing one is expensive (tens of µs on testgen.RandomSetMesh, route
// search included), where looking one up costs a map probe. Each router keeps its own
// unsynchronised copy of what it has looked up (digitUnits, axisLoads) in front of the
// shared one.
//
// A request uses about three routers of its key at once (its search, the exact pass's
// fork, the side work), and a router's own maps are cleared past RouterMemo entries,
// which routers on testgen.RandomSetMesh reach (about 4,000 units each). Shared, the
// units survive both: testgen.RandomSet plans 15-23% faster on median in a loop than
// with per-router maps alone.
//
// Units are never changed once published: a unit whose longest route must be looked for
// again under a larger cap is copied first (digitUnitOf). Every version of a unit prices
// alike (a route found is exact; one not found under a cap is not found under a smaller
// one), so what a plan costs never depends on which router computed what first.

// unitMemo is the digit units and axis loads of one pool key; set is the unitMemos it
// belongs to (its bound and counts).
type unitMemo struct {
	mu    sync.RWMutex
	units map[string]*digitUnit
	loads map[string]axisLoadRes
	set   *unitMemos
	most  int // the set's bound on entries over every key
}

// unitMemos holds a Caches' memos by pool key; total counts their entries over all
// keys, hits and misses the lookups of unit and load.
type unitMemos struct {
	sync.Mutex
	byKey        map[string]*unitMemo
	total        atomic.Int64
	hits, misses atomic.Int64
}

// of is the shared memo of key in c (p is c.units).
func (p *unitMemos) of(c *Caches, key string) *unitMemo {
	p.Lock()
	defer p.Unlock()
	if m, ok := p.byKey[key]; ok {
		return m
	}
	if len(p.byKey) >= c.maxUnitKeys() {
		for _, old := range p.byKey { // routers still using one recompute what they miss
			old.mu.Lock()
			p.total.Add(-int64(len(old.units) + len(old.loads)))
			clear(old.units)
			clear(old.loads)
			old.mu.Unlock()
		}
		clear(p.byKey)
	}
	if p.byKey == nil {
		p.byKey = map[string]*unitMemo{}
	}
	m := &unitMemo{units: map[string]*digitUnit{}, loads: map[string]axisLoadRes{}, set: p, most: c.maxUnits()}
	p.byKey[key] = m
	return m
}

// count records a lookup.
func (p *unitMemos) count(hit bool) {
	if hit {
		p.hits.Add(1)
	} else {
		p.misses.Add(1)
	}
}

// unit is the shared unit of key, if any.
func (m *unitMemo) unit(key []byte) (*digitUnit, bool) {
	m.mu.RLock()
	u, ok := m.units[string(key)]
	m.mu.RUnlock()
	m.set.count(ok)
	return u, ok
}

// putUnit publishes u (never changed after) as key's unit.
func (m *unitMemo) putUnit(key string, u *digitUnit) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.units[key]; !ok {
		m.makeRoom()
	}
	m.units[key] = u
}

// load is the shared axis load of key, if any.
func (m *unitMemo) load(key []byte) (axisLoadRes, bool) {
	m.mu.RLock()
	res, ok := m.loads[string(key)]
	m.mu.RUnlock()
	m.set.count(ok)
	return res, ok
}

// putLoad publishes res as key's axis load.
func (m *unitMemo) putLoad(key string, res axisLoadRes) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.loads[key]; !ok {
		m.makeRoom()
	}
	m.loads[key] = res
}

// makeRoom counts one more entry, first clearing m when every memo of its set together
// holds the set's bound (m is locked).
func (m *unitMemo) makeRoom() {
	total := &m.set.total
	if total.Load() >= int64(m.most) {
		total.Add(-int64(len(m.units) + len(m.loads)))
		clear(m.units)
		clear(m.loads)
	}
	total.Add(1)
}
