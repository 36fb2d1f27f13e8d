package planner

import (
	"sync"
	"sync/atomic"

	"github.com/shardplan/shardplan/internal/cost"
)

// Memos keeps what planning computes from a cost model and a mesh alone, for the
// requests after: the heuristic's group bounds (groupBounds) and hop bounds
// (hopBound.dist), and the cost model's routers and digit units (cost.Caches). Every
// entry is keyed by what its value depends on: the model's prices on the mesh
// (cost.Fabric.MeshKey, which holds every figure a price depends on) and, for the
// heuristic's, the space's atoms. Two models share entries only when they price alike,
// and models that do not name their prices (no MeshKey) share nothing.
//
// A server builds one with NewMemos and passes it in every Request; it is safe for
// concurrent use, and no plan depends on what the memos hold. The zero
// value is ready to use with DefaultMemoLimits. A Request whose Memos is nil gets a
// fresh private one for the call: its searches still share what they compute, and
// nothing outlives the call.
type Memos struct {
	limits MemoLimits
	groups groupMemo
	hops   hopMemo

	costOnce sync.Once
	cost     *cost.Caches
}

// MemoLimits bound what a Memos keeps. A field that is zero or negative takes
// DefaultMemoLimits' value.
type MemoLimits struct {
	// GroupBounds is the most group bounds kept (one per model, mesh and atoms; past it
	// the memo starts over).
	GroupBounds int
	// HopBounds is the most hop bounds kept over every family (16 bytes of key and
	// value each, plus the maps' overhead; a family that finds the bound reached starts
	// over), HopFamilies the most families (one per model, mesh and atoms; past it
	// every family starts over).
	HopBounds   int
	HopFamilies int
	// Cost bounds the cost model's routers and digit units.
	Cost cost.CacheLimits
}

// DefaultMemoLimits keeps the heuristic's memos to about 10 MiB. testgen.RandomSet alone
// keeps 62,251 hop bounds in 14 families: at 1<<16 a second mesh's requests would start
// families over.
var DefaultMemoLimits = MemoLimits{
	GroupBounds: 1 << 12,
	HopBounds:   1 << 18,
	HopFamilies: 1 << 12,
	Cost:        cost.DefaultCacheLimits,
}

// NewMemos returns empty memos bounded by l.
func NewMemos(l MemoLimits) *Memos {
	return &Memos{limits: l, cost: cost.NewCaches(l.Cost)}
}

// orDefault is v, or def when v is not positive.
func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// costCaches is the cost model's caches (nil for nil memos: the cost model caches
// nothing).
func (m *Memos) costCaches() *cost.Caches {
	if m == nil {
		return nil
	}
	m.costOnce.Do(func() {
		if m.cost == nil {
			m.cost = cost.NewCaches(m.limits.Cost)
		}
	})
	return m.cost
}

// MemoStats is what a Memos holds and how often it served. The hit and miss counts
// only grow.
type MemoStats struct {
	// GroupBounds are the group bounds kept; GroupHits and GroupMisses count the
	// heuristic's lookups (one per search of a model that names its prices).
	GroupBounds int
	GroupHits   int64
	GroupMisses int64
	// HopBounds are the hop bounds kept over HopFamilies families; HopHits and
	// HopMisses count the lookups of searches that had not computed the bound
	// themselves.
	HopBounds   int
	HopFamilies int
	HopHits     int64
	HopMisses   int64
	// Cost is the cost model's routers and digit units.
	Cost cost.CacheStats
}

// Stats reports what m holds (zero for nil).
func (m *Memos) Stats() MemoStats {
	if m == nil {
		return MemoStats{}
	}
	var s MemoStats
	g := &m.groups
	g.Lock()
	s.GroupBounds, s.GroupHits, s.GroupMisses = len(g.m), g.hits, g.misses
	g.Unlock()
	h := &m.hops
	h.Lock()
	s.HopFamilies = len(h.families)
	h.Unlock()
	s.HopBounds = int(h.total.Load())
	s.HopHits, s.HopMisses = h.hits.Load(), h.misses.Load()
	s.Cost = m.costCaches().Stats()
	return s
}

// groupMemo holds groupBounds by model, mesh and atoms (atomsKey); hits and misses
// count its lookups.
type groupMemo struct {
	sync.Mutex
	m            map[string]groupBound
	hits, misses int64
}

// hopMemo holds the hop bounds by family (hopFamily); total counts the bounds in the
// families' maps, hits and misses the lookups in them.
type hopMemo struct {
	sync.Mutex
	families     map[string]*hopFamilyMemo
	total        atomic.Int64
	hits, misses atomic.Int64
}
