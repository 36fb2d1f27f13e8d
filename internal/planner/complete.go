package planner

import (
	"context"
	"math"
	"math/bits"
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The complete pass: A* over the states of every mesh axis, split into prime atoms, with
// every step op of API.md as an edge, each edge one step priced as the plan's step is
// priced. It runs after the candidates, bounded by the best of them, and either finds a
// strictly cheaper plan or proves there is none.
//
// A node is a state (the atoms of each dim) with its unreduced atoms. From each node:
//
//	slice              one unused atom appended to the minor end of a dim (free)
//	all_gather         any minor suffix of a dim dropped
//	all_to_all         any minor suffix of a dim moved to the minor end of another dim
//	collective_permute every other state with the same shard count per dim
//	all_to_all_v       every other state (not a pure slice of this one)
//	reduce_scatter     any pending partial-sum atoms reduced and appended to a dim
//	all_reduce         any pending partial-sum atoms reduced
//
// Moves that keep a dim's shard count but not its ceildiv boundaries pass the coverage
// check (every device's new tile is data its group held); the exchange has none to pass.
// Point-to-point moves (collective_permute, all_to_all_v) run once no reduction is
// pending: their holders are chosen per replicated coordinate, which partial sums do not
// have.
//
// When the state space is small (completeStateLimit) every edge is generated and a pass
// that ends before its budget proves its answer. Above it the pass searches the
// hierarchical family: from the source at most one structured step (slice, gather,
// all-to-all, reduction), a point-to-point step to the goal, to a state one structured
// step before it (largeTargets) or to the goal with free atoms kept (keepTargets), at
// most one more point-to-point step to the goal, and the structured step that ends
// there. Two rounds of exchanges over sub-axes are how hierarchical all-to-all
// algorithms beat one exchange among every device when latency dominates. Its plan is the best found, not proven; a pass stopped at its budget answers
// the cheapest path to the goal it has reached.
//
// The heuristic is 0 at the goal and at states the goal is a slice of, and else a bound
// on the data some device lacks (every device on meshes of at most lacksDeviceLimit, a
// sample of them above) over its ingress, at least the least price of any collective
// (floor): every path from such a state takes at least one collective. Edges are pruned
// only against the incumbent (cost plus heuristic at or above it), by the request's
// rules (allowed ops, no full replication in between unless allowed, the memory
// budget), and by the coverage check.

// cnode is a state with its unreduced atoms.
type cnode struct {
	st  state
	unr uint64
}

// skey is a state's key in the engine's tables: the state packed (packKey) when it fits
// a packedKey, else its string key (state.key). Either way two states share a key only
// when they are equal, and a packable state's key allocates nothing.
type skey struct {
	p packedKey
	s string
}

// stateKey is st's skey.
func stateKey(st state) skey {
	n := len(st)
	for _, d := range st {
		for _, a := range d {
			if a >= 62 {
				return skey{s: st.key()}
			}
		}
		n += len(d)
	}
	if n > packedSymbols {
		return skey{s: st.key()}
	}
	return skey{p: packKey(st)}
}

// ckey is a node's key: its state's with its unreduced atoms.
type ckey struct {
	skey
	unr uint64
}

func (c cnode) key() ckey { return ckey{stateKey(c.st), c.unr} }

// completeSearch is one complete pass.
type completeSearch struct {
	ctx       context.Context
	sp        *space
	r         *Request
	start     cnode
	goal      cnode
	goalKey   ckey
	reducible uint64 // source partial sums the target does not keep
	noRep     bool   // no fully replicated state between the ends
	budget    int64  // bytes per device (0: none)
	floor     float64
	ub        float64 // prune paths that do not cost strictly less
	passConfig
	targets []state // a large space's point-to-point targets (largeTargets)
	// goalOnly and p2pGoalOnly restrict the node being expanded in a large space to
	// edges that end at the goal (all of them; its point-to-point ones).
	goalOnly, p2pGoalOnly bool
	// units, when set, makes the pass the structured pass (structured.go): states of
	// whole units (runs of atoms), structured moves only.
	units     [][]uint8
	byCounts  map[string][]state // unit states by shard counts
	noPermute bool               // the structured pass leaves out its permutes
	covered   map[string]bool    // the structured pass's coverage checks (unitFeasible)

	all     map[uint64][]state // every state over the atoms outside an unreduced mask (full)
	prices  map[cpriceKey]float64
	pairs   map[[2]skey]pairBounds // bounds' memo
	lf      latencyFloors          // nil: exchanges are bounded as any move
	redMemo map[uint64]float64
	// stepMemo is reductionStepFloor's memo, by atom mask.
	stepMemo map[uint64]float64
	// considered counts the edges priced in this run; cut says one of consider's looks
	// found the deadline passed or the request abandoned (the run then stops).
	considered int
	cut        bool
	tb         timeBounder
	peakIn     float64
	hops       []cost.AxisHop // per mesh axis (nil: the model counts no hops)
	// The device table (devices): per device its atom digits and axis coordinates, the
	// hop latency between every two (nil: no hops), and per state every device's ranges.
	digits   [][]int
	coords   [][]int
	hopDist  []float64
	ranges   map[skey][][2]int64
	samples  [][]int // sampledLack's devices (their atom digits)
	devicesN int     // the product of every atom's size
	// mayEmpty is set when some dim is shorter than the product of every atom (a tile
	// may hold nothing, and a move may move nothing).
	mayEmpty bool
	bykey    map[ckey]int32
	nodes    []crec
	open     openHeap
	items    []citem // the queued items, by openEntry.i
	free     []int32 // indices of items popped, for reuse

	expansions int
	p2p        int // point-to-point edges priced
	capped     bool
}

// passConfig is one pass of the engine as data: the edges it generates, the weight of
// its heuristic in the queue's order, and its budgets.
type passConfig struct {
	moves moveGen
	// full: moves generates every edge of the pass's graph, so that a pass that ends
	// within its budgets at weight 1 proves its answer; a pass that reaches its
	// point-to-point budget then stops (else it searches on with the other moves).
	full bool
	// weight multiplies the heuristic in the order of the queue's nodes, f = g +
	// weight·h: 1 is A*, more finds a path sooner, not proven the cheapest. Pruning
	// uses h alone, and a point-to-point edge waits at its unweighted bound, so that a
	// weighted pass prices it before the nodes it may undercut.
	weight float64
	maxExp int // nodes the pass expands
	maxP2P int // point-to-point edges it prices
}

// moveGen generates the edges out of a node of the engine (each through consider).
type moveGen interface {
	expand(c *completeSearch, id int32)
}

// atomMoves are every edge over the prime atoms (a small space: full).
type atomMoves struct{}

// familyMoves are a large space's hierarchical family (above). wide widens it when the
// best plan so far is far above the time lower bound (completeWideGap), or under
// EffortExhaustive: point-to-point steps from the source's structured neighbours and
// from every state a point-to-point step reached go to every target of largeTargets,
// so that a path may chain several exchanges.
type familyMoves struct{ wide bool }

// unitMoves are the structured moves over units (structured.go).
type unitMoves struct{}

func (atomMoves) expand(c *completeSearch, id int32)     { c.expandAtoms(id, nil) }
func (m familyMoves) expand(c *completeSearch, id int32) { c.expandAtoms(id, &m) }
func (unitMoves) expand(c *completeSearch, id int32)     { c.expandUnits(id) }

// completeConfig is the complete pass's configuration over a space of atoms prime
// atoms at rank: every edge while the states number at most completeStateLimit
// (exhaustiveStateLimit under EffortExhaustive), else the hierarchical family.
func completeConfig(effort Effort, atoms, rank int) passConfig {
	limit := float64(completeStateLimit)
	if effort == EffortExhaustive {
		limit = exhaustiveStateLimit
	}
	if countStates(atoms, rank) <= limit {
		return passConfig{moves: atomMoves{}, full: true, weight: 1, maxExp: completeExpansions, maxP2P: completeP2PBudget}.forEffort(effort)
	}
	return passConfig{moves: familyMoves{wide: effort == EffortExhaustive}, weight: 1, maxExp: completeLargeExpansions, maxP2P: completeLargeP2PBudget}.forEffort(effort)
}

// forEffort scales pc's budgets by exhaustiveScale under EffortExhaustive.
func (pc passConfig) forEffort(effort Effort) passConfig {
	if effort == EffortExhaustive {
		pc.maxExp, pc.maxP2P = pc.maxExp*exhaustiveScale, pc.maxP2P*exhaustiveScale
	}
	return pc
}

// proves reports whether a pass that ends within its budgets proves its answer.
func (pc passConfig) proves() bool { return pc.full && pc.weight == 1 }

// crec is a node reached at g by edge from prev.
type crec struct {
	n     cnode
	g     float64
	steps int32
	prev  int32
	edge  cedge
}

// cedge is one step of the complete pass.
type cedge struct {
	op     Op
	dim    int
	dim2   int
	group  []uint8
	reduce uint64 // reductions: the atoms reduced
	// halo marks an all_gather on an uneven dim made possible by the halo exchanges
	// before it (xla_halo.go): its steps are those collective_permutes, then the gather.
	halo bool
	// pieces, on a structured all_gather, runs it as gathers of runs of its group's
	// atoms, minor first (their lengths; gatherPieces), through sub-axis states.
	pieces []uint8
}

// completeResult is what a complete pass found: moves (nil: nothing strictly cheaper
// than its bound), and whether its answer is proven.
type completeResult struct {
	path   []cstep
	proven bool
	exp    int
}

// cstep is an edge of a path with its ends.
type cstep struct {
	edge          cedge
	before, after cnode
}

func countStates(n, rank int) float64 {
	// Σ_k C(n,k) k! C(k+rank-1, rank-1): k atoms placed in rank ordered lists.
	total := 0.0
	for k := 0; k <= n; k++ {
		c := 1.0
		for i := 0; i < k; i++ {
			c *= float64(n - i) // C(n,k) k! = n!/(n-k)!
		}
		lists := 1.0
		for i := 1; i < rank; i++ {
			lists = lists * float64(k+i) / float64(i)
		}
		total += c * lists
	}
	return total
}

func newCompleteSearch(ctx context.Context, sp *space, r *Request, start, goal cnode, reducible uint64) *completeSearch {
	c := &completeSearch{
		ctx: ctx, sp: sp, r: r, start: start, goal: goal, goalKey: goal.key(), reducible: reducible,
		budget: r.MemoryBudget, prices: map[cpriceKey]float64{}, bykey: map[ckey]int32{},
	}
	rank := len(goal.st)
	c.passConfig = completeConfig(r.Effort, len(sp.atoms), rank)
	c.noRep = !r.Source.IsFullyReplicated() && !r.Target.IsFullyReplicated() && rank > 0
	if hm, ok := r.Model.(hopMetric); ok {
		c.hops = hm.AxisHops(r.Mesh)
	}
	if tb, ok := r.Model.(timeBounder); ok {
		c.floor = tb.MinLatency(r.Mesh)
		if c.peakIn = tb.PeakDeviceIngress(r.Mesh); c.peakIn > 0 {
			c.tb = tb
			if lf, ok := r.Model.(latencyFloors); ok && c.canRoute() {
				c.lf = lf
			}
		}
	}
	c.ub = math.Inf(1)
	c.devicesN = 1
	for _, a := range sp.atoms {
		c.devicesN *= a.Size
	}
	for _, D := range r.Shape {
		c.mayEmpty = c.mayEmpty || D < int64(c.devicesN)
	}
	return c
}

// statesOver lists every state over the atoms outside mask (full generation).
func (c *completeSearch) statesOver(mask uint64) []state {
	if out, ok := c.all[mask]; ok {
		return out
	}
	if c.units != nil {
		if c.all == nil {
			c.all = map[uint64][]state{}
		}
		c.all[mask] = c.unitStatesOver(mask)
		return c.all[mask]
	}
	rank := len(c.goal.st)
	var out []state
	cur := make(state, rank)
	var rec func(a int)
	rec = func(a int) {
		if a == len(c.sp.atoms) {
			out = append(out, cur.clone())
			return
		}
		rec(a + 1) // unused
		if mask&(1<<a) != 0 {
			return
		}
		for d := range cur {
			for pos := 0; pos <= len(cur[d]); pos++ {
				saved := slices.Clone(cur[d])
				cur[d] = slices.Insert(cur[d], pos, uint8(a))
				rec(a + 1)
				cur[d] = saved
			}
		}
	}
	rec(0)
	if c.all == nil {
		c.all = map[uint64][]state{}
	}
	c.all[mask] = out
	return out
}

func (c *completeSearch) tileBytes(st state) int64 { return c.sp.bytes(c.sp.tileElems(st)) }

func (c *completeSearch) replicated(n cnode) bool { return n.st.used() == 0 && n.unr == 0 }

// h is the heuristic: floor where some device lacks data of its goal tile (a byte
// that must move takes a collective, and no collective that moves a byte costs less
// than floor), else 0.
func (c *completeSearch) h(n cnode) float64 {
	if c.floor == 0 && c.tb == nil || n.unr == c.goal.unr && (n.st.equal(c.goal.st) || c.sp.sliceOnly(n.st, c.goal.st)) {
		return 0
	}
	return c.reductionBound(n.unr&c.reducible) + c.moveBound(n.st, c.goal.st)
}

// reductionBound bounds the reductions still to run over the pending atoms: every
// pending atom is reduced by exactly one reduction step, so the steps partition them,
// and a step costs at least its price on an empty buffer (cost.Model's time does not
// fall as bytes grow). The bound is the cheapest partition. Reductions move no data a
// device lacks, so the bound adds to moveBound's.
//
// The partition is searched over every subset of every pending set (3^n step floors for
// n atoms), so above reductionPartitionAtoms pending atoms the bound is 0: still a lower
// bound, and the search's deadline checks are reached (at 16 atoms, a 65,536-device axis,
// the partition alone took seconds).
func (c *completeSearch) reductionBound(pending uint64) float64 {
	if pending == 0 || bits.OnesCount64(pending) > reductionPartitionAtoms {
		return 0
	}
	if v, ok := c.redMemo[pending]; ok {
		return v
	}
	// The cheapest single step over exactly the atoms of sub, for every sub of pending.
	low := pending & -pending
	best := math.Inf(1)
	for sub := pending; sub != 0; sub = (sub - 1) & pending {
		if sub&low == 0 {
			continue // the part holding the lowest atom, then the rest
		}
		best = min(best, c.reductionStepFloor(sub)+c.reductionBound(pending&^sub))
	}
	if c.redMemo == nil {
		c.redMemo = map[uint64]float64{}
	}
	c.redMemo[pending] = best
	return best
}

// reductionStepFloor is the least a reduction over the atoms of mask costs: an
// all_reduce or a reduce_scatter over them on no bytes, whichever the request allows
// and is cheaper.
func (c *completeSearch) reductionStepFloor(mask uint64) float64 {
	if v, ok := c.stepMemo[mask]; ok {
		return v
	}
	if c.stepMemo == nil {
		c.stepMemo = map[uint64]float64{}
	}
	t := c.stepFloor(mask)
	c.stepMemo[mask] = t
	return t
}

// stepFloor computes reductionStepFloor.
func (c *completeSearch) stepFloor(mask uint64) float64 {
	var ids []uint8
	for a := range c.sp.atoms {
		if mask&(1<<a) != 0 {
			ids = append(ids, uint8(a))
		}
	}
	axes := c.sp.refs(sortedAtoms(c.sp, ids))
	t := math.Inf(1)
	for _, k := range []struct {
		op   Op
		kind cost.Kind
	}{{OpAllReduce, cost.AllReduce}, {OpReduceScatter, cost.ReduceScatter}} {
		if c.r.allowed(k.op) {
			t = min(t, c.r.Model.Estimate(cost.Collective{Kind: k.kind, Mesh: c.r.Mesh, Axes: axes}).TimeUS)
		}
	}
	return t
}

// lacks reports whether some device's tile in before lacks data of its tile in after.
func (c *completeSearch) lacks(before, after state) bool { return c.moveBound(before, after) > 0 }

// exchangeBound is a lower bound on the all_to_all_v from before to after: with
// nothing to move, 0; else the routed price's latency, at least the least base, the
// longer of the least step and the hop latency some lacking element travels, and one
// least step for every further peer the busiest receiver needs (cost.Router.Price),
// combined with the most one device lacks over the most it can take in.
func (c *completeSearch) exchangeBound(before, after state) float64 {
	return c.bounds(before, after).exchange
}

// pairBounds are moveBound and exchangeBound of one pair of states.
type pairBounds struct{ move, exchange float64 }

// bounds computes (once per pair) moveBound and exchangeBound.
func (c *completeSearch) bounds(before, after state) pairBounds {
	k := [2]skey{stateKey(before), stateKey(after)}
	if v, ok := c.pairs[k]; ok {
		return v
	}
	if c.pairs == nil {
		c.pairs = map[[2]skey]pairBounds{}
	}
	var lack, peers int64
	hop := 0.0
	if c.r.Mesh.NumDevices() <= lacksDeviceLimit {
		lack, hop, peers = c.pairBound(before, after)
	} else if !c.sp.sliceOnly(before, after) {
		lack = c.sampledLack(before, after)
		if lack == 0 && !c.mayEmpty {
			lack = 1 // some device outside the sample lacks data
		}
	}
	var v pairBounds
	if lack > 0 {
		v.move = math.SmallestNonzeroFloat64
		if c.tb != nil {
			v.move = max(v.move, c.tb.Combine(max(c.floor, hop), float64(c.sp.bytes(lack))/c.peakIn))
		} else {
			v.move = max(v.move, c.floor, hop)
		}
		v.exchange = v.move
		if c.lf != nil && c.r.Mesh.NumDevices() <= lacksDeviceLimit {
			base, step := c.lf.LatencyFloors(c.r.Mesh)
			lat := base + max(step, hop) + float64(max(peers, 1)-1)*step
			v.exchange = max(v.move, c.tb.Combine(max(lat, c.floor), float64(c.sp.bytes(lack))/c.peakIn))
		}
	}
	c.pairs[k] = v
	return v
}

// latencyFloors is implemented by models that say how Router.Price charges latency
// (cost.Fabric).
type latencyFloors interface {
	LatencyFloors(m *sharding.Mesh) (base, step float64)
}

// moveBound is a lower bound on any path from before to after: 0 when no device lacks
// data, else at least one collective (floor) and, on models that bound their links, the
// most data one device lacks over the most any device can take in (timeBounder).
func (c *completeSearch) moveBound(before, after state) float64 {
	return c.bounds(before, after).move
}

// unrRefs is the unreduced axes of mask.
func (c *completeSearch) unrRefs(mask uint64) []sharding.AxisRef {
	if mask == 0 {
		return nil
	}
	var ids []uint8
	for a := range c.sp.atoms {
		if mask&(1<<a) != 0 {
			ids = append(ids, uint8(a))
		}
	}
	return c.sp.refs(sortedAtoms(c.sp, ids))
}

// move is the planner move of an edge.
func (c *completeSearch) move(e cedge, before, after cnode) move {
	m := move{op: e.op, dim: e.dim, dim2: e.dim2, group: e.group, before: before.st, after: after.st,
		unrBefore: c.unrRefs(before.unr), unrAfter: c.unrRefs(after.unr)}
	if e.op == OpSlice {
		m.dims = []int{e.dim}
	}
	if e.reduce != 0 {
		m.reduceRefs = c.unrRefs(e.reduce)
	}
	return m
}

// cpriceKey is the key of an edge's price in the memo: its op and ends, the dims where
// the ends do not determine them (all_to_all's two, reduce_scatter's and a halo
// gather's one; -1 elsewhere), and a pieces gather's pieces.
type cpriceKey struct {
	op            Op
	dim, dim2     int
	halo          bool
	pieces        string
	before, after ckey
}

// priceKey is the key of an edge's price in the memo.
func (c *completeSearch) priceKey(e cedge, before, after cnode) cpriceKey {
	k := cpriceKey{op: e.op, dim: -1, dim2: -1, halo: e.halo, before: before.key(), after: after.key()}
	if e.op == OpAllToAll {
		k.dim, k.dim2 = e.dim, e.dim2
	}
	if e.op == OpReduceScatter || e.halo {
		k.dim = e.dim
	}
	if e.pieces != nil {
		k.pieces = string(e.pieces)
	}
	return k
}

// price is an edge's time, memoized.
func (c *completeSearch) price(e cedge, before, after cnode) float64 {
	if e.op == OpSlice {
		return 0
	}
	k := c.priceKey(e, before, after)
	if t, ok := c.prices[k]; ok {
		return t
	}
	if (e.op == OpCollectivePermute || e.op == OpAllToAllV || e.halo && !c.full) && c.lacks(before.st, after.st) {
		c.p2p++ // a move of no data routes no transfers
	}
	var t float64
	if e.pieces != nil {
		for _, m := range c.gatherPieces(e, before, after) {
			c.sp.price(c.r, &m)
			t += m.est.TimeUS
		}
	} else if e.halo {
		for _, st := range c.haloSteps(e, before, after) {
			t += st.Cost.TimeUS
		}
	} else if e.op == OpAllToAllV {
		if est, ok := c.sp.routed(c.r, before.st, after.st, false, 0); ok {
			t = est.TimeUS
		} else {
			t = c.sp.directStep(c.r, before.st, after.st, c.unrRefs(after.unr)).Cost.TimeUS
		}
	} else {
		m := c.move(e, before, after)
		c.sp.price(c.r, &m)
		t = m.est.TimeUS
	}
	c.prices[k] = t
	return t
}

// run searches from start; ub bounds the plans it looks for (strictly cheaper).
func (c *completeSearch) run(ub float64) (completeResult, error) {
	c.ub = ub
	c.nodes = c.nodes[:0]
	c.open, c.items, c.free = c.open[:0], c.items[:0], c.free[:0]
	clear(c.bykey)
	c.expansions, c.p2p, c.capped = 0, 0, false
	if c.budget > 0 && (c.tileBytes(c.start.st) > c.budget || c.tileBytes(c.goal.st) > c.budget) {
		return completeResult{proven: c.proves()}, nil
	}
	c.push(c.start, 0, 0, -1, cedge{})
	c.cut, c.considered = false, 0
	for pops := 1; len(c.open) > 0; pops++ {
		if pops&63 == 0 || c.cut {
			// Every pop may route an exchange or expand a node: the request's deadline
			// ends the pass within 64 of them (or within an expansion that priced many
			// edges: cut), its planning budget with its best plan.
			if err := c.ctx.Err(); err != nil {
				return completeResult{}, err
			}
			if c.cut || c.pastDeadline() {
				c.capped, c.sp.deadlineHit = true, true
				return c.bestFound(), nil
			}
		}
		it := c.next()
		if it.lazy != nil {
			// A point-to-point edge pushed at its bound: price it now that it is the
			// cheapest entry, and push its end at its price.
			from := c.nodes[it.id]
			if it.g > from.g {
				continue
			}
			if c.p2p >= c.maxP2P {
				c.capped = true
				if c.full {
					return c.bestFound(), nil
				}
				continue // a large space searches on without point-to-point edges
			}
			lz := it.lazy
			if !lz.bounded {
				lb := c.moveBound(from.n.st, lz.to.st)
				if lz.e.op == OpAllToAllV {
					lb = c.exchangeBound(from.n.st, lz.to.st)
				}
				if c.over(from.g + lb + lz.h) {
					continue // the data it moves takes at least that long
				}
				if id2, ok := c.bykey[lz.to.key()]; ok && c.nodes[id2].g <= from.g+lb {
					continue // reached at least as cheaply already
				}
				lz.bounded = true
				it.f = from.g + lb + lz.h
				c.queue(it)
				continue
			}
			if !c.full && lz.e.op == OpAllToAllV && !c.cheapExchange(from.n.st, lz.to.st) {
				continue // it would route more transfers than a large space's pass prices
			}
			t := c.price(lz.e, from.n, lz.to)
			if !c.over(from.g + t + lz.h) {
				c.push(lz.to, from.g+t, from.steps+1, it.id, lz.e)
			}
			continue
		}
		n := c.nodes[it.id]
		if it.g > n.g {
			continue // a cheaper path reached it since
		}
		if n.n.key() == c.goalKey {
			return completeResult{path: c.pathTo(it.id), proven: c.proves(), exp: c.expansions}, nil
		}
		if c.expansions >= c.maxExp || c.full && c.p2p >= c.maxP2P {
			c.capped = true
			return c.bestFound(), nil
		}
		c.expansions++
		c.moves.expand(c, it.id)
	}
	if c.cut { // the last expansion was cut short: an empty queue proves nothing
		c.capped, c.sp.deadlineHit = true, true
		return c.bestFound(), nil
	}
	return completeResult{proven: c.proves(), exp: c.expansions}, nil
}

// pastDeadline reports whether the request's planning deadline has passed.
func (c *completeSearch) pastDeadline() bool {
	return !c.sp.deadline.IsZero() && !c.r.clock().Before(c.sp.deadline)
}

// considerPoll is how many edges consider prices between two looks at the deadline and
// the request's context (a mask: one less than a power of two). One expansion may price
// thousands (every subset of 16 pending reductions), so the run loop's look every 64 pops
// alone let a pass run seconds past its budget.
const considerPoll = 255

// bestFound is the result of a pass stopped at its budget: the cheapest path to the goal
// it reached (the goal's node, not yet the head of the queue), else none.
func (c *completeSearch) bestFound() completeResult {
	if id, ok := c.bykey[c.goalKey]; ok {
		return completeResult{path: c.pathTo(id), exp: c.expansions}
	}
	return completeResult{exp: c.expansions}
}

func (c *completeSearch) pathTo(id int32) []cstep {
	var out []cstep
	for id >= 0 {
		n := c.nodes[id]
		if n.prev < 0 {
			break
		}
		out = append(out, cstep{edge: n.edge, before: c.nodes[n.prev].n, after: n.n})
		id = n.prev
	}
	slices.Reverse(out)
	return out
}

// over reports whether a path of cost g that still needs h cannot beat the bound.
func (c *completeSearch) over(f float64) bool {
	return f >= c.ub-1e-9*math.Max(1, math.Abs(c.ub))
}

func (c *completeSearch) push(n cnode, g float64, steps, prev int32, e cedge) {
	k := n.key()
	if id, ok := c.bykey[k]; ok {
		old := &c.nodes[id]
		if g > old.g-1e-12*math.Max(1, g) && !(g < old.g+1e-12 && steps < old.steps) {
			return
		}
		old.g, old.steps, old.prev, old.edge = g, steps, prev, e
		if k == c.goalKey {
			c.ub = g
		}
		old.n = cnode{st: n.st.clone(), unr: n.unr}
		c.queue(citem{id: id, f: g + c.weight*c.h(n), g: g, steps: steps})
		return
	}
	if k == c.goalKey {
		c.ub = g // only strictly cheaper paths are looked for from now on
	}
	id := int32(len(c.nodes))
	c.nodes = append(c.nodes, crec{n: cnode{st: n.st.clone(), unr: n.unr}, g: g, steps: steps, prev: prev, edge: e})
	c.bykey[k] = id
	c.queue(citem{id: id, f: g + c.weight*c.h(n), g: g, steps: steps})
}

// consider prices the edge from node id to nx and pushes nx when it can still beat the
// bound.
func (c *completeSearch) consider(id int32, e cedge, nx cnode) {
	if c.cut {
		return
	}
	if c.considered++; c.considered&considerPoll == 0 && (c.ctx.Err() != nil || c.pastDeadline()) {
		c.cut = true // the run loop answers at once
		return
	}
	from := c.nodes[id]
	nk := nx.key()
	isGoal := nk == c.goalKey
	if c.goalOnly && !isGoal {
		return
	}
	if id2, ok := c.bykey[nk]; ok && c.nodes[id2].g < from.g {
		return // reached more cheaply already: no edge costs less than nothing
	}
	if !isGoal {
		if c.noRep && c.replicated(nx) {
			return
		}
	}
	if c.budget > 0 && c.tileBytes(nx.st) > c.budget {
		return
	}
	hn := 0.0
	if !isGoal {
		hn = c.h(nx)
	}
	routed := e.op == OpCollectivePermute || e.op == OpAllToAllV || e.halo
	if routed && c.over(from.g+hn) {
		return
	}
	if e.op != OpAllToAllV && !e.halo && !c.feasible(from.n, nx, e) {
		return
	}
	if routed {
		// Pushed at the heuristic alone; bounded when it reaches the head of the queue,
		// priced when its bound does (run): its transfers are routed.
		if id2, ok := c.bykey[nx.key()]; ok && c.nodes[id2].g <= from.g {
			return // reached at least as cheaply already
		}
		c.queue(citem{id: id, f: from.g + hn, g: from.g, steps: from.steps + 1,
			lazy: &lazyEdge{e: e, to: cnode{st: nx.st.clone(), unr: nx.unr}, h: hn}})
		return
	}
	t := c.price(e, from.n, nx)
	if c.over(from.g + t + hn) {
		return
	}
	c.push(nx, from.g+t, from.steps+1, id, e)
}

func (c *completeSearch) feasible(before, after cnode, e cedge) bool {
	var group uint64
	for _, a := range e.group {
		group |= 1 << a
	}
	group |= e.reduce
	if c.units != nil {
		return c.unitFeasible(before.st, after.st, group)
	}
	return c.sp.feasible(before.st, after.st, group)
}

// expandAtoms generates the edges out of node id over the prime atoms: every edge
// (fam nil), else those of the hierarchical family fam.
func (c *completeSearch) expandAtoms(id int32, fam *familyMoves) {
	cur := c.nodes[id].n
	st := cur.st
	r, sp := c.r, c.sp
	used := st.used()
	pending := cur.unr & c.reducible
	structured := true
	c.goalOnly, c.p2pGoalOnly = false, false
	if fam != nil {
		// A large space, the hierarchical family (above): the source expands every
		// move; a state one structured step from it only point-to-point ones; a state a
		// point-to-point step reached only the moves that end at the goal (in the wide
		// family, point-to-point moves to every target too).
		n := c.nodes[id]
		switch {
		case n.steps == 0:
		case n.edge.op == OpAllToAllV || n.edge.op == OpCollectivePermute:
			c.goalOnly, c.p2pGoalOnly = true, !fam.wide
		case n.steps == 1:
			structured, c.p2pGoalOnly = false, !fam.wide
		default:
			return
		}
	}
	// Slices: any sequence of unused atoms appended to one dim, in one step (on an
	// uneven dim a slice by two atoms can be local where its first atom alone is not).
	if structured && r.allowed(OpSlice) {
		var free []uint8
		for a := range sp.atoms {
			if (used|cur.unr)&(1<<a) == 0 {
				free = append(free, uint8(a))
			}
		}
		maxLen := len(free)
		if fam != nil {
			maxLen = min(maxLen, completeLargeSliceAtoms)
		}
		for d := range st {
			eachSequence(free, maxLen, func(seq []uint8) {
				nx := st.clone()
				nx[d] = append(nx[d], seq...)
				c.consider(id, cedge{op: OpSlice, dim: d}, cnode{nx, cur.unr})
			})
		}
	}
	// Gathers and all-to-alls of every suffix.
	for d := range st {
		if !structured {
			break
		}
		n := len(st[d])
		for j := 1; j <= n; j++ {
			suffix := slices.Clone(st[d][n-j:])
			if r.allowed(OpAllGather) {
				nx := st.clone()
				nx[d] = nx[d][:n-j]
				e := cedge{op: OpAllGather, dim: d, group: suffix}
				c.consider(id, e, cnode{nx, cur.unr})
				// A large space routes halo exchanges from the source only (their
				// transfers are routed one by one).
				if r.allowed(OpCollectivePermute) && cur.unr&c.reducible == 0 && (fam == nil || c.nodes[id].steps == 0) && !c.feasible(cur, cnode{nx, cur.unr}, e) &&
					newHaloWindows(sp, d, haloGather, st, nx).needed() {
					e.halo = true
					c.consider(id, e, cnode{nx, cur.unr})
				}
			}
			if r.allowed(OpAllToAll) {
				c.allToAlls(id, cur, d, suffix)
			}
		}
	}
	// Reductions of any pending partial sums.
	if pending != 0 {
		c.reductions(id, cur, pending)
	}
	p2p := pending == 0
	// Permutes.
	if p2p && r.allowed(OpCollectivePermute) {
		for _, nx := range c.permuteTargets(cur) {
			c.consider(id, cedge{op: OpCollectivePermute, group: changedAtoms(st, nx)}, cnode{nx, cur.unr})
		}
	}
	// Exchanges.
	if p2p && r.allowed(OpAllToAllV) && cur.unr == c.goal.unr {
		for _, nx := range c.exchangeTargets(cur) {
			if nx.equal(st) || sp.sliceOnly(st, nx) {
				continue
			}
			c.consider(id, cedge{op: OpAllToAllV}, cnode{nx, cur.unr})
		}
	}
}

// allToAlls considers the all_to_alls that move suffix, the minor end of cur's dim d,
// to the minor end of every other dim.
func (c *completeSearch) allToAlls(id int32, cur cnode, d int, suffix []uint8) {
	st := cur.st
	for b := range st {
		if b == d {
			continue
		}
		nx := st.clone()
		nx[d] = nx[d][:len(st[d])-len(suffix)]
		nx[b] = append(nx[b], suffix...)
		c.consider(id, cedge{op: OpAllToAll, dim: d, dim2: b, group: suffix}, cnode{nx, cur.unr})
	}
}

// reductions generates all_reduce and reduce_scatter over every nonempty subset of the
// pending partial sums (reduce_scatter: in every order, onto every dim).
func (c *completeSearch) reductions(id int32, cur cnode, pending uint64) {
	r := c.r
	var ids []uint8
	for a := range c.sp.atoms {
		if pending&(1<<a) != 0 {
			ids = append(ids, uint8(a))
		}
	}
	for sub := uint64(1); sub < 1<<len(ids); sub++ {
		var set []uint8
		var mask uint64
		for i, a := range ids {
			if sub&(1<<i) != 0 {
				set = append(set, a)
				mask |= 1 << a
			}
		}
		if r.allowed(OpAllReduce) {
			c.consider(id, cedge{op: OpAllReduce, group: set, reduce: mask}, cnode{cur.st.clone(), cur.unr &^ mask})
		}
		if !r.allowed(OpReduceScatter) {
			continue
		}
		eachPermutation(set, func(order []uint8) {
			for d := range cur.st {
				nx := cur.st.clone()
				nx[d] = append(nx[d], order...)
				c.consider(id, cedge{op: OpReduceScatter, dim: d, group: slices.Clone(order), reduce: mask}, cnode{nx, cur.unr &^ mask})
			}
		})
	}
}

// eachSequence calls fn with every sequence of 1 to maxLen distinct atoms of ids (fn
// must not keep its argument).
func eachSequence(ids []uint8, maxLen int, fn func([]uint8)) {
	seq := make([]uint8, 0, maxLen)
	var taken uint64
	var rec func()
	rec = func() {
		if len(seq) > 0 {
			fn(seq)
		}
		if len(seq) == maxLen {
			return
		}
		for _, a := range ids {
			if taken&(1<<a) != 0 {
				continue
			}
			taken |= 1 << a
			seq = append(seq, a)
			rec()
			seq = seq[:len(seq)-1]
			taken &^= 1 << a
		}
	}
	rec()
}

// eachPermutation calls fn with every order of ids (fn must not keep its argument).
func eachPermutation(ids []uint8, fn func([]uint8)) {
	a := slices.Clone(ids)
	var rec func(k int)
	rec = func(k int) {
		if k == len(a) {
			fn(a)
			return
		}
		for i := k; i < len(a); i++ {
			a[k], a[i] = a[i], a[k]
			rec(k + 1)
			a[k], a[i] = a[i], a[k]
		}
	}
	rec(0)
}

// permuteTargets are the states a collective_permute takes cur to: every state with
// the same shard count per dim (full), else the goal when it has them and the states
// that swap two equal-sized atoms or rewrite one dim toward the goal.
func (c *completeSearch) permuteTargets(cur cnode) []state {
	st := cur.st
	counts := make([]int, len(st))
	for d := range st {
		counts[d] = c.sp.count(st[d])
	}
	sameCounts := func(o state) bool {
		for d := range o {
			if c.sp.count(o[d]) != counts[d] {
				return false
			}
		}
		return true
	}
	var out []state
	if c.units != nil {
		return c.unitPermuteTargets(cur)
	}
	if c.full {
		for _, o := range c.statesOver(cur.unr) {
			if sameCounts(o) && !o.equal(st) {
				out = append(out, o)
			}
		}
		return out
	}
	if cur.unr != c.goal.unr {
		return nil
	}
	for _, t := range c.largeTargets() {
		if sameCounts(t) && !t.equal(st) && (!c.p2pGoalOnly || t.equal(c.goal.st)) {
			out = append(out, t)
		}
	}
	return out
}

// largeTargets are the point-to-point targets of a large space: the goal and the
// states one structured step before it (the goal with a free atom sliced onto a dim,
// a minor suffix gathered, or a minor suffix moved to another dim: the steps that
// undo one another), so that a path may end exchange, then structured step, and chain
// exchanges through them (the rounds of a hierarchical all-to-all).
func (c *completeSearch) largeTargets() []state {
	if c.targets != nil {
		return c.targets
	}
	g := c.goal.st
	out := []state{g}
	if !c.canRoute() {
		// A model that prices exchanges by its formula enumerates their transfers:
		// the goal alone.
		c.targets = out
		return out
	}
	seen := map[string]bool{g.key(): true}
	add := func(s state) {
		if k := s.key(); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	blocked := g.used() | c.goal.unr
	for d := range g {
		for a := range c.sp.atoms {
			if blocked&(1<<a) == 0 {
				nx := g.clone()
				nx[d] = append(nx[d], uint8(a))
				add(nx)
			}
		}
		n := len(g[d])
		for j := 1; j <= n; j++ {
			nx := g.clone()
			nx[d] = nx[d][:n-j]
			add(nx)
			for b := range g {
				if b != d {
					nx := g.clone()
					nx[d] = nx[d][:n-j]
					nx[b] = append(nx[b], g[d][n-j:]...)
					add(nx)
				}
			}
		}
	}
	c.targets = out
	return out
}

// exchangeTargets are the states an all_to_all_v takes cur to: every state (full),
// else the goal.
func (c *completeSearch) exchangeTargets(cur cnode) []state {
	if c.full {
		return c.statesOver(cur.unr)
	}
	keep := c.keepTargets(cur.st)
	if c.p2pGoalOnly {
		return append([]state{c.goal.st}, keep...)
	}
	return append(slices.Clip(c.largeTargets()), keep...)
}

// keepTargets are, per dim of st, the goal with that dim's atoms of st that the goal
// leaves free appended, and per dim of the goal, the goal with every such atom of st
// appended: an exchange that keeps them, and a gather of them that ends at the goal.
// The exchange moves less, and a gather over more axes runs on more links, than the
// exchange to the goal (a slice by a free atom before it makes the pair cheaper still).
func (c *completeSearch) keepTargets(st state) []state {
	g := c.goal.st
	blocked := g.used() | c.goal.unr
	var out []state
	add := func(d int, extra []uint8) {
		nx := g.clone()
		nx[d] = append(nx[d], extra...)
		if !nx.equal(st) && !slices.ContainsFunc(out, nx.equal) {
			out = append(out, nx)
		}
	}
	var all []uint8 // every dim's free atoms, dim by dim
	for d := range st {
		var extra []uint8
		for _, a := range st[d] {
			if blocked&(1<<a) == 0 {
				extra = append(extra, a)
			}
		}
		if len(extra) > 0 {
			add(d, extra)
		}
		all = append(all, extra...)
	}
	if len(all) > 0 {
		for d := range g {
			add(d, all) // one gather over them all
		}
	}
	return out
}

// cheapExchange reports whether the exchange from before to after is priced without
// routing more than maxHybridTransfers transfers.
func (c *completeSearch) cheapExchange(before, after state) bool {
	if !c.sp.canRoute(c.r) {
		return true
	}
	return c.sp.exchangeInClosedForm(c.r, before, after) || newPattern(c.sp, before, after, false, 0).transfersAtMost() <= maxHybridTransfers
}

// citem is an item of the open list: node id reached at g, or an edge out of it.
type citem struct {
	id    int32
	f, g  float64
	steps int32
	// lazy is a point-to-point edge out of node id (reached at g), not yet priced.
	lazy *lazyEdge
}

// lazyEdge is an edge the pass prices only when its bound reaches the head of the queue.
type lazyEdge struct {
	e       cedge
	to      cnode
	h       float64
	bounded bool // pushed again at its bound (moveBound, exchangeBound)
}

// queue puts it on the open list, in the slot of an item popped earlier if any.
func (c *completeSearch) queue(it citem) {
	i := int32(len(c.items))
	if n := len(c.free); n > 0 {
		i, c.free = c.free[n-1], c.free[:n-1]
		c.items[i] = it
	} else {
		c.items = append(c.items, it)
	}
	c.open.push(openEntry{f: it.f, steps: it.steps, i: i})
}

// next pops the open list's first item.
func (c *completeSearch) next() citem {
	i := c.open.pop().i
	c.free = append(c.free, i)
	return c.items[i]
}

// completeSteps turns a complete pass's path into plan steps: runs of slices merge into
// one local slice; every other edge is one step, priced as the pass priced it.
func (c *completeSearch) completeSteps(path []cstep) []Step {
	var out []Step
	for i := 0; i < len(path); i++ {
		e := path[i]
		if e.edge.op == OpSlice {
			j := i
			for j+1 < len(path) && path[j+1].edge.op == OpSlice {
				j++
			}
			m := move{op: OpSlice, before: e.before.st, after: path[j].after.st, unrBefore: c.unrRefs(e.before.unr), unrAfter: c.unrRefs(e.before.unr)}
			out = append(out, c.sp.steps(c.r, []move{m})...)
			i = j
			continue
		}
		if e.edge.pieces != nil {
			out = append(out, c.sp.steps(c.r, c.gatherPieces(e.edge, e.before, e.after))...)
			continue
		}
		if e.edge.op == OpAllToAllV {
			out = append(out, c.sp.directStep(c.r, e.before.st, e.after.st, c.unrRefs(e.after.unr)))
			continue
		}
		if e.edge.halo {
			out = append(out, c.haloSteps(e.edge, e.before, e.after)...)
			continue
		}
		out = append(out, c.sp.steps(c.r, []move{c.move(e.edge, e.before, e.after)})...)
	}
	return out
}

// passSpace is the space of the complete and structured passes: every mesh axis, split
// into prime atoms while they number at most completeMaxPrime.
func passSpace(r *Request) (*space, bool) {
	cp, ok := reqSpace(r, true, completeMaxPrime)
	if !ok || len(cp.atoms) > 60 {
		return nil, false
	}
	cp.done = r.done
	return cp, true
}

// completePassOn is completePass over cp (passSpace's).
func completePassOn(ctx context.Context, r *Request, cp *space, cands []*Plan, lowerBound float64) (*Plan, bool, error) {
	src, tgt := r.Source, r.Target
	start := cnode{cp.stateOf(src), maskOf(cp.atomsOf(src.Unreduced))}
	goal := cnode{cp.stateOf(tgt), maskOf(cp.atomsOf(tgt.Unreduced))}
	if start.unr&goal.unr != goal.unr {
		return nil, false, nil // reducedRefs rejected it already
	}
	cs := newCompleteSearch(ctx, cp, r, start, goal, start.unr&^goal.unr)
	free, any, best := bestCandidates(r, cands)
	if !cs.full && r.Effort != EffortExhaustive && best != nil && lowerBound > 0 && any > completeWideGap*lowerBound && latencyBound(best) {
		cs.moves, cs.maxP2P = familyMoves{wide: true}, completeWideP2PBudget
	}
	return cs.against(free, any, "complete")
}

// bestCandidates is the time of the best candidate without a full rematerialization
// (free), of the best of all (any, that plan best), among those within the memory
// budget.
func bestCandidates(r *Request, cands []*Plan) (free, any float64, best *Plan) {
	free, any = math.Inf(1), math.Inf(1)
	for _, c := range cands {
		if c.finishTotals(); r.MemoryBudget > 0 && c.Summary.PeakBytesPerDevice > r.MemoryBudget {
			continue
		}
		if c.Summary.TimeUS < any {
			best = c
		}
		any = min(any, c.Summary.TimeUS)
		if !c.Summary.FullRematerialization {
			free = min(free, c.Summary.TimeUS)
		}
	}
	return free, any, best
}

// against runs the pass bounded by the best candidates (free: without a full
// rematerialization, any: of all): a plan named name strictly cheaper under the
// request's rules (nil: none), and whether the answer is proven.
func (cs *completeSearch) against(free, any float64, name string) (*Plan, bool, error) {
	r, cp := cs.r, cs.sp
	plan := func(res completeResult) *Plan {
		if res.path == nil {
			return nil
		}
		p := &Plan{Request: r, sp: cp, Steps: cs.completeSteps(res.path)}
		return p.named(name)
	}
	if r.AllowFullRemat || !cs.noRep {
		cs.noRep = false
		res, err := cs.run(any)
		return plan(res), res.proven, err
	}
	// A plan without a full rematerialization wins whatever the times: look for one
	// first, then, when there is none, for the fastest that rematerializes.
	res, err := cs.run(free)
	if err != nil || res.path != nil || !math.IsInf(free, 1) || !res.proven {
		return plan(res), res.proven, err
	}
	cs.noRep = false
	res, err = cs.run(any)
	return plan(res), res.proven, err
}

// latencyBound reports whether most of p's time is its steps' latency (more rounds of
// fewer peers can then beat it).
func latencyBound(p *Plan) bool {
	lat := 0.0
	for _, st := range p.Steps {
		lat += st.Cost.LatencyUS
	}
	return lat > 0.5*p.Summary.TimeUS
}

// withinBudget keeps the plans whose peak fits budget.
func withinBudget(cands []*Plan, budget int64) []*Plan {
	var out []*Plan
	for _, c := range cands {
		if c.finishTotals(); c.Summary.PeakBytesPerDevice <= budget {
			out = append(out, c)
		}
	}
	return out
}

// BudgetError says that no plan fits the request's memory budget, and the smallest
// budget that admits one (0: not known).
type BudgetError struct {
	Budget    int64
	MinBudget int64
}

func (e *BudgetError) Error() string {
	return "no plan fits memory_budget_bytes_per_device"
}

func (e *BudgetError) Unwrap() error { return ErrNoPlan }

// budgetError is the error of a request whose budget no plan fits, with the smallest
// budget that admits a plan: the least, over paths from the source to the target, of the
// largest tile on the path (a bottleneck search over the complete pass's moves; both
// ends count).
func budgetError(ctx context.Context, r *Request) error {
	e := &BudgetError{Budget: r.MemoryBudget}
	cp, ok := reqSpace(r, true, completeMaxPrime)
	if !ok || len(cp.atoms) > 60 {
		return e
	}
	cp.done = r.done
	defer cp.releaseRouter()
	start := cnode{cp.stateOf(r.Source), maskOf(cp.atomsOf(r.Source.Unreduced))}
	goal := cnode{cp.stateOf(r.Target), maskOf(cp.atomsOf(r.Target.Unreduced))}
	cs := newCompleteSearch(ctx, cp, r, start, goal, start.unr&^goal.unr)
	cs.noRep = cs.noRep && !r.AllowFullRemat
	// Binary search over the tile sizes states can have: the answer is one of them.
	sizes := []int64{}
	seen := map[int64]bool{}
	floor := max(cs.tileBytes(start.st), cs.tileBytes(goal.st))
	for _, s := range cs.statesOverOrSample() {
		if b := cs.tileBytes(s); b >= floor && !seen[b] {
			seen[b] = true
			sizes = append(sizes, b)
		}
	}
	slices.Sort(sizes)
	lo, hi := 0, len(sizes)-1
	found := int64(0)
	for lo <= hi {
		mid := (lo + hi) / 2
		cs.budget = sizes[mid]
		res, err := cs.run(math.Inf(1))
		if err != nil {
			return err
		}
		if res.path != nil {
			found = sizes[mid]
			hi = mid - 1
		} else {
			lo = mid + 1
		}
	}
	if err := ctx.Err(); err != nil {
		return err // a router may have stopped: the paths' prices are meaningless
	}
	e.MinBudget = found
	return e
}

// statesOverOrSample lists the states of the space (every state when the space is
// small, else the tiles of one atom count per dim).
func (c *completeSearch) statesOverOrSample() []state {
	if c.full {
		return c.statesOver(c.start.unr)
	}
	// Every split of the atoms' product over the dims is a tile size some state has:
	// enumerate states whose dims take atoms in index order.
	var out []state
	rank := len(c.goal.st)
	cur := make(state, rank)
	var rec func(a int)
	rec = func(a int) {
		if len(out) > 1<<14 {
			return
		}
		if a == len(c.sp.atoms) {
			out = append(out, cur.clone())
			return
		}
		rec(a + 1)
		if c.start.unr&(1<<a) != 0 {
			return
		}
		for d := range cur {
			cur[d] = append(cur[d], uint8(a))
			rec(a + 1)
			cur[d] = cur[d][:len(cur[d])-1]
		}
	}
	rec(0)
	return out
}

// haloSteps are the steps of a halo gather edge: the halo exchanges on its dim, then
// the all_gather, which reads the windows they filled.
func (c *completeSearch) haloSteps(e cedge, before, after cnode) []Step {
	m := c.move(e, before, after)
	emu := &xlaEmu{sp: c.sp, r: c.r}
	w := newHaloWindows(c.sp, e.dim, haloGather, before.st, after.st)
	hm := move{op: opHalo, dim: e.dim, dim2: haloGather, group: slices.Clone(before.st[e.dim]), before: before.st, after: after.st, unrBefore: m.unrBefore, unrAfter: m.unrBefore}
	out := emu.haloSteps(hm, w, nil)
	return append(out, c.sp.steps(c.r, []move{m})...)
}

// pairBound is the most elements of its tile in after that some device's tile in
// before lacks, with, when the model counts hops (cost.AxisHops), the hop latency some
// lacking element must travel: for a device q that lacks data, no device closer than
// the nearest one whose tile in before holds part of what q lacks can send it, and any
// chain of steps pays at least that device's hop latency to q. The largest over q
// bounds every path from before to after. Devices are the atoms' digit assignments
// (every mesh axis is in the complete pass's space).
//
// peers is the most messages a lacking device must receive in one exchange: no
// sender provides more of what q lacks than its before tile holds of it.
func (c *completeSearch) pairBound(before, after state) (lack int64, hop float64, peers int64) {
	c.devices()
	rank := len(before)
	b, a := c.rangesOf(before), c.rangesOf(after)
	n := len(c.coords)
	for q := 0; q < n; q++ {
		qa, qb := a[q*rank:(q+1)*rank], b[q*rank:(q+1)*rank]
		in, both := int64(1), int64(1)
		for d := range qa {
			in *= qa[d][1] - qa[d][0]
			both *= max(0, min(qa[d][1], qb[d][1])-max(qa[d][0], qb[d][0]))
		}
		if in-both <= 0 {
			continue
		}
		missing := in - both
		lack = max(lack, missing)
		nearest := math.Inf(1)
		most := int64(0) // the most of what q lacks one sender holds
		for p := 0; p < n; p++ {
			pb := b[p*rank : (p+1)*rank]
			// p helps with what its before tile holds of q's after tile outside q's
			// before tile.
			meet, meetOwn := int64(1), int64(1)
			for d := range pb {
				lo, hi := max(pb[d][0], qa[d][0]), min(pb[d][1], qa[d][1])
				meet *= max(0, hi-lo)
				meetOwn *= max(0, min(hi, qb[d][1])-max(lo, qb[d][0]))
			}
			if cov := meet - meetOwn; cov > 0 {
				most = max(most, cov)
				if c.hopDist != nil {
					nearest = min(nearest, c.hopDist[p*n+q])
				}
			}
		}
		if !math.IsInf(nearest, 1) {
			hop = max(hop, nearest)
		}
		if most > 0 {
			peers = max(peers, (missing+most-1)/most)
		}
	}
	return lack, hop, peers
}

// devices fills the device table of the space once: each device (an assignment of
// digits to the atoms) and, on models that count hops, the hop latency between every
// two devices.
func (c *completeSearch) devices() {
	if c.coords != nil {
		return
	}
	sp := c.sp
	total := c.devicesN
	c.digits = make([][]int, total)
	c.coords = make([][]int, total)
	for i := range total {
		dg := sp.digitsOf(i)
		co := make([]int, len(sp.mesh.Axes))
		for k, a := range sp.atoms {
			co[sp.mesh.AxisIndex(a.Name)] += dg[k] * (a.Of / (a.Pre * a.Size))
		}
		c.digits[i], c.coords[i] = dg, co
	}
	useHops := false
	for _, h := range c.hops {
		useHops = useHops || h.LatencyUS > 0
	}
	if !useHops {
		return
	}
	c.hopDist = make([]float64, total*total)
	for p := range total {
		for q := range total {
			t := 0.0
			for ax, h := range c.hops {
				if h.LatencyUS > 0 {
					t += h.LatencyUS * float64(h.Distance(c.coords[p][ax], c.coords[q][ax]))
				}
			}
			c.hopDist[p*total+q] = t
		}
	}
}

// rangesOf is every device's range of every dim in st (device-major), memoized.
func (c *completeSearch) rangesOf(st state) [][2]int64 {
	k := stateKey(st)
	if r, ok := c.ranges[k]; ok {
		return r
	}
	rank := len(st)
	out := make([][2]int64, len(c.digits)*rank)
	for i, dg := range c.digits {
		for d := range st {
			lo, hi := c.sp.dimRange(d, st[d], dg)
			out[i*rank+d] = [2]int64{lo, hi}
		}
	}
	if c.ranges == nil {
		c.ranges = map[skey][][2]int64{}
	}
	c.ranges[k] = out
	return out
}

// dimRange is the range [lo, hi) of dim d that the device with the given atom digits
// holds when ids shard the dim (major to minor), clipped to the dim.
func (sp *space) dimRange(d int, ids []uint8, digits []int) (int64, int64) {
	idx, cnt := int64(0), int64(1)
	for _, a := range ids {
		idx = idx*int64(sp.atoms[a].Size) + int64(digits[a])
		cnt *= int64(sp.atoms[a].Size)
	}
	D := sp.shape[d]
	t := sharding.CeilDiv(D, cnt)
	return min(idx*t, D), min((idx+1)*t, D)
}

// canRoute reports whether exchanges are priced by routing their transfers (else by
// the model's formula, which exchangeBound does not describe).
func (c *completeSearch) canRoute() bool { return c.sp.canRoute(c.r) }

// sampledLack is the most a sampled device (device 0, the last, and a seeded draw)
// lacks of its tile in after when it holds its tile in before: a lower bound on the most
// any device lacks, at the cost of a few devices rather than all.
func (c *completeSearch) sampledLack(before, after state) (lack int64) {
	sp := c.sp
	if c.samples == nil {
		rng := uint64(0x9e3779b97f4a7c15)
		ids := []int{0, c.devicesN - 1}
		for len(ids) < boundSamples {
			rng = rng*6364136223846793005 + 1442695040888963407
			ids = append(ids, int(rng>>33)%c.devicesN)
		}
		for _, i := range ids {
			c.samples = append(c.samples, sp.digitsOf(i))
		}
	}
	for _, q := range c.samples {
		in, both := int64(1), int64(1)
		for d := range before {
			alo, ahi := sp.dimRange(d, after[d], q)
			blo, bhi := sp.dimRange(d, before[d], q)
			in *= ahi - alo
			both *= max(0, min(ahi, bhi)-max(alo, blo))
		}
		lack = max(lack, in-both)
	}
	return lack
}

// digitsOf is device i's digit per atom (the first atom varies fastest).
func (sp *space) digitsOf(i int) []int {
	dg := make([]int, len(sp.atoms))
	for k, a := range sp.atoms {
		dg[k] = i % a.Size
		i /= a.Size
	}
	return dg
}
