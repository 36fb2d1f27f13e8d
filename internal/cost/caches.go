package cost

// Caches keeps what pricing on a fabric and mesh computes for the requests after:
// idle routers with their own memos (AcquireRouter, Release; routerpool.go) and the
// digit units and axis loads every router of one fabric's figures and mesh shares
// (unitmemo.go). Entries are keyed by MeshKey, which holds every figure a price
// depends on, so two models share entries only when they price alike.
//
// One Caches serves concurrent requests (a server's is in its planner.Memos); it is
// safe for concurrent use. The zero value is ready to use with
// DefaultCacheLimits. A nil *Caches caches nothing: AcquireRouter builds a new router
// whose memos are its own, and Release drops it.
type Caches struct {
	limits  CacheLimits
	routers routerPool
	units   unitMemos
}

// CacheLimits bound what a Caches keeps. A field that is zero or negative takes
// DefaultCacheLimits' value.
type CacheLimits struct {
	// Routers is the most idle routers kept, over every fabric and mesh.
	Routers int
	// RouterMemo is the most entries a router's own memos keep when it goes back to
	// the pool (past it they are cleared; a digit unit is about 200 bytes).
	RouterMemo int
	// RouterDevices is the largest mesh (devices) whose routers keep their per-device
	// arrays when they go back to the pool.
	RouterDevices int
	// Units is the most digit units and axis loads kept over every fabric and mesh
	// (about 250 bytes each; a memo that finds the bound reached starts over).
	Units int
	// UnitKeys is the most fabric-and-mesh keys whose units are kept (past it every
	// memo starts over).
	UnitKeys int
}

// DefaultCacheLimits holds the pool to a few MiB of routers and the shared units to
// about 16 MiB, whatever the requests served.
var DefaultCacheLimits = CacheLimits{
	Routers:       32,
	RouterMemo:    1 << 12,
	RouterDevices: 1 << 14,
	Units:         1 << 16,
	UnitKeys:      256,
}

// NewCaches returns empty caches bounded by l.
func NewCaches(l CacheLimits) *Caches { return &Caches{limits: l} }

// orDefault is v, or def when v is not positive.
func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (c *Caches) maxRouters() int { return orDefault(c.limits.Routers, DefaultCacheLimits.Routers) }
func (c *Caches) maxRouterMemo() int {
	return orDefault(c.limits.RouterMemo, DefaultCacheLimits.RouterMemo)
}
func (c *Caches) maxRouterDevices() int {
	return orDefault(c.limits.RouterDevices, DefaultCacheLimits.RouterDevices)
}
func (c *Caches) maxUnits() int    { return orDefault(c.limits.Units, DefaultCacheLimits.Units) }
func (c *Caches) maxUnitKeys() int { return orDefault(c.limits.UnitKeys, DefaultCacheLimits.UnitKeys) }

// CacheStats is what a Caches holds and how often it served. The counts only grow.
type CacheStats struct {
	// IdleRouters are the routers in the pool; RouterHits the AcquireRouter calls it
	// served, RouterMisses those that built a new router.
	IdleRouters  int
	RouterHits   int64
	RouterMisses int64
	// Units are the shared digit units and axis loads, UnitKeys the fabric-and-mesh keys
	// they are kept under; UnitHits and UnitMisses count the lookups of routers that
	// did not hold the entry themselves.
	Units      int
	UnitKeys   int
	UnitHits   int64
	UnitMisses int64
}

// Stats reports what c holds (zero for nil).
func (c *Caches) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	var s CacheStats
	p := &c.routers
	p.Lock()
	s.IdleRouters, s.RouterHits, s.RouterMisses = p.n, p.hits, p.misses
	p.Unlock()
	u := &c.units
	u.Lock()
	s.UnitKeys = len(u.byKey)
	u.Unlock()
	s.Units = int(u.total.Load())
	s.UnitHits, s.UnitMisses = u.hits.Load(), u.misses.Load()
	return s
}
