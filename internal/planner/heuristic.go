package planner

import (
	"math"
	"slices"
	"strconv"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// lowerBounder is implemented by cost models that can bound their own estimates from
// below (cost.Fabric). The search relies on the contract cost.Fabric.LowerBound
// documents: Estimate(c) is never below LowerBound(c) in any term, and
// LowerBound(c).BandwidthUS is at least the bytes a device must send or receive in c
// over its injection bandwidth on the links of c's group (per device on average for an
// all_to_all, whose bound is total traffic over total injection), with one injection
// bandwidth per group whatever the kind.
type lowerBounder interface {
	LowerBound(c cost.Collective) cost.Estimate
}

// bound is the A* heuristic: a lower bound, in µs, on the cost of every path from a
// state to the goal. It is the larger of two bounds, each admissible on its own; on
// models that count hops, the latency part of the second also covers the hop bound
// (heuristic_hops.go, time).
//
// # Collective count
//
// steps(s) (below) is a lower bound on the number of collectives (all_gather,
// all_to_all, collective_permute) on any path from s to the goal, and perStep is a lower
// bound on the search cost of any one of them, so steps(s) x perStep bounds the path's
// cost (slices cost nothing). perStep comes from probing every group of atoms once per
// request:
//
//   - with the model's LowerBound (cost.Fabric), it is latMin, the least LowerBound
//     latency of a collective_permute over any group; no collective of positive bytes has
//     a LowerBound latency below it, and Estimate never returns less than LowerBound;
//   - otherwise it is the least Estimate of an all_gather, all_to_all or
//     collective_permute over any group on the smallest input buffer any state can have
//     (every dim split by the product of all atoms): cost.Model promises that time does
//     not decrease as Bytes grows, and the search prices each kind over a group on a
//     buffer at least that large.
//
// # Missing bytes (models with LowerBound only)
//
// Let M(s) be the data (bytes) that devices lack of their goal tile in state s, summed
// over all N devices, and let inj be the largest injection bandwidth the model's
// LowerBound gives any group of atoms (probed once per request with a
// collective_permute, whose bound is bytes / injection). A slice receives nothing and
// only shrinks tiles, so M cannot drop. In a collective over group G, every byte a
// device gains of its goal tile is a byte it received, and
//
//	all_gather of V = k x in:   each device receives (k-1) x in = inj(G) x BW
//	all_to_all of V = k x in:   a group of k receives (k-1) x in in total (every device
//	                            keeps its own piece of its padded input) = k x inj(G) x BW
//	collective_permute of in:   each device receives at most in = inj(G) x BW
//
// where BW is LowerBound's bandwidth term for that collective. So one move lowers M by
// at most N x inj x BW <= N x inj x cost, and every path to the goal (M = 0) costs at
// least M(s) / (N x inj). A path that still has to move bytes also pays at least one
// collective's latency, at least latMin. That bound is max(latMin, M/(N x inj)) when
// M > 0, else 0.
//
// M itself is bounded from below without enumerating devices (missing below), so the
// heuristic is admissible but need not be consistent; the search re-opens a state when
// it finds a cheaper path to it, which keeps A* exact under an admissible heuristic.
type bound struct {
	sp        *space
	goal      state
	goalCount []int   // shard count per goal dim
	perStep   float64 // µs: no collective of the search costs less (0: unknown)

	// The missing-bytes bound; perByte is 0 when the model has no LowerBound.
	perByte   float64 // µs per byte of the average missing data: 1 / inj
	latMin    float64 // µs
	elemBytes float64
	goalElems float64   // E|T|: average goal tile elements (exact: sum of tiles / N)
	goalPad   []float64 // padded goal tile length per dim
	ov        map[string]float64
	ovCache   *[ovCacheSize]ovEntry // ov's entries whose key packs into a word, direct-mapped
	buf       []byte
	// inSt, inNx: where the atoms of the state (and of a move's successor) sit, for the
	// cut terms.
	inSt, inNx atomPlaces

	// The cut bound (models that know their links): cuts lists the torus half-cuts
	// whose major atom some state can use; totalBytes is the tensor's size times the
	// copies of the problem the search's moves keep apart (heuristic_cut.go).
	cuts       []halfCut
	totalBytes float64
	combine    func(lat, bw float64) float64
	additive   bool // the model prices a step as its latency plus its bandwidth term
	cross      map[string][2]float64
	hops       *hopBound // nil: the model counts no hops on this mesh
}

// halfCut is a torus axis' cut into the halves [0, n/2) and [n/2, n) as the heuristic
// sees it: the axis' major atom, whose digit (below q/2 or not) says which half a device
// is in, the bandwidth across the cut each way, and where the goal puts the atom.
type halfCut struct {
	atom    uint8
	bw      float64 // bytes per µs into either half
	goalDim int     // -1: the goal does not use the atom
	goalPos int
	goalLow float64 // the goal's fraction of the elements whose atom digit is in the low half
}

// newBound builds the heuristic for r, or returns nil when neither bound is available
// (the search is then plain Dijkstra).
func newBound(sp *space, r *Request, goal state) *bound {
	n := len(sp.atoms)
	if n == 0 || n > maxBoundAtoms {
		return nil
	}
	b := &bound{sp: sp, goal: goal, goalCount: make([]int, len(goal)), elemBytes: float64(r.ElemBits) / 8,
		goalElems: 1, goalPad: make([]float64, len(goal)), ov: overlapPool.get(), ovCache: overlapCachePool.Get().(*[ovCacheSize]ovEntry)}
	na := len(sp.atoms)
	b.inSt = atomPlaces{dim: make([]uint8, na), pos: make([]uint8, na)}
	b.inNx = atomPlaces{dim: make([]uint8, na), pos: make([]uint8, na)}
	for d, ids := range goal {
		c := int64(sp.count(ids))
		b.goalCount[d] = int(c)
		b.goalElems *= float64(sp.shape[d]) / float64(c)
		b.goalPad[d] = float64(sharding.CeilDiv(sp.shape[d], c))
	}
	lb, isLB := r.Model.(lowerBounder)
	// in: the smallest input buffer of any state (each dim split by every atom).
	all := int64(1)
	for _, a := range sp.atoms {
		all *= int64(a.Size)
	}
	minElems := int64(1)
	for _, D := range sp.shape {
		minElems *= sharding.CeilDiv(D, all)
	}
	in := sp.bytes(minElems)
	inj, lat, est := 0.0, math.Inf(1), math.Inf(1)
	if isLB {
		var ok bool
		if inj, lat, ok = groupBounds(sp, r, lb); !ok {
			return nil // no finite injection bandwidth: no useful bound
		}
	} else {
		eachGroup(sp, func(k int64, refs []sharding.AxisRef) bool {
			c := cost.Collective{Mesh: r.Mesh, Axes: refs}
			for _, kb := range [...]struct {
				kind  cost.Kind
				bytes int64
			}{{cost.AllGather, k * in}, {cost.AllToAll, k * in}, {cost.CollectivePermute, in}} {
				c.Kind, c.Bytes = kb.kind, kb.bytes
				est = min(est, r.Model.Estimate(c).TimeUS)
			}
			return true
		})
	}
	if pi, ok := r.Model.(interface{ PeakIngress(*sharding.Mesh) float64 }); ok {
		// Point-to-point steps are priced by their traffic, which may use every link
		// into a device at once (cost.Router): the bytes bound must allow for that.
		inj = max(inj, pi.PeakIngress(r.Mesh))
	}
	switch {
	case isLB:
		b.perByte, b.latMin = 1/inj, max(lat, 0)
		b.perStep = b.latMin
		if tb, ok := r.Model.(timeBounder); ok {
			b.additive = tb.Additive()
		}
		b.addCuts(r)
		b.hops = newHopBound(sp, r, goal)
	case est > 0 && !math.IsInf(est, 0):
		b.perStep = est
	default:
		return nil
	}
	return b
}

// eachGroup calls fn with every nonempty group of sp's atoms: its size and its refs
// (merged where adjacent, in the order the search prices them: sortedAtoms), in one
// reused buffer; 2^n - 1 groups. It stops when fn returns false.
func eachGroup(sp *space, fn func(k int64, refs []sharding.AxisRef) bool) {
	n := len(sp.atoms)
	order := make([]uint8, n)
	for a := range order {
		order[a] = uint8(a)
	}
	order = sortedAtoms(sp, order)
	refs := make([]sharding.AxisRef, 0, n)
	for g := uint64(1); g < 1<<n; g++ {
		refs = refs[:0]
		k := int64(1)
		for _, a := range order {
			if g&(1<<a) != 0 {
				refs = append(refs, sp.atoms[a])
				k *= int64(sp.atoms[a].Size)
			}
		}
		if !fn(k, sharding.MergeAdjacent(refs)) {
			return
		}
	}
}

// groupBounds is, over every group of sp's atoms, the largest injection bandwidth
// (bytes per µs) of a collective_permute and its smallest latency, as lb bounds them;
// ok is false when some group has no finite injection bandwidth. It depends on the
// model, the mesh and the atoms only, and a request scans 2^n - 1 groups (a tenth of a
// median request of testgen.RandomSet, once per searcher): on models that name
// what their prices depend on (cost.Fabric.MeshKey) it is memoized across requests
// (r.Memos).
func groupBounds(sp *space, r *Request, lb lowerBounder) (inj, lat float64, ok bool) {
	key, keyed := atomsKey(sp, r)
	var g *groupMemo // nil: nothing memoized
	if keyed && r.Memos != nil {
		g = &r.Memos.groups
		g.Lock()
		v, hit := g.m[key]
		if hit {
			g.hits++
		} else {
			g.misses++
		}
		g.Unlock()
		if hit {
			return v.inj, v.lat, v.ok
		}
	}
	const probe = 1 << 30
	inj, lat, ok = 0, math.Inf(1), true
	eachGroup(sp, func(_ int64, refs []sharding.AxisRef) bool {
		e := lb.LowerBound(cost.Collective{Mesh: r.Mesh, Axes: refs, Kind: cost.CollectivePermute, Bytes: probe})
		if e.BandwidthUS <= 0 || math.IsNaN(e.BandwidthUS) {
			ok = false
			return false
		}
		inj = max(inj, probe/e.BandwidthUS)
		lat = min(lat, e.LatencyUS)
		return true
	})
	if g != nil {
		g.Lock()
		if g.m == nil || len(g.m) >= orDefault(r.Memos.limits.GroupBounds, DefaultMemoLimits.GroupBounds) {
			g.m = map[string]groupBound{} // start over rather than grow
		}
		g.m[key] = groupBound{inj, lat, ok}
		g.Unlock()
	}
	return inj, lat, ok
}

// atomsKey names what the heuristic's model-and-mesh memos (groupBounds, hopFamily)
// depend on: the model's prices on the mesh (cost.Fabric.MeshKey) and sp's atoms. ok is
// false for models that do not name their prices.
func atomsKey(sp *space, r *Request) (string, bool) {
	if f := sp.family; f != nil {
		return f.key, f.ok // a space serves one request (its model and mesh)
	}
	return computeAtomsKey(sp, r)
}

// familyKey is a space's atomsKey.
type familyKey struct {
	key string
	ok  bool
}

// keyFamily computes sp's atomsKey for r once, for sp and the forks made after (a
// request's searches each ask for it twice).
func (sp *space) keyFamily(r *Request) {
	k, ok := computeAtomsKey(sp, r)
	sp.family = &familyKey{k, ok}
}

// computeAtomsKey is atomsKey, computed.
func computeAtomsKey(sp *space, r *Request) (string, bool) {
	mk, ok := r.Model.(interface{ MeshKey(*sharding.Mesh) string })
	if !ok {
		return "", false
	}
	b := []byte(mk.MeshKey(r.Mesh))
	for _, a := range sp.atoms {
		b = append(append(append(b, '|'), a.Name...), ':')
		b = append(strconv.AppendInt(b, int64(a.Pre), 10), ':')
		b = strconv.AppendInt(b, int64(a.Size), 10)
	}
	return string(b), true
}

// groupBound is a memoized groupBounds.
type groupBound struct {
	inj, lat float64
	ok       bool
}

// time is the heuristic of st in µs. With the bytes bounds (missing bytes, the cuts)
// it is the larger of steps x perStep and one latency with the bandwidth bound, or, when
// the model adds its terms, their sum: every collective of the path pays a latency of at
// least latMin and a bandwidth term of at least the bytes it moves over the bound's
// bandwidth (cost.Fabric.LowerBound's contract; TestPropertyCutBoundPerStep holds each
// term of every step to it), so the path pays max(steps, 1) latencies plus the bytes
// that must move over that bandwidth.
//
// The path's latencies also add up to at least the hop bound (hopBound: the hops some
// lacking byte must still travel), so the latency term is the larger of the two. On
// torus meshes, where small reshards are all latency, this is the heuristic's strength.
func (b *bound) time(st state) float64 {
	h, _ := b.timeOver(st, 0, math.Inf(1))
	return h
}

// timeOver is time and whether g plus it exceeds ub (over), computed cheapest part
// first and stopping as soon as g plus what is computed exceeds ub (h is then that
// part, not the bound): the
// search prunes such states without their bound, a third of the new states of the
// anytime pass. Each part is a lower bound of the whole (the missing bytes of the cut
// bound's, and the latency without the hop bound of the latency with it), so the states
// pruned are exactly those the whole bound prunes.
func (b *bound) timeOver(st state, g, ub float64) (h float64, over bool) {
	steps := b.steps(st)
	h = float64(steps) * b.perStep
	lat := float64(max(steps, 1)) * b.latMin
	bw := 0.0
	if b.perByte > 0 {
		if m := b.missing(st); m > 0 {
			bw = m * b.elemBytes * b.perByte
		}
	}
	if len(b.cuts) > 0 {
		if part := b.combineParts(h, lat, bw); g+part > ub {
			return part, true
		}
		b.inSt.set(st)
		for i := range b.cuts {
			c := &b.cuts[i]
			d, pos := b.inSt.at(c.atom)
			if x := b.crossAt(st, c, b.goal, c.goalDim, c.goalPos, true, d, pos); x > 0 {
				bw = max(bw, x/c.bw)
			}
		}
	}
	if b.hops != nil && bw < hopShare*b.hops.most {
		if part := b.combineParts(h, lat, bw); g+part > ub {
			return part, true
		}
		d := b.hops.dist(st)
		lat = max(lat, d)
		h = max(h, d)
	}
	h = b.combineParts(h, lat, bw)
	return h, g+h > ub
}

// combineParts is the bound from its parts: h the steps' (and hops') latency, lat the
// latency a path pays at least, bw the bandwidth term.
func (b *bound) combineParts(h, lat, bw float64) float64 {
	if bw <= 0 {
		return h
	}
	if b.additive {
		return lat + bw
	}
	return max(h, b.latMin, bw)
}

// steps is a lower bound on the number of collectives on any path from st to the goal:
// the dims whose shard count does not divide the goal's ("bad"), plus one if some other
// dim is not a prefix of its goal ("dirty").
//
// Why it is a lower bound. The bound is 0 at the goal, so it suffices that no slice
// lowers it and no collective lowers it by more than one. A bad dim is dirty (a goal
// prefix's count divides the goal's), appending an atom to a dim keeps a dirty dim
// dirty (its first mismatch stays) and a bad dim bad (c does not divide G, so neither
// does c x a). So a slice never lowers either term: a dim it turns from good-dirty to
// bad moves one unit from the second term to the first. A collective_permute keeps
// every count, so only the second term can drop, by one. An all_gather changes one dim,
// which can leave the bad set (then that dim, now good, can only join the dirty ones,
// and the other dims are untouched, so the second term stays) or stop being dirty
// (one unit). An all_to_all from dim d to dim e divides d's count and multiplies e's:
// only d can leave the bad set or stop being dirty; e, appended to, cannot stop being
// dirty and cannot leave the bad set. If d leaves the bad set and the second term drops,
// the good-dirty dim that vanished is e, which turned bad: a net drop of one.
func (b *bound) steps(st state) int {
	n, dirtyGood := 0, false
	for d, ids := range st {
		if b.goalCount[d]%b.sp.count(ids) != 0 {
			n++
			continue
		}
		g := b.goal[d]
		if !dirtyGood && (len(ids) > len(g) || !slices.Equal(ids, g[:len(ids)])) {
			dirtyGood = true
		}
	}
	if dirtyGood {
		n++
	}
	return n
}

// missing is a lower bound on the average over devices of the goal-tile elements a
// device lacks in st, E|T| - E|T ∩ S|, where T and S are a device's goal and current
// tiles (boxes, so |T ∩ S| is the product of the per-dim overlaps ov_d).
//
// E|T| is exact: the goal dims use disjoint atoms, whose coordinates are independent and
// uniform over devices, and the flat ceil tiles of a dim sum to its length. E|T ∩ S| is
// bounded above by E|S| (exact the same way) and, for every dim d0, by
// E[ov_d0] x prod over d != d0 of the padded goal tile length (ov_d <= that length on
// every device). E[ov_d0] depends only on the atoms of st[d0] and goal[d0], so it is
// computed exactly by enumerating their coordinates, once per distinct st[d0].
func (b *bound) missing(st state) float64 {
	sp := b.sp
	inter := 1.0
	for d, ids := range st {
		inter *= float64(sp.shape[d]) / float64(sp.count(ids))
	}
	for d0 := range st {
		v := b.overlap(d0, st[d0])
		for d := range st {
			if d != d0 {
				v *= b.goalPad[d]
			}
		}
		inter = min(inter, v)
	}
	return b.goalElems - inter
}

// ovCacheBits sizes the heuristic's overlap cache: a direct-mapped table of the
// overlaps whose key packs into a word (a miss, or a slot another key took, computes the
// overlap again, so the values are exact). The map it replaces took about 6% of a
// median request's search on testgen.RandomSet, in hashing and probing.
const (
	ovCacheBits = 9
	ovCacheSize = 1 << ovCacheBits
)

// ovEntry is a slot of the overlap cache: the packed key (0: empty) and its overlap.
type ovEntry struct {
	key uint64
	v   float64
}

// overlap is E[ov_d]: the average over devices of the overlap, along dim d, of a
// device's range under atoms ids and under the goal's atoms.
func (b *bound) overlap(d int, ids []uint8) float64 {
	sp := b.sp
	g := b.goal[d]
	D := sp.shape[d]
	if slices.Equal(ids, g) {
		return float64(D) / float64(sp.count(g))
	}
	if len(ids) <= 10 && d < 16 {
		// One word: six bits an atom id plus one, d above them (hashes faster than
		// the string key).
		k := uint64(d) << 60
		for i, a := range ids {
			k |= uint64(a+1) << (6 * i)
		}
		e := &b.ovCache[(k*0x9E3779B97F4A7C15)>>(64-ovCacheBits)]
		if e.key != k || k == 0 {
			e.key, e.v = k, b.computeOverlap(D, ids, g)
		}
		return e.v
	}
	b.buf = append(append(b.buf[:0], byte(d)), ids...)
	if v, ok := b.ov[string(b.buf)]; ok {
		return v
	}
	v := b.computeOverlap(D, ids, g)
	b.ov[string(b.buf)] = v
	return v
}

// computeOverlap is overlap without its memo.
func (b *bound) computeOverlap(D int64, ids, g []uint8) float64 {
	v, ok := b.nestedOverlap(D, ids, g)
	if !ok {
		v = b.averageOverlap(D, ids, g)
	}
	return v
}

// nestedOverlap is averageOverlap in closed form when both lists tile dim D evenly and
// their atom sizes agree position by position over the shorter list (the nested
// power-of-two tilings of most meshes, and mixed radices listed in the same order); ok
// is false otherwise.
//
// Why it is exact. As in averageOverlap, E[ov] is the number of elements t of [0, D)
// whose shard indices x(t) under ids and y(t) under g give the atoms both lists use the
// same coordinate, over C. With equal sizes position by position, both index systems
// are prefixes of one mixed radix r_1..r_l of L = max(cs, ct) digits, and L divides D
// (cs and ct do, and one divides the other), so each of the L digit strings w covers
// D/L elements, and ids's k-th atom reads digit k of w, g's j-th atom digit j. An atom
// at position k in ids and j in g asks digits k and j (both of base its size q) to be
// equal. The digits are free otherwise, so each constraint that joins two classes of
// tied digits divides the count of consistent w by q (union-find), and one that ties
// digits already tied (or k = j) changes nothing.
func (b *bound) nestedOverlap(D int64, ids, g []uint8) (float64, bool) {
	sp := b.sp
	short, long := ids, g
	if len(short) > len(long) {
		short, long = long, short
	}
	for k, a := range short {
		if sp.atoms[a].Size != sp.atoms[long[k]].Size {
			return 0, false
		}
	}
	cs, ct := int64(sp.count(ids)), int64(sp.count(g))
	if D%cs != 0 || D%ct != 0 {
		return 0, false
	}
	L := max(cs, ct)
	var parent [64]int8
	for i := range long {
		parent[i] = int8(i)
	}
	find := func(i int8) int8 {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	var pos [64]int8
	var inIDs uint64
	combos := 1.0
	for k, a := range ids {
		pos[a] = int8(k)
		inIDs |= 1 << a
		combos *= float64(sp.atoms[a].Size)
	}
	consistent := float64(L)
	for j, a := range g {
		if inIDs&(1<<a) == 0 {
			combos *= float64(sp.atoms[a].Size)
			continue
		}
		if x, y := find(pos[a]), find(int8(j)); x != y {
			parent[x] = y
			consistent /= float64(sp.atoms[a].Size)
		}
	}
	return float64(D) / float64(L) * consistent / combos, true
}

// averageOverlap computes E[ov] for the ranges of dim length D under atom lists ids and
// g. A device's pair of shard indices (a, b) has probability 1/C when the digits a and b
// give the atoms both lists share agree, else 0 (C: the product of the sizes of the
// atoms either list uses; atom coordinates are independent and uniform). So E[ov] is
// the sum of |S_a ∩ T_b| over consistent pairs, over C; for each a only the b whose
// ranges meet S_a are visited, O(count(ids) + count(g)) pairs in all.
func (b *bound) averageOverlap(D int64, ids, g []uint8) float64 {
	sp := b.sp
	cs, ct := int64(sp.count(ids)), int64(sp.count(g))
	if cs > 1<<16 || ct > 1<<16 {
		// Too many shards to visit: ov <= either range's length; both averages are exact.
		return min(float64(D)/float64(cs), float64(D)/float64(ct))
	}
	var inIDs, inBoth uint64
	combos := 1.0
	for _, a := range ids {
		inIDs |= 1 << a
		combos *= float64(sp.atoms[a].Size)
	}
	for _, a := range g {
		if inIDs&(1<<a) != 0 {
			inBoth |= 1 << a
		} else {
			combos *= float64(sp.atoms[a].Size)
		}
	}
	// The shared atoms' digits: atom a is digit (x / sx) % q of x and (y / sy) % q of y.
	type digit struct{ sx, sy, q int64 }
	var shared [64]digit
	ns := 0
	sx := int64(1)
	for k := len(ids) - 1; k >= 0; k-- {
		a := ids[k]
		if inBoth&(1<<a) != 0 {
			sy := int64(1)
			for j := len(g) - 1; g[j] != a; j-- {
				sy *= int64(sp.atoms[g[j]].Size)
			}
			shared[ns], ns = digit{sx, sy, int64(sp.atoms[a].Size)}, ns+1
		}
		sx *= int64(sp.atoms[a].Size)
	}
	consistent := func(x, y int64) bool {
		for _, c := range shared[:ns] {
			if x/c.sx%c.q != y/c.sy%c.q {
				return false
			}
		}
		return true
	}
	ts, tt := sharding.CeilDiv(D, cs), sharding.CeilDiv(D, ct)
	var sum int64
	for x := range cs {
		s0 := min(x*ts, D)
		s1 := min(s0+ts, D)
		if s0 >= s1 {
			continue
		}
		for y := s0 / tt; y < ct && y*tt < s1; y++ {
			t0 := y * tt
			if ov := min(s1, t0+tt, D) - max(s0, t0); ov > 0 && consistent(x, y) {
				sum += ov
			}
		}
	}
	return float64(sum) / combos
}
