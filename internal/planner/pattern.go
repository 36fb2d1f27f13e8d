package planner

import (
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// pattern is the transfer set of a point-to-point step (collective_permute or
// all_to_all_v) between two atom states, built from tile geometry. It is what the
// response lists (Pairs, Transfers) and what the cost model routes, so the price is the
// price of the listed moves.
//
// Every device r receives, for each source tile that meets its target tile, the
// intersection from one holder h of that source tile. h's digits on the atoms `before`
// uses are fixed by the source tile; on the others (replicated in `before`) the holder
// is chosen so that devices needing the same data ask different holders: an atom u that
// `before` replicates but `after` uses takes the receiver's digit of an atom v of equal
// size that `before` uses but `after` replicates (paired once per request, same mesh
// axis first); every other such atom copies the receiver's digit. For a
// collective_permute (equal shard counts per dim) this makes the pairs a permutation:
// every device sends and receives at most once. An all_to_all_v may instead ask the
// nearest holders (newPatternHolders: no pairing, every replicated digit the
// receiver's): spreading the senders can load an axis no data needs to cross, so
// neither is cheaper in general and routed prices both.
//
// Atoms whose digit is the same for every receiver and its holders, and on which the
// bytes do not depend, are fixed: the pattern repeats along them. The enumeration runs
// over the other atoms only and hands the router the fixed atoms' coordinates as
// offsets (cost.Traffic), which is exact and keeps swaps of two atoms cheap on big
// meshes.
type pattern struct {
	sp            *space
	before, after state
	permute       bool  // collective_permute: whole padded tiles of perBytes each
	perBytes      int64 // permute: bytes each device sends
	nearest       bool  // all_to_all_v: no atom is paired (newPatternHolders)

	holderOf []int8 // per atom replicated in before: the receiver atom whose digit it copies
	fixed    uint64 // atoms the pattern repeats along
	varying  []uint8
	axis     []int // per atom: mesh axis index
	weight   []int // per atom: coordinate weight on its axis (sub-axis minor)

	// During each's yield: the source and target shard index per dim of the transfer,
	// and whether the receiver holds that source tile itself (yielded only withOwn).
	curS, curT []int64
	curMine    bool
	withOwn    bool
	scratch    []int
	recvSeq    int // each's receiver count: it changes when the receiver does
	// mixU take, as one mixed-radix number, the receiver's digits of mixV (the atoms
	// left unpaired by size).
	mixU, mixV []uint8
}

// newPattern builds the pattern from before to after. permute prices whole padded tiles
// of inBytes (the move's input buffer) per device, as a collective_permute sends.
func newPattern(sp *space, before, after state, permute bool, inBytes int64) *pattern {
	return newPatternHolders(sp, before, after, permute, inBytes, false)
}

// newPatternHolders is newPattern, with nearest (an all_to_all_v only) choosing every
// holder on the receiver's own coordinates wherever before replicates: no atom is
// paired, so no transfer crosses an axis for the sake of spreading the senders. Which
// of the two an exchange uses is its price's choice (space.routed).
func newPatternHolders(sp *space, before, after state, permute bool, inBytes int64, nearest bool) *pattern {
	p := &pattern{sp: sp, before: before, after: after, permute: permute, perBytes: inBytes, nearest: nearest && !permute}
	n := len(sp.atoms)
	p.holderOf = make([]int8, n)
	p.axis = make([]int, n)
	p.weight = make([]int, n)
	for a, ref := range sp.atoms {
		p.axis[a] = sp.mesh.AxisIndex(ref.Name)
		p.weight[a] = ref.Minor()
		p.holderOf[a] = int8(a)
	}
	us, vs := p.pairAtoms()
	p.fixNested()
	p.mixUnpaired(us, vs)
	// A pairing moves digits between atoms: a paired atom and its partner vary.
	for u, v := range p.holderOf {
		if int(v) != u {
			p.fixed &^= 1<<uint(u) | 1<<uint(v)
		}
	}
	for a := range n {
		if p.fixed&(1<<a) == 0 {
			p.varying = append(p.varying, uint8(a))
		}
	}
	return p
}

// pairAtoms pairs the atoms replicated in before but used in after (us) with the atoms
// used in before but replicated in after (vs) of equal size, same axis first, then any
// (holderOf), and returns both lists.
func (p *pattern) pairAtoms() (us, vs []uint8) {
	sp := p.sp
	ub, ua := p.before.used(), p.after.used()
	for a := range sp.atoms {
		switch bit := uint64(1) << a; {
		case ub&bit == 0 && ua&bit != 0:
			us = append(us, uint8(a))
		case ub&bit != 0 && ua&bit == 0:
			vs = append(vs, uint8(a))
		}
	}
	if p.nearest {
		return us, vs
	}
	taken := make([]bool, len(vs))
	for pass := range 2 {
		for _, u := range us {
			if p.holderOf[u] != int8(u) {
				continue
			}
			for j, v := range vs {
				if taken[j] || sp.atoms[v].Size != sp.atoms[u].Size || (pass == 0 && sp.atoms[v].Name != sp.atoms[u].Name) {
					continue
				}
				taken[j] = true
				p.holderOf[u] = int8(v)
				break
			}
		}
	}
	return us, vs
}

// fixNested marks the fixed atoms: those replicated in both states (the holder copies
// the digit), and those that open a dim identically in both states where the tiles nest
// (the digit picks the same block of the dim in both, so data never crosses it).
func (p *pattern) fixNested() {
	sp, before, after, permute := p.sp, p.before, p.after, p.permute
	ub, ua := before.used(), after.used()
	for a := range sp.atoms {
		bit := uint64(1) << a
		if ub&bit == 0 && ua&bit == 0 {
			p.fixed |= bit
		}
	}
	for d := range before {
		b, a := before[d], after[d]
		D := sp.shape[d]
		cb, ca := int64(sp.count(b)), int64(sp.count(a))
		nest := (D%cb == 0 && D%ca == 0) || (permute && cb == ca)
		if !nest {
			continue
		}
		for i := 0; i < len(b) && i < len(a) && b[i] == a[i]; i++ {
			p.fixed |= 1 << b[i]
		}
		if permute && cb == ca {
			// Equal counts: the shard index is the same number in both; a common minor
			// atom is the same digit too.
			for i, j := len(b)-1, len(a)-1; i >= 0 && j >= 0 && b[i] == a[j]; i, j = i-1, j-1 {
				p.fixed |= 1 << b[i]
			}
		}
	}
}

// mixUnpaired pairs, in a permute, the atoms left unpaired by size (atoms need not be
// prime when a space has many) as a group, their sizes multiplying to the same count:
// the holder's unpaired u digits read the receiver's unpaired v digits as one
// mixed-radix number, which keeps the holders a bijection.
func (p *pattern) mixUnpaired(us, vs []uint8) {
	sp, permute := p.sp, p.permute
	var restU, restV []uint8
	pu, pv := 1, 1
	for _, u := range us {
		if p.holderOf[u] == int8(u) {
			restU = append(restU, u)
			pu *= sp.atoms[u].Size
		}
	}
	pairedV := map[int8]bool{}
	for u, h := range p.holderOf {
		if int(h) != u {
			pairedV[h] = true
		}
	}
	for _, v := range vs {
		if !pairedV[int8(v)] {
			restV = append(restV, v)
			pv *= sp.atoms[v].Size
		}
	}
	if permute && len(restU) > 0 && pu == pv {
		p.mixU, p.mixV = restU, restV
		for _, a := range append(slices.Clone(restU), restV...) {
			p.fixed &^= 1 << a
		}
	}
}

// offsets is the router's Offsets: per mesh axis, nil when the enumeration gives the
// axis' coordinates in full, else the coordinates of the fixed atoms' digits.
func (p *pattern) offsets() [][]int {
	m := p.sp.mesh
	out := make([][]int, len(m.Axes))
	hasVarying := make([]bool, len(m.Axes))
	for _, a := range p.varying {
		hasVarying[p.axis[a]] = true
	}
	for i, ax := range m.Axes {
		if !hasVarying[i] {
			out[i] = cost.AllOffsets(ax.Size)
			continue
		}
		offs := []int{0}
		for a, ref := range p.sp.atoms {
			if p.axis[a] != i || p.fixed&(1<<a) == 0 {
				continue
			}
			next := make([]int, 0, len(offs)*ref.Size)
			for _, o := range offs {
				for dgt := range ref.Size {
					next = append(next, o+dgt*p.weight[a])
				}
			}
			offs = next
		}
		if len(offs) > 1 {
			out[i] = offs
		}
	}
	return out
}

// each enumerates the representative transfers (fixed atoms at digit 0): receiver and
// holder digits per atom, and the bytes. With all true, fixed atoms are enumerated too
// and every transfer of the mesh's atom axes is produced (axes without atoms stay 0).
func (p *pattern) each(all bool, yield func(rd, hd []int, bytes int64) bool) {
	sp := p.sp
	n := len(sp.atoms)
	vary := p.varying
	if all {
		vary = make([]uint8, n)
		for a := range n {
			vary[a] = uint8(a)
		}
	}
	w := newPatternWalk(p)
	for {
		if w.targetRanges() && !w.sources(yield) {
			return
		}
		// Next receiver.
		p.recvSeq++
		k := len(vary) - 1
		for ; k >= 0; k-- {
			a := vary[k]
			w.rd[a]++
			if w.rd[a] < sp.atoms[a].Size {
				break
			}
			w.rd[a] = 0
		}
		if k < 0 {
			return
		}
	}
}

// patternWalk is each's enumeration state: the receiver's and the holder's digits, and
// per dim the tile lengths and counts, the receiver's target and own source indices,
// and the run [lo, hi] of source tiles (s the current one) meeting the target.
type patternWalk struct {
	p          *pattern
	rd, hd     []int
	lo, hi, s  []int64
	tb, ta, cb []int64
	tIdx, sOwn []int64
	ov         []int64 // per dim: the current source tile's overlap with the target (holderFrom)
	own        []bool  // per dim: the current source tile is the receiver's own
}

func newPatternWalk(p *pattern) *patternWalk {
	sp, n, rank := p.sp, len(p.sp.atoms), len(p.before)
	w := &patternWalk{p: p, rd: make([]int, n), hd: make([]int, n)}
	for _, x := range []*[]int64{&w.lo, &w.hi, &w.s, &w.tb, &w.ta, &w.cb, &w.tIdx, &w.sOwn, &w.ov} {
		*x = make([]int64, rank)
	}
	w.own = make([]bool, rank)
	for d := range rank {
		w.cb[d] = int64(sp.count(p.before[d]))
		w.tb[d] = sharding.CeilDiv(sp.shape[d], w.cb[d])
		w.ta[d] = sharding.CeilDiv(sp.shape[d], int64(sp.count(p.after[d])))
	}
	return w
}

// targetRanges sets, for the receiver rd, its target index and own source index per dim
// and the source tiles that meet its target range (a permute sends its whole padded
// buffer, empty or not, to the device with the same index). It reports false when the
// receiver's target tile is empty.
func (w *patternWalk) targetRanges() bool {
	p, sp := w.p, w.p.sp
	for d := range p.before {
		t := int64(0)
		for _, a := range p.after[d] {
			t = t*int64(sp.atoms[a].Size) + int64(w.rd[a])
		}
		w.sOwn[d] = 0
		for _, a := range p.before[d] {
			w.sOwn[d] = w.sOwn[d]*int64(sp.atoms[a].Size) + int64(w.rd[a])
		}
		w.tIdx[d] = t
		if p.permute {
			w.lo[d], w.hi[d], w.s[d] = t, t, t
			continue
		}
		start, end := t*w.ta[d], min((t+1)*w.ta[d], sp.shape[d])
		if start >= end {
			return false
		}
		w.lo[d], w.hi[d] = start/w.tb[d], (end-1)/w.tb[d]
		w.s[d] = w.lo[d]
	}
	return true
}

// sources yields the receiver's transfer from each source tile in the run, with its
// holder's digits and bytes; it reports false when yield stops the enumeration.
func (w *patternWalk) sources(yield func(rd, hd []int, bytes int64) bool) bool {
	p, sp := w.p, w.p.sp
	rank := len(p.before)
	for a := range sp.atoms {
		w.hd[a] = w.rd[p.holderOf[a]]
	}
	p.mix(w.rd, w.hd)
	from := 0 // the first dim whose source tile changed since the last holderFrom
	for {
		bytes, mine := w.holderFrom(from)
		if p.permute && !mine {
			p.skipKeepers(w.rd, w.hd)
		}
		p.curS, p.curT, p.curMine = w.s, w.tIdx, mine
		if bytes > 0 && (!mine || p.withOwn) && !yield(w.rd, w.hd, bytes) {
			return false
		}
		d := rank - 1
		for ; d >= 0; d-- {
			w.s[d]++
			if w.s[d] <= w.hi[d] {
				break
			}
			w.s[d] = w.lo[d]
		}
		if d < 0 {
			return true
		}
		from = d
	}
}

// holderFrom sets the holder's digits of the atoms before uses from the current source
// tile, and returns the transfer's bytes and whether the receiver holds that source
// tile itself (nothing moves). Only the dims from d0 on are read again: the source
// tiles of one receiver come in odometer order, so the dims before the one that
// advanced keep their digits, overlaps and ownership (ov, own).
func (w *patternWalk) holderFrom(d0 int) (bytes int64, mine bool) {
	p, sp := w.p, w.p.sp
	for d := d0; d < len(p.before); d++ {
		// Holder digits of the atoms before[d] uses: s[d] in mixed radix.
		v := w.s[d]
		for k := len(p.before[d]) - 1; k >= 0; k-- {
			a := p.before[d][k]
			sz := int64(sp.atoms[a].Size)
			w.hd[a] = int(v % sz)
			v /= sz
		}
		if !p.permute {
			st, en := w.s[d]*w.tb[d], min((w.s[d]+1)*w.tb[d], sp.shape[d])
			ts, te := w.tIdx[d]*w.ta[d], min((w.tIdx[d]+1)*w.ta[d], sp.shape[d])
			w.ov[d] = max(0, min(en, te)-max(st, ts))
		}
		w.own[d] = w.s[d] == w.sOwn[d]
	}
	elems := int64(1)
	mine = true
	for d := range p.before {
		elems *= w.ov[d]
		mine = mine && w.own[d]
	}
	if p.permute {
		return p.perBytes, mine
	}
	return sp.bytes(elems), mine
}

// coords writes the mesh coordinates of the atom digits dg into dst (axes without atoms
// stay 0).
func (p *pattern) coords(dg []int, dst []int) {
	clear(dst)
	for a, v := range dg {
		dst[p.axis[a]] += v * p.weight[a]
	}
}

// traffic is the pattern as the cost model routes it.
func (p *pattern) traffic(kind cost.Kind) *cost.Traffic {
	m := p.sp.mesh
	from := make([]int, len(m.Axes))
	to := make([]int, len(m.Axes))
	return &cost.Traffic{
		Kind:    kind,
		Mesh:    m,
		Offsets: p.offsets(),
		Each: func(yield func(from, to []int, bytes int64) bool) {
			seq := -1
			p.each(false, func(rd, hd []int, bytes int64) bool {
				if p.recvSeq != seq { // the receiver's coordinates, once per receiver
					p.coords(rd, to)
					seq = p.recvSeq
				}
				p.coords(hd, from)
				return yield(from, to, bytes)
			})
		},
	}
}

// trafficModel is implemented by cost models that price point-to-point steps by the
// load of their transfers on the links (cost.Fabric).
type trafficModel interface {
	AcquireRouter(c *cost.Caches, m *sharding.Mesh) *cost.Router
}

func (sp *space) canRoute(r *Request) bool {
	_, ok := r.Model.(trafficModel)
	return ok
}

// acquireRouter makes sure sp holds a router of r's model, when the model routes (false
// otherwise).
func (sp *space) acquireRouter(r *Request) bool {
	tm, ok := r.Model.(trafficModel)
	if !ok {
		return false
	}
	if sp.router == nil || sp.routerModel != r.Model {
		sp.releaseRouter()
		sp.router, sp.routerModel = r.watch(tm.AcquireRouter(r.Memos.costCaches(), sp.mesh)), r.Model
	}
	return true
}

// exchangeByDigits prices the direct all_to_all_v from before to after in closed form,
// when it is a digit map (digitExchange) the router can price, and memoizes the price
// under key (ok false otherwise: only routing its transfers one by one prices it). Its
// cost does not grow with the number of transfers. Where the spread holders pair atoms
// (pairsHolders), the nearest holders are priced too and the cheaper kept (nearest
// when strictly cheaper: space.nearest). sp holds a router.
func (sp *space) exchangeByDigits(key routeKey, before, after state) (cost.Estimate, bool) {
	est, ok := sp.digitExchangePrice(before, after, false)
	if !ok {
		return cost.Estimate{}, false
	}
	if sp.pairsHolders(before, after) {
		if n, ok := sp.digitExchangePrice(before, after, true); ok && n.TimeUS < est.TimeUS {
			est = n
			sp.setNearest(key)
		}
	}
	if sp.routes == nil {
		sp.routes = routePool.get()
	}
	sp.routes[key] = est
	return est, true
}

// digitExchangePrice is the closed-form price of the direct all_to_all_v from before to
// after with the spread or the nearest holders (ok false: not a digit map the router
// prices).
func (sp *space) digitExchangePrice(before, after state, nearest bool) (cost.Estimate, bool) {
	dp, peers, moving, ok := sp.exchangeDigits(before, after, nearest)
	if !ok {
		return cost.Estimate{}, false
	}
	te, ok := sp.router.PriceDigitExchange(dp, peers, moving)
	return te.Estimate, ok
}

// pairsHolders reports whether the direct all_to_all_v from before to after pairs an
// atom (pattern.pairAtoms): one that before replicates and after uses, and one of equal
// size that before uses and after replicates. Only then do its spread and nearest
// holders differ.
func (sp *space) pairsHolders(before, after state) bool {
	ub, ua := before.used(), after.used()
	for u, ru := range sp.atoms {
		if ub&(1<<u) != 0 || ua&(1<<u) == 0 {
			continue
		}
		for v, rv := range sp.atoms {
			if ub&(1<<v) != 0 && ua&(1<<v) == 0 && rv.Size == ru.Size {
				return true
			}
		}
	}
	return false
}

// setNearest records that the exchange of key is cheaper with the nearest holders.
func (sp *space) setNearest(key routeKey) {
	if sp.nearest == nil {
		sp.nearest = map[routeKey]bool{}
	}
	sp.nearest[key] = true
}

// nearestHolders reports whether the direct all_to_all_v from before to after, as
// routed priced it, uses the nearest holders.
func (sp *space) nearestHolders(before, after state) bool {
	return sp.nearest != nil && sp.nearest[sp.routeKeyOf(before, after, false, 0)]
}

// exchangeInClosedForm reports whether the direct all_to_all_v from before to after
// costs nothing more to price, whatever its transfers: priced already, or priced now
// from its digits (exchangeByDigits, memoized for routed).
func (sp *space) exchangeInClosedForm(r *Request, before, after state) bool {
	if !sp.acquireRouter(r) {
		return false
	}
	key := sp.routeKeyOf(before, after, false, 0)
	if _, ok := sp.routes[key]; ok {
		return true
	}
	_, ok := sp.exchangeByDigits(key, before, after)
	return ok
}

// routed prices the point-to-point step from before to after by its traffic, when the
// model routes (ok false otherwise). The router is kept per space (one request) and
// comes from the model's pool, with the prices of earlier requests on the mesh
// (releaseRouter gives it back).
func (sp *space) routed(r *Request, before, after state, permute bool, inBytes int64) (cost.Estimate, bool) {
	if !sp.acquireRouter(r) {
		return cost.Estimate{}, false
	}
	kind := cost.AllToAllV
	if permute {
		kind = cost.CollectivePermute
	}
	// A digit permutation's price depends only on where each atom's digit goes and on
	// the bytes (the digits' axes and weights are the space's): one price serves every
	// pair of states with the same mapping.
	var dkey digitKey
	if permute {
		if src, ok := sp.digitSrc(before, after); ok {
			dkey = sp.digitKeyOf(src, inBytes)
			if est, ok := sp.digitRoutes[dkey]; ok {
				return est, true
			}
			// The permutation pattern.digitPermutation would build, without the pattern.
			if te, ok := sp.router.PriceDigitPermutation(sp.digitPermutation(src, inBytes)); ok {
				if sp.digitRoutes == nil {
					sp.digitRoutes = digitRoutePool.get()
				}
				sp.digitRoutes[dkey] = te.Estimate
				return te.Estimate, true
			}
		}
	}
	// The same step is priced by the search, the merge, the incumbent and the final
	// steps: route each pattern once per request.
	key := sp.routeKeyOf(before, after, permute, inBytes)
	if est, ok := sp.routes[key]; ok {
		return est, true
	}
	if sp.routes == nil {
		sp.routes = routePool.get()
	}
	if !permute {
		// The direct exchange as a digit map, priced without listing its transfers.
		if est, ok := sp.exchangeByDigits(key, before, after); ok {
			return est, true
		}
	}
	pat := newPattern(sp, before, after, permute, inBytes)
	var est cost.Estimate
	if dp, ok := pat.digitPermutation(); ok {
		if te, ok := sp.router.PriceDigitPermutation(dp); ok {
			est = te.Estimate
			sp.routes[key] = est
			if dkey.set {
				if sp.digitRoutes == nil {
					sp.digitRoutes = digitRoutePool.get()
				}
				sp.digitRoutes[dkey] = est
			}
			return est, true
		}
	}
	est = sp.router.Price(pat.traffic(kind)).Estimate
	if !permute && sp.pairsHolders(before, after) && pat.transfersAtMost() <= maxNearestTransfers {
		if n := sp.router.Price(newPatternHolders(sp, before, after, false, 0, true).traffic(kind)).Estimate; n.TimeUS < est.TimeUS {
			est = n
			sp.setNearest(key)
		}
	}
	if sp.routes == nil {
		sp.routes = routePool.get()
	}
	sp.routes[key] = est
	return est, true
}

// releaseRouter gives the space's router back to its pool (routed acquires another if
// the space prices again).
func (sp *space) releaseRouter() {
	if sp.router != nil {
		sp.router.Release()
		sp.router, sp.routerModel = nil, nil
	}
	routePool.put(sp.routes)
	digitRoutePool.put(sp.digitRoutes)
	sp.routes, sp.digitRoutes, sp.nearest = nil, nil, nil
}

// digitPermutation is the digit permutation src (digitSrc's) of in bytes per device:
// what pattern.digitPermutation builds for the same two states (replacements
// included). Its Src is scratch, valid until the next call.
func (sp *space) digitPermutation(src []byte, in int64) cost.DigitPermutation {
	if sp.digits == nil {
		sp.digits, sp.srcInts = make([]cost.Digit, 0, len(sp.atoms)), make([]int, 0, len(sp.atoms))
		for _, ref := range sp.atoms {
			sp.digits = append(sp.digits, cost.Digit{Axis: sp.mesh.AxisIndex(ref.Name), Size: ref.Size, Weight: ref.Minor()})
		}
	}
	sp.srcInts = sp.srcInts[:0]
	for _, a := range src {
		sp.srcInts = append(sp.srcInts, int(a))
	}
	return cost.DigitPermutation{Digits: sp.digits, Src: sp.srcInts, Bytes: in}
}

// digitKey is a digit permutation (digitSrc) and its bytes per device: the permutation
// packed six bits an atom when it has at most 20 atoms (no allocation per lookup), else
// as a string.
type digitKey struct {
	packed [2]uint64
	src    string
	in     int64
	set    bool
}

// digitKeyOf is the digitKey of src (one byte an atom) and in.
func (sp *space) digitKeyOf(src []byte, in int64) digitKey {
	k := digitKey{in: in, set: true}
	if len(src) > 20 {
		k.src = string(src)
		return k
	}
	for i, a := range src {
		k.packed[i/10] |= uint64(a) << ((i % 10) * 6)
	}
	return k
}

// digitSrc is the digit permutation from before to after as pattern.digitPermutation
// builds it (byte a: the atom whose digit atom a's digit takes), without building the
// pattern; ok is false when the move is not one (lengths or sizes differ, or a
// replacement leaves an atom unpaired). A replacement pairs each atom that after uses
// and before does not with an atom released by the move, as pattern.pairAtoms does
// (equal sizes, the same mesh axis first).
func (sp *space) digitSrc(before, after state) ([]byte, bool) {
	src := sp.srcBuf[:0]
	for a := range sp.atoms {
		src = append(src, byte(a))
	}
	sp.srcBuf = src
	for d := range before {
		b, a := before[d], after[d]
		if len(b) != len(a) {
			return nil, false
		}
		for i := range b {
			if sp.atoms[b[i]].Size != sp.atoms[a[i]].Size {
				return nil, false
			}
			src[b[i]] = a[i]
		}
	}
	ub, ua := before.used(), after.used()
	if ub == ua {
		return src, true
	}
	added, released := ua&^ub, ub&^ua
	var partners uint64
	for pass := range 2 {
		for u := range sp.atoms {
			if added&(1<<u) == 0 || src[u] != byte(u) {
				continue
			}
			for v := range sp.atoms {
				if released&(1<<v) == 0 || partners&(1<<v) != 0 || sp.atoms[v].Size != sp.atoms[u].Size ||
					(pass == 0 && sp.atoms[v].Name != sp.atoms[u].Name) {
					continue
				}
				partners |= 1 << v
				src[u] = byte(v)
				break
			}
		}
	}
	for u := range sp.atoms {
		if added&(1<<u) != 0 && src[u] == byte(u) {
			return nil, false // unpaired
		}
	}
	if partners != released {
		return nil, false
	}
	return src, true
}

// routeKey is a routed step: its two states (packed when they fit a packedKey, which
// needs no allocation, else as strings), its kind and its input bytes.
type routeKey struct {
	pb, pa        packedKey
	before, after string
	permute       bool
	in            int64
}

// routeKeyOf is the routeKey of the step from before to after.
func (sp *space) routeKeyOf(before, after state, permute bool, in int64) routeKey {
	if packable(sp, len(before)) {
		return routeKey{pb: packKey(before), pa: packKey(after), permute: permute, in: in}
	}
	return routeKey{before: before.key(), after: after.key(), permute: permute, in: in}
}

// eachDevice enumerates every transfer of the whole mesh (fixed atoms and atom-free
// axes included) with device positions, for the lists a response gives.
func (p *pattern) eachDevice(yield func(fromPos, toPos int, bytes int64) bool) {
	m := p.sp.mesh
	from := make([]int, len(m.Axes))
	to := make([]int, len(m.Axes))
	hasAtoms := make([]bool, len(m.Axes))
	for a := range p.sp.atoms {
		hasAtoms[p.axis[a]] = true
	}
	// The axes no atom covers: every transfer repeats along them, with the same
	// coordinate at both ends (an odometer over them, major first).
	var free []int
	for i, ok := range hasAtoms {
		if !ok {
			free = append(free, i)
		}
	}
	p.each(true, func(rd, hd []int, bytes int64) bool {
		p.coords(rd, to)
		p.coords(hd, from)
		for {
			if !yield(m.PositionOfCoords(from), m.PositionOfCoords(to), bytes) {
				return false
			}
			k := len(free) - 1
			for ; k >= 0; k-- {
				i := free[k]
				from[i]++
				to[i] = from[i]
				if from[i] < m.Axes[i].Size {
					break
				}
				from[i], to[i] = 0, 0
			}
			if k < 0 {
				return true
			}
		}
	})
}

// skipKeepers makes a permute's holders a permutation that leaves in place every device
// that already holds the tile it needs (XLA lists it as a pair [d, d], and a device is
// the source of one pair only). The holder map π (receiver -> holder of its target
// tile) is a bijection; a receiver whose holder keeps its own tile takes that keeper's
// holder instead, along the cycle of π until a holder that does not keep: on every
// cycle the receivers that move are served by the next mover, one each. hd is the
// holder π(rd) on entry and the holder to use on return.
func (p *pattern) skipKeepers(rd, hd []int) {
	if p.scratch == nil {
		p.scratch = make([]int, len(hd))
	}
	if !p.keeps(hd) || slices.Equal(hd, rd) {
		return // the common case: π's holder does not keep its tile
	}
	x := p.scratch
	first := slices.Clone(hd)
	for steps := 0; p.keeps(hd) && !slices.Equal(hd, rd); steps++ {
		if steps > p.sp.mesh.NumDevices() {
			// Not a cycle (a holder map that is not a bijection): take the first
			// holder; it holds the tile, and only XLA's one-send-per-device rule is
			// given up.
			copy(hd, first)
			return
		}
		copy(x, hd)
		p.holder(x, hd)
	}
}

// mix writes the holder's mixU digits from the receiver's mixV digits.
func (p *pattern) mix(rd, hd []int) {
	if len(p.mixU) == 0 {
		return
	}
	sp := p.sp
	v := 0
	for _, a := range p.mixV {
		v = v*sp.atoms[a].Size + rd[a]
	}
	for k := len(p.mixU) - 1; k >= 0; k-- {
		a := p.mixU[k]
		hd[a] = v % sp.atoms[a].Size
		v /= sp.atoms[a].Size
	}
}

// keeps reports whether the device with digits dg holds, in before, the tile it needs
// in after (a permute: the same index per dim).
func (p *pattern) keeps(dg []int) bool {
	sp := p.sp
	for d := range p.before {
		b, a := int64(0), int64(0)
		for _, x := range p.before[d] {
			b = b*int64(sp.atoms[x].Size) + int64(dg[x])
		}
		for _, x := range p.after[d] {
			a = a*int64(sp.atoms[x].Size) + int64(dg[x])
		}
		if a != b {
			return false
		}
	}
	return true
}

// holder writes π(rd) for a permute: the digits of the device holding rd's target tile.
func (p *pattern) holder(rd, hd []int) {
	sp := p.sp
	for a := range hd {
		hd[a] = rd[p.holderOf[a]]
	}
	p.mix(rd, hd)
	for d := range p.before {
		t := int64(0)
		for _, x := range p.after[d] {
			t = t*int64(sp.atoms[x].Size) + int64(rd[x])
		}
		for k := len(p.before[d]) - 1; k >= 0; k-- {
			x := p.before[d][k]
			sz := int64(sp.atoms[x].Size)
			hd[x] = int(t % sz)
			t /= sz
		}
	}
}

// transfersAtMost bounds the representative transfers each enumerates: the receivers
// (the varying atoms' digits) times, per dim, the source tiles one target tile can meet.
func (p *pattern) transfersAtMost() int {
	sp := p.sp
	const limit = 1 << 40
	n := 1
	for _, a := range p.varying {
		n = min(n*sp.atoms[a].Size, limit)
	}
	for d := range p.before {
		tb := sharding.CeilDiv(sp.shape[d], int64(sp.count(p.before[d])))
		ta := sharding.CeilDiv(sp.shape[d], int64(sp.count(p.after[d])))
		n = min(n*int(min((ta+tb-1)/tb+1, limit)), limit)
	}
	return n
}

// digitPermutation is the pattern as a cost.DigitPermutation when it is one: a permute
// whose dims have the same atom sizes position by position, so the holder's digit of
// before[d][i] is the receiver's digit of after[d][i]; an atom only after uses takes
// the receiver's digit of its partner (the released atom newPattern pairs it with, so
// replacements qualify when every released atom is paired one for one); every other
// digit is the receiver's own. Then no device keeps its tile while another asks it for
// its own, and the holders are exactly that digit map (TestDigitPermutationPricingIsExact
// holds the closed form to the transfers, replacements included).
func (p *pattern) digitPermutation() (cost.DigitPermutation, bool) {
	sp := p.sp
	if !p.permute || len(p.mixU) > 0 {
		return cost.DigitPermutation{}, false
	}
	n := len(sp.atoms)
	dp := cost.DigitPermutation{Digits: make([]cost.Digit, n), Src: make([]int, n), Bytes: p.perBytes}
	for a, ref := range sp.atoms {
		dp.Digits[a] = cost.Digit{Axis: p.axis[a], Size: ref.Size, Weight: p.weight[a]}
		dp.Src[a] = a
	}
	for d := range p.before {
		b, a := p.before[d], p.after[d]
		if len(b) != len(a) {
			return cost.DigitPermutation{}, false
		}
		for i := range b {
			if sp.atoms[b[i]].Size != sp.atoms[a[i]].Size {
				return cost.DigitPermutation{}, false
			}
			dp.Src[b[i]] = int(a[i])
		}
	}
	// A replacement: an atom u that before replicates and after uses takes, in the
	// holder, the receiver's digit of its partner (holderOf), an atom released by the
	// move. Every released atom must be some u's partner for Src to be a permutation.
	ub, ua := p.before.used(), p.after.used()
	var partners uint64
	for u := range n {
		if bit := uint64(1) << u; ub&bit == 0 && ua&bit != 0 {
			if int(p.holderOf[u]) == u {
				return cost.DigitPermutation{}, false
			}
			dp.Src[u] = int(p.holderOf[u])
			partners |= 1 << uint(p.holderOf[u])
		}
	}
	if partners != ub&^ua {
		return cost.DigitPermutation{}, false
	}
	return dp, true
}
