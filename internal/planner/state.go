package planner

import (
	"cmp"
	"slices"
	"time"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// state is, per tensor dim, the atoms sharding it (major to minor), by atom id.
type state [][]uint8

func (s state) clone() state {
	c := make(state, len(s))
	for i, d := range s {
		c[i] = slices.Clone(d)
	}
	return c
}

// key encodes s for the visited set.
func (s state) key() string {
	n := len(s)
	for _, d := range s {
		n += len(d)
	}
	b := make([]byte, 0, n)
	for _, d := range s {
		b = append(b, d...)
		b = append(b, 0xff)
	}
	return string(b)
}

// stringKey is a state's key (state.key) as the search's string-keyed pass uses it.
type stringKey string

// decode rewrites dst as the state k encodes: each dim's atoms, up to its 0xff.
func (k stringKey) decode(dst state) state {
	if len(dst) == 0 {
		return dst
	}
	d := 0
	dst[0] = dst[0][:0]
	for i := 0; i < len(k); i++ {
		if k[i] == 0xff {
			if d++; d < len(dst) {
				dst[d] = dst[d][:0]
			}
			continue
		}
		dst[d] = append(dst[d], k[i])
	}
	return dst
}

func (s state) equal(o state) bool {
	for i := range s {
		if !slices.Equal(s[i], o[i]) {
			return false
		}
	}
	return true
}

// used returns the bitmask of atoms in some dim.
func (s state) used() uint64 {
	var m uint64
	for _, d := range s {
		for _, a := range d {
			m |= 1 << a
		}
	}
	return m
}

// space is the atom decomposition of one reshard problem.
type space struct {
	mesh     *sharding.Mesh
	shape    []int64
	elemBits int
	atoms    []sharding.AxisRef
	binary   bool // every atom has size 2 (power-of-two meshes): count is a shift

	router      *cost.Router // prices point-to-point steps (routed)
	routerModel cost.Model
	routes      map[routeKey]cost.Estimate
	nearest     map[routeKey]bool          // exchanges of routes priced with the nearest holders
	digitRoutes map[digitKey]cost.Estimate // digit permutations by their mapping
	srcBuf      []byte
	digits      []cost.Digit // per atom (digitPermutation)
	srcInts     []int
	// family is atomsKey of the request's mesh, model and these atoms, once computed
	// (familyKey; forks share it).
	family *familyKey
	// deadline, when set, is when the passes over this space stop and answer their best
	// plan found (Request.PlanningBudget).
	deadline time.Time
	// deadlineHit says a pass over the space stopped at deadline with its best plan: what
	// the passes answer is then not proven.
	deadlineHit bool
	// done is the Done channel of the request the space plans (Request.done): dimCovered's
	// enumeration stops when it is closed.
	done <-chan struct{}
	// covers memoizes the answers of dimCovered's completed enumerations.
	covers map[coverKey]bool
}

// coverKey is a dimCovered question: the dim, the group, and the before and after atoms
// (before's ids, 0xff, after's).
type coverKey struct {
	d     int
	group uint64
	ids   string
}

// fork is a space of the same atoms with its own pricing state (router, memos), for
// pricing on another goroutine while sp is in use.
func (sp *space) fork() *space {
	return &space{mesh: sp.mesh, shape: sp.shape, elemBits: sp.elemBits, atoms: sp.atoms, binary: sp.binary, family: sp.family, done: sp.done}
}

// newSpace splits every axis that src or tgt uses into atoms: the common refinement of
// all sub-axis boundaries, split into prime factors while the atom count stays small.
// It reports false when two refs of one axis fit no common factorisation.
func newSpace(m *sharding.Mesh, shape []int64, elemBits int, shardings ...sharding.Sharding) (*space, bool) {
	return newSpaceCut(m, shape, elemBits, false, maxPrimeAtoms, nil, shardings...)
}

// reqSpace is the space of r's two ends as planning builds it: newSpaceCut with the
// node boundaries of r's model (nodeCuts) among the sub-axis boundaries.
func reqSpace(r *Request, allAxes bool, maxPrime int) (*space, bool) {
	return newSpaceCut(r.Mesh, r.Shape, r.ElemBits, allAxes, maxPrime, nodeCuts(r.Mesh, r.Model), r.Source, r.Target)
}

// newSpaceCut splits m's axes as newSpace does, over every mesh axis when allAxes (not
// only those the shardings use), split into prime factors while the atom count stays at
// most maxPrime, with the boundaries cuts (per axis name, a Pre) among the shardings' own, where splitting into primes would not already place them (never on
// an axis whose size is a power of two). A cut that fits no common factorisation with
// the shardings' boundaries is left out.
func newSpaceCut(m *sharding.Mesh, shape []int64, elemBits int, allAxes bool, maxPrime int, cuts map[string]int, shardings ...sharding.Sharding) (*space, bool) {
	bounds := map[string][]int{}
	for _, s := range shardings {
		for _, r := range s.UsedAxes() {
			bounds[r.Name] = append(bounds[r.Name], r.Pre, r.Next())
		}
	}
	if allAxes {
		for _, ax := range m.Axes {
			bounds[ax.Name] = append(bounds[ax.Name], 1)
		}
	}
	for name, cut := range cuts {
		b, ok := bounds[name]
		if !ok || !fitsBounds(b, cut) || primeBoundary(b, m.AxisSize(name), cut) {
			continue
		}
		bounds[name] = append(b, cut)
	}
	type interval struct {
		ref   sharding.AxisRef
		prime []int
	}
	var ivs []interval
	total := 0
	for _, ax := range m.Axes {
		b, ok := bounds[ax.Name]
		if !ok || ax.Size == 1 {
			continue
		}
		b = append(b, 1, ax.Size)
		slices.Sort(b)
		b = slices.Compact(b)
		for i := 0; i+1 < len(b); i++ {
			if b[i+1]%b[i] != 0 {
				return nil, false
			}
			size := b[i+1] / b[i]
			ref := sharding.AxisRef{Name: ax.Name, Pre: b[i], Size: size, Of: ax.Size}
			ivs = append(ivs, interval{ref: ref, prime: primeFactors(size)})
			total += len(ivs[len(ivs)-1].prime)
		}
	}
	sp := &space{mesh: m, shape: shape, elemBits: elemBits}
	split := total <= maxPrime
	for _, iv := range ivs {
		if !split || len(iv.prime) == 1 {
			sp.atoms = append(sp.atoms, iv.ref)
			continue
		}
		pre := iv.ref.Pre
		for _, p := range iv.prime {
			sp.atoms = append(sp.atoms, iv.ref.Sub(pre, p))
			pre *= p
		}
	}
	if len(sp.atoms) > 60 {
		return nil, false
	}
	sp.setBinary()
	return sp, true
}

// setBinary records whether every atom has size 2 (count's fast path).
func (sp *space) setBinary() {
	sp.binary = true
	for _, a := range sp.atoms {
		sp.binary = sp.binary && a.Size == 2
	}
}

// fitsBounds reports whether cut divides or is divided by every boundary in b, so that
// adding it keeps one common factorisation.
func fitsBounds(b []int, cut int) bool {
	for _, x := range b {
		if x%cut != 0 && cut%x != 0 {
			return false
		}
	}
	return true
}

// primeBoundary reports whether splitting an axis of size n at the boundaries b into
// prime atoms (smallest first, major to minor) already puts a boundary at cut, as it
// does for every cut of an axis whose size is a power of two.
func primeBoundary(b []int, n, cut int) bool {
	lo, hi := 1, n
	for _, x := range b {
		if x <= cut && x > lo {
			lo = x
		}
		if x >= cut && x < hi {
			hi = x
		}
	}
	if lo == cut || hi == cut {
		return true
	}
	at := lo
	for _, p := range primeFactors(hi / lo) {
		if at *= p; at == cut {
			return true
		}
	}
	return false
}

func primeFactors(n int) []int {
	var out []int
	for p := 2; p*p <= n; p++ {
		for n%p == 0 {
			out = append(out, p)
			n /= p
		}
	}
	if n > 1 {
		out = append(out, n)
	}
	return out
}

// atomsOf maps refs to atom ids (each ref is a run of consecutive atoms).
func (sp *space) atomsOf(refs []sharding.AxisRef) []uint8 {
	var out []uint8
	for _, r := range refs {
		for id, a := range sp.atoms {
			if r.Contains(a) {
				out = append(out, uint8(id))
			}
		}
	}
	return out
}

// stateOf converts a sharding's dims into a state.
func (sp *space) stateOf(s sharding.Sharding) state {
	st := make(state, len(s.Dims))
	for d, ds := range s.Dims {
		st[d] = sp.atomsOf(ds.Axes)
	}
	return st
}

// refs converts atom ids back to merged axis refs.
func (sp *space) refs(ids []uint8) []sharding.AxisRef {
	out := make([]sharding.AxisRef, 0, len(ids))
	for _, id := range ids {
		out = append(out, sp.atoms[id])
	}
	return sharding.MergeAdjacent(out)
}

// sharding converts a state to a sharding with the given unreduced axes.
func (sp *space) sharding(st state, unreduced []sharding.AxisRef) sharding.Sharding {
	s := sharding.Replicated(len(st))
	for d, ids := range st {
		s.Dims[d].Axes = sp.refs(ids)
	}
	s.Unreduced = slices.Clone(unreduced)
	return s
}

// counts returns the shard count per dim.
func (sp *space) count(ids []uint8) int {
	if sp.binary {
		return 1 << len(ids)
	}
	n := 1
	for _, id := range ids {
		n *= sp.atoms[id].Size
	}
	return n
}

// tile is the padded local length of dim d with the given atoms.
func (sp *space) tile(d int, ids []uint8) int64 {
	return sharding.CeilDiv(sp.shape[d], int64(sp.count(ids)))
}

// tileElems is the padded local element count of st.
func (sp *space) tileElems(st state) int64 {
	n := int64(1)
	for d, ids := range st {
		n *= sp.tile(d, ids)
	}
	return n
}

func (sp *space) bytes(elems int64) int64 { return sharding.BufferBytes(elems, sp.elemBits) }

// dimCovered checks, for dim d, that every device's new range (atoms after) lies inside
// the union of the old ranges (atoms before) of the devices that differ from it only on
// the group atoms. Without uneven tiles it holds for every move this package makes, so
// the check enumerates shard indices only when some tile involved does not divide D.
//
// Once sp.done is closed an enumeration stops within coverPollEvery coordinates and
// reports false (the search prunes the move); the request then answers its context's
// error, never a plan priced from such checks.
func (sp *space) dimCovered(d int, before, after []uint8, group uint64) bool {
	if slices.Equal(before, after) {
		return true
	}
	D := sp.shape[d]
	nb, na := int64(sp.count(before)), int64(sp.count(after))
	if D%nb == 0 && D%na == 0 {
		return true
	}
	c := coverCheck{sp: sp, D: D, before: before, after: after, tb: sharding.CeilDiv(D, nb), ta: sharding.CeilDiv(D, na), ok: true}
	if c.stopped() {
		return false
	}
	// Atoms relevant to this dim: those in before or after. Enumerate their coordinates:
	// the group's atoms vary, the others are fixed per device.
	combos := 1
	seen := uint64(0)
	for _, id := range append(slices.Clone(before), after...) {
		if seen&(1<<id) != 0 {
			continue
		}
		seen |= 1 << id
		if combos *= sp.atoms[id].Size; combos > 1<<16 {
			return false // too many shards to check: treat as infeasible (the search prunes it)
		}
		if group&(1<<id) != 0 {
			c.free = append(c.free, id)
		} else {
			c.fixed = append(c.fixed, id)
		}
	}
	key := coverKey{d: d, group: group, ids: string(before) + "\xff" + string(after)}
	if ok, hit := sp.covers[key]; hit {
		return ok
	}
	c.total = int64(combos)
	c.coords = make([]int, len(sp.atoms))
	c.overFixed(0)
	if c.cut {
		return false // cut short: not an answer to keep
	}
	if sp.covers == nil {
		sp.covers = map[coverKey]bool{}
	}
	sp.covers[key] = c.ok
	return c.ok
}

// coverPollEvery is how many coordinates a coverage enumeration visits between looks
// at its space's done channel (a power of two).
const coverPollEvery = 4096

// coverPolled, when set (tests), is called at each look at the done channel with the
// coordinates the enumeration has visited and the number it would visit in all.
var coverPolled func(visited, total int64)

// stopped reports whether c's request is abandoned, marking the check failed when it is.
func (c *coverCheck) stopped() bool {
	if c.sp.done == nil {
		return false
	}
	if coverPolled != nil {
		coverPolled(c.visited, c.total)
	}
	select {
	case <-c.sp.done:
		c.ok, c.cut = false, true
		return true
	default:
		return false
	}
}

// visit counts one coordinate and reports whether the enumeration goes on.
func (c *coverCheck) visit() bool {
	if c.visited++; c.visited&(coverPollEvery-1) == 0 && c.stopped() {
		return false
	}
	return c.ok
}

// coverCheck is dimCovered's enumeration: for every assignment of the fixed atoms, the
// after range of every assignment of the free (group) atoms must lie in the union of
// their before ranges.
type coverCheck struct {
	sp            *space
	D, tb, ta     int64 // dim length, before and after tile lengths
	before, after []uint8
	fixed, free   []uint8
	coords        []int
	covered       [][2]int64
	ok            bool
	cut           bool // stopped because the request was abandoned
	// visited counts the coordinates enumerated (both passes); total is the number of
	// coordinates of one pass (the product of the relevant atoms' sizes).
	visited, total int64
}

// index is the shard index ids give under the current coordinates.
func (c *coverCheck) index(ids []uint8) int64 {
	v := int64(0)
	for _, id := range ids {
		v = v*int64(c.sp.atoms[id].Size) + int64(c.coords[id])
	}
	return v
}

// rng is shard i's range for tiles of length t.
func (c *coverCheck) rng(i, t int64) (int64, int64) {
	s := min(i*t, c.D)
	return s, min(s+t, c.D)
}

// eachFree calls fn for every assignment of the free atoms from the j-th on.
func (c *coverCheck) eachFree(j int, fn func()) {
	if j == len(c.free) {
		fn()
		return
	}
	for v := 0; v < c.sp.atoms[c.free[j]].Size && c.ok; v++ {
		c.coords[c.free[j]] = v
		c.eachFree(j+1, fn)
	}
}

func (c *coverCheck) overFixed(k int) {
	if !c.ok {
		return
	}
	if k < len(c.fixed) {
		for v := 0; v < c.sp.atoms[c.fixed[k]].Size && c.ok; v++ {
			c.coords[c.fixed[k]] = v
			c.overFixed(k + 1)
		}
		return
	}
	// The union of the group's before ranges, sorted and merged once per fixed
	// assignment; then every after range must lie inside it.
	c.covered = c.covered[:0]
	c.eachFree(0, func() {
		if !c.visit() {
			return
		}
		if s, e := c.rng(c.index(c.before), c.tb); s < e {
			c.covered = append(c.covered, [2]int64{s, e})
		}
	})
	if !c.ok || len(c.covered) >= coverPollEvery && c.stopped() {
		return
	}
	c.covered = mergeIntervals(c.covered)
	c.eachFree(0, func() {
		if !c.visit() {
			return
		}
		if s, e := c.rng(c.index(c.after), c.ta); !inMerged(s, e, c.covered) {
			c.ok = false
		}
	})
}

// mergeIntervals sorts ivs (non-empty intervals) and merges overlapping or touching
// ones, in place.
func mergeIntervals(ivs [][2]int64) [][2]int64 {
	slices.SortFunc(ivs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], iv[1])
			continue
		}
		out = append(out, iv)
	}
	return out
}

// inMerged reports whether [s, e) lies inside one interval of merged (the output of
// mergeIntervals), or is empty.
func inMerged(s, e int64, merged [][2]int64) bool {
	if s >= e {
		return true
	}
	i, _ := slices.BinarySearchFunc(merged, s, func(iv [2]int64, x int64) int {
		if iv[1] <= x {
			return -1
		}
		if iv[0] > x {
			return 1
		}
		return 0
	})
	return i < len(merged) && merged[i][0] <= s && e <= merged[i][1]
}

// feasible checks a move from before to after whose group varies the atoms in group.
func (sp *space) feasible(before, after state, group uint64) bool {
	for d := range before {
		if !sp.dimCovered(d, before[d], after[d], group) {
			return false
		}
	}
	return true
}

// packedKey is a state key that needs no allocation: per dim its atom ids plus one, then
// a separator, six bits a symbol, ten symbols in each of 4 words.
type packedKey [4]uint64

const packedSymbols = 4 * 10 // ten 6-bit symbols per word

// packable reports whether every state of sp with the given rank fits a packedKey:
// at most rank separators plus every atom once, atom ids below 62.
func packable(sp *space, rank int) bool {
	return len(sp.atoms) <= 62 && rank+len(sp.atoms) <= packedSymbols
}

// packKey encodes s (see packable). Distinct states give distinct keys: the symbol
// sequence lists each dim's atoms followed by the separator 63, and unused symbols
// stay 0, which no atom or separator uses.
func packKey(s state) packedKey {
	var k packedKey
	i := 0
	put := func(v uint64) {
		w, off := i/10, (i%10)*6
		k[w] |= v << off
		i++
	}
	for _, d := range s {
		for _, a := range d {
			put(uint64(a) + 1)
		}
		put(63)
	}
	return k
}

// decode rewrites dst as the state k encodes (dst has the state's rank): symbols up to
// each separator 63 are a dim's atom ids plus one; the first 0 ends the state.
func (k packedKey) decode(dst state) state {
	if len(dst) == 0 {
		return dst
	}
	d := 0
	dst[0] = dst[0][:0]
	for i := range packedSymbols {
		v := uint8(k[i/10] >> ((i % 10) * 6) & 63)
		switch v {
		case 0:
			return dst
		case 63:
			if d++; d < len(dst) {
				dst[d] = dst[d][:0]
			}
		default:
			dst[d] = append(dst[d], v-1)
		}
	}
	return dst
}

// smallKey is packedKey in one word when the state fits: four bits a symbol (atom ids
// plus one, 1-14, and the separator 15), sixteen symbols. Maps keyed by a word hash and
// compare faster than by four (the search's tables are most of its map work).
type smallKey uint64

const smallSymbols = 16

// smallPackable reports whether every state of sp with the given rank fits a smallKey:
// atom ids below 14 and at most sixteen symbols.
func smallPackable(sp *space, rank int) bool {
	return len(sp.atoms) <= 14 && rank+len(sp.atoms) <= smallSymbols
}

// packSmall encodes s (see smallPackable), as packKey does with four-bit symbols.
func packSmall(s state) smallKey {
	var k smallKey
	off := 0
	for _, d := range s {
		for _, a := range d {
			k |= smallKey(a+1) << off
			off += 4
		}
		k |= 15 << off
		off += 4
	}
	return k
}

// decode rewrites dst as the state k encodes (dst has the state's rank).
func (k smallKey) decode(dst state) state {
	if len(dst) == 0 {
		return dst
	}
	d := 0
	dst[0] = dst[0][:0]
	for ; k != 0; k >>= 4 {
		switch v := uint8(k & 15); v {
		case 15:
			if d++; d < len(dst) {
				dst[d] = dst[d][:0]
			}
		default:
			dst[d] = append(dst[d], v-1)
		}
	}
	return dst
}
