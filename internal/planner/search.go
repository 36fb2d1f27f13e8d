package planner

import (
	"context"
	"encoding/binary"
	"math"
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// move is one edge of the search: an op from before to after over the group atoms.
type move struct {
	op         Op
	dim, dim2  int     // slice/gather/reduce_scatter dim; all_to_all: dim = from, dim2 = to
	dims       []int   // slice: every dim sliced
	group      []uint8 // atoms the collective runs over
	before     state
	after      state
	unrBefore  []sharding.AxisRef
	unrAfter   []sharding.AxisRef
	reduceRefs []sharding.AxisRef // reductions: the axes reduced
	est        cost.Estimate
	bytes      int64 // received by the busiest device
}

// The search is Dijkstra's algorithm made A* by an admissible heuristic (heuristic.go).
//
// Correctness. Edge costs are the cost model's estimates, never negative; slices cost
// nothing. A node's priority is f = g + h with h a lower bound on the cost of every path
// from the node to the goal (h = 0 without a bound, which is plain Dijkstra). A node
// whose state already has a path of cost <= g is not pushed, and a state is pushed again
// whenever a strictly cheaper path to it appears, even after it was expanded (a
// relaxed bound need not be consistent, so states may be re-opened). With an admissible
// h, the first goal popped is therefore a cheapest path in search costs: any cheaper
// path would have an open node with f below it. Ties between equal f go to fewer steps.
//
// Pruning never removes a cheapest plan among the plans the search admits: the tile and
// full-replication limits and the feasibility check are properties of a single state
// or move, applied identically on every path, and the filters run cheapest first
// (tile size, replication, cost against the best known g, then feasibility) only to
// save work; a move rejected by one filter is rejected whatever the order.

// node is one entry of the search: a state reached at cost g (h is the heuristic of
// that state) by the move op/dim/dim2 from node prev (-1 at the start).
type node[K comparable] struct {
	st        state
	key       K
	g, f      float64
	steps     int32
	prev      int32
	op        Op
	dim, dim2 int16
	// lazy marks a collective_permute edge priced optimistically (searcher.permLB); its
	// exact price is computed when the node is popped (in: the parent's input bytes).
	lazy bool
	in   int64
}

// openQueue is a binary heap of node indices ordered by (f, steps).
type openQueue[K comparable] struct {
	nodes []node[K]
	idx   []int32
}

func (q *openQueue[K]) less(i, j int) bool {
	a, b := &q.nodes[q.idx[i]], &q.nodes[q.idx[j]]
	if a.f != b.f {
		return a.f < b.f
	}
	return a.steps < b.steps
}

// push and pop are container/heap's algorithm without the interface boxing.
func (q *openQueue[K]) push(i int32) {
	q.idx = append(q.idx, i)
	j := len(q.idx) - 1
	for j > 0 {
		p := (j - 1) / 2
		if !q.less(j, p) {
			break
		}
		q.idx[p], q.idx[j] = q.idx[j], q.idx[p]
		j = p
	}
}

func (q *openQueue[K]) pop() int32 {
	n := len(q.idx) - 1
	q.idx[0], q.idx[n] = q.idx[n], q.idx[0]
	i := 0
	for {
		l := 2*i + 1
		if l >= n || l < 0 {
			break
		}
		j := l
		if r := l + 1; r < n && q.less(r, l) {
			j = r
		}
		if !q.less(j, i) {
			break
		}
		q.idx[i], q.idx[j] = q.idx[j], q.idx[i]
		i = j
	}
	x := q.idx[n]
	q.idx = q.idx[:n]
	return x
}

// seen is what the search knows of a state: the cheapest cost found and its heuristic.
type seen struct{ g, h float64 }

// search finds the cheapest schedule from start to goal over slice, all_gather,
// all_to_all and collective_permute moves. It returns the moves, the number of
// expansions, and whether the goal was reached within the budget.
//
// ub is the cost of a plan already known (math.Inf(1): none): states whose cost plus
// heuristic exceeds it cannot lead to a cheaper plan and are not pushed.
func (sp *space) search(ctx context.Context, r *Request, start, goal state, unr []sharding.AxisRef, ub float64) ([]move, int, bool, error) {
	if start.equal(goal) {
		return nil, 0, true, nil
	}
	s := newSearcher(sp, r, start, goal, unr)
	run := func(budget int) ([]move, int, bool, error) {
		s.budget = budget
		if packable(sp, len(goal)) {
			return runSearch(ctx, s, start, func(st state) packedKey { return packKey(st) })
		}
		return runSearch(ctx, s, start, func(st state) string { return st.key() })
	}
	// First weighted passes (f = g + w·h) on small budgets: they reach the goal in few
	// expansions, and their best plan, at most w times the optimum, bounds the exact
	// pass. The first moves strictly toward the goal (a quarter of the budget); the
	// second also fills dims to their goal counts with other atoms for a later permute
	// (relax, as XLA's slice-then-permute): when the first reached the goal, as an
	// anytime search (an eighth) that looks only for strictly cheaper plans than the best
	// so far and goes on after each, else greedier (w = 16, a quarter).
	var first []move
	var firstG float64
	spent := 0
	weighted := s.h != nil && !r.noHeuristic && r.MaxExpansions >= 64
	if weighted {
		s.ub, s.swaps = math.Inf(1), true
		reached := false
		for i, w := range weightedPassWeights {
			s.weight, s.relax = w, i > 0
			if reached {
				// Only strictly cheaper plans are worth finding, and the pass keeps
				// looking after each until its budget or its open list runs out.
				s.weight, s.ub, s.anytime = weightedPassWeights[0], ub*(1-1e-9), true
			}
			budget := r.MaxExpansions / 4
			if s.anytime {
				budget = r.MaxExpansions / 8 // it only improves on a plan
			}
			mv, n, found, err := run(budget)
			spent += n
			if err != nil {
				return nil, spent, false, err
			}
			reached = reached || found
			if found && s.goalG < ub { // search costs (move by move), as the exact pass counts
				ub, first, firstG = s.goalG, mv, s.goalG
			}
		}
	}
	// The exact pass moves strictly toward the goal and leaves out the permutes that
	// swap or replace single atoms (towardGoal and the direct permute stay); the
	// weighted passes have those moves, and their plans stand as incumbents. On issue
	// 12's random set, against an exact pass with the relaxed fills: 10 of 250 searches
	// stop at the budget instead of 63, 25% less CPU, and plans cost 0.955 of theirs on
	// average (1 slower, by 1.09x; BENCHMARKS.md). r.allMoves gives the exact pass every
	// move (tests comparing A* with Dijkstra, which has them all).
	s.weight, s.ub, s.capped, s.anytime = 1, ub*(1+1e-9), false, false
	s.swaps = r.allMoves || !weighted
	s.relax = s.swaps
	mv, n, found, err := run(r.MaxExpansions)
	sp.searchExact = !s.capped
	if err != nil || found {
		sp.searchCost = s.goalG
		return mv, spent + n, found, err
	}
	sp.searchCost = firstG
	return first, spent + n, first != nil, nil
}

// weightedPassWeights are the weights w of the search's weighted passes: the second
// runs with the first's weight when the first found a plan, else with its own (a larger
// w is greedier: it reaches the goal in fewer expansions, with a weaker guarantee).
var weightedPassWeights = [...]float64{4, 16}

// runSearch is the search loop over a state key type K: packedKey when every state fits
// one (no allocation per lookup), the string key otherwise.
func runSearch[K comparable](ctx context.Context, s *searcher, start state, keyOf func(state) K) ([]move, int, bool, error) {
	rs := &searchRun[K]{s: s, q: &openQueue[K]{}, best: map[K]seen{}, keyOf: keyOf}
	startKey := keyOf(start)
	h0 := s.heuristic(start)
	rs.best[startKey] = seen{0, h0}
	rs.push(start, startKey, 0, h0, 0, -1, "", 0, 0, false, 0)
	goalKey := keyOf(s.goal)
	q := rs.q
	for len(q.idx) > 0 {
		ni := q.pop()
		n := q.nodes[ni]
		if n.lazy {
			rs.priceLazy(&n)
			continue
		}
		if b := rs.best[n.key]; b.g < n.g {
			continue // a cheaper path to this state was pushed after this one
		} else if n.g+b.h > s.ub {
			continue // an anytime pass found a plan this node cannot beat since it was queued
		}
		if n.key == goalKey {
			if mv := rs.reachGoal(ni); mv != nil {
				return mv, rs.expansions, true, nil
			}
			continue
		}
		rs.expansions++
		if rs.expansions > s.budget {
			s.capped = true
			break
		}
		if rs.expansions%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, rs.expansions, false, err
			}
		}
		rs.cur, rs.curIdx = &n, ni
		s.expand(n.st, rs.successor)
	}
	if rs.bestMv != nil {
		s.goalG = rs.bestG
		return mergeMoves(s.sp, s.r, rs.bestMv), rs.expansions, true, nil
	}
	return nil, rs.expansions, false, nil
}

// searchRun is one pass of runSearch: the open queue, what is known of each state, the
// node being expanded, and (anytime passes) the cheapest plan found so far.
type searchRun[K comparable] struct {
	s          *searcher
	q          *openQueue[K]
	best       map[K]seen
	keyOf      func(state) K
	expansions int
	cur        *node[K]
	curIdx     int32
	bestMv     []move
	bestG      float64
}

// push queues a node; h is the heuristic (a lower bound, which prunes against s.ub), and
// the queue orders by f = g + weight x h.
func (rs *searchRun[K]) push(st state, key K, g, h float64, steps, prev int32, op Op, dim, dim2 int, lazy bool, in int64) {
	rs.q.nodes = append(rs.q.nodes, node[K]{st: st, key: key, g: g, f: g + rs.s.weight*h, steps: steps, prev: prev, op: op, dim: int16(dim), dim2: int16(dim2), lazy: lazy, in: in})
	rs.q.push(int32(len(rs.q.nodes) - 1))
}

// priceLazy prices a lazy permute edge now (Lazy A*: it was priced from below). best
// only ever holds exact costs, so no path was discarded on an optimistic price.
func (rs *searchRun[K]) priceLazy(n *node[K]) {
	s := rs.s
	parent := &rs.q.nodes[n.prev]
	g := parent.g + s.price(n.op, 0, n.in, parent.st, n.st)
	if b, ok := rs.best[n.key]; ok && b.g <= g {
		return
	}
	h := rs.best[n.key].h
	rs.best[n.key] = seen{g, h}
	if g+h > s.ub {
		return
	}
	rs.push(n.st, n.key, g, h, n.steps, n.prev, n.op, int(n.dim), int(n.dim2), false, 0)
}

// reachGoal rebuilds the path to goal node ni. It returns the merged moves, or nil when
// the pass is anytime: the plan is then kept and only strictly cheaper ones are sought.
func (rs *searchRun[K]) reachGoal(ni int32) []move {
	s, q := rs.s, rs.q
	var mv []move
	for x := ni; q.nodes[x].prev >= 0; x = q.nodes[x].prev {
		mv = append(mv, s.moveOf(q.nodes[q.nodes[x].prev].st, &q.nodes[x].st, q.nodes[x].op, int(q.nodes[x].dim), int(q.nodes[x].dim2)))
	}
	slices.Reverse(mv)
	g := q.nodes[ni].g
	if !s.anytime {
		s.goalG = g
		return mergeMoves(s.sp, s.r, mv)
	}
	if rs.bestMv == nil || g < rs.bestG {
		rs.bestMv, rs.bestG = mv, g
		s.ub = g * (1 - 1e-9)
	}
	return nil
}

// successor prices the move from the node being expanded to nx and queues nx unless a
// path at least as cheap is known, the move is infeasible, or nx cannot beat the
// incumbent.
func (rs *searchRun[K]) successor(nx state, op Op, dim, dim2 int, group uint64) {
	s, n := rs.s, rs.cur
	lazy := op == OpCollectivePermute && s.routed
	var g float64
	if lazy {
		g = n.g + s.permLB(s.inBytes, n.st, nx)
	} else {
		g = n.g + s.price(op, group, s.inBytes, n.st, nx)
	}
	k := rs.keyOf(nx)
	old, ok := rs.best[k]
	if ok && old.g <= g {
		return
	}
	if op != OpCollectivePermute && !s.feasible(n.st, nx, group) {
		return
	}
	h := old.h
	if !ok {
		h = s.heuristic(nx)
	}
	if g+h > s.ub {
		return // cannot beat the incumbent
	}
	if lazy {
		if !ok {
			rs.best[k] = seen{math.Inf(1), h} // remember h; no exact cost yet
		}
		rs.push(s.keep(nx), k, g, h, n.steps+1, rs.curIdx, op, dim, dim2, true, s.inBytes)
		return
	}
	rs.best[k] = seen{g, h}
	rs.push(s.keep(nx), k, g, h, n.steps+1, rs.curIdx, op, dim, dim2, false, 0)
}

// moveOf rebuilds the move op from before to *after (the group follows from the two
// states: the dropped suffix for all_gather and all_to_all, the changed atoms for a
// collective_permute); prices are filled by steps.
func (s *searcher) moveOf(before state, after *state, op Op, dim, dim2 int) move {
	m := move{op: op, dim: dim, dim2: dim2, before: before, after: *after, unrBefore: s.unr, unrAfter: s.unr}
	switch op {
	case OpSlice:
		m.dims = []int{dim}
	case OpAllGather, OpAllToAll:
		m.group = slices.Clone(before[dim][len((*after)[dim]):])
	case OpCollectivePermute:
		m.group = changedAtoms(before, *after)
	}
	return m
}

// searcher holds one search's per-request invariants and memo tables.
type searcher struct {
	sp       *space
	r        *Request
	goal     state
	goalMask uint64
	unr      []sharding.AxisRef
	maxTile  int64
	noRep    bool // prune fully replicated intermediate states

	prices     map[priceKey]float64
	permPrices map[permKey]float64
	routed     bool // the model prices point-to-point steps by their traffic
	// goalDirected restricts the moves to those that make progress: slices and
	// all-to-alls only into the dim the goal puts the (first) atom in, and no dim's
	// common prefix with its goal is gathered or moved. goalDim is that dim per atom
	// (-1: replicated in the goal).
	goalDirected bool
	goalDim      []int
	goalCount    []int
	weight       float64 // the heuristic's weight: 1 in an exact pass
	relax        bool    // goal-directed moves may also fill a dim to its goal count with other atoms
	swaps        bool    // permutes that swap or replace single atoms are generated
	capped       bool    // the last pass stopped at its budget
	anytime      bool    // a goal tightens ub and the pass goes on (its best plan is returned)
	goalG        float64 // the search cost of the last pass' plan (before merging)
	budget       int     // expansions of this pass
	tb           timeBounder
	minLat       float64
	peakIn       float64
	ub           float64 // prune states whose cost plus heuristic exceeds it
	covers       map[string]bool
	buf          []byte

	// slab and dims back the states the search keeps (keep), a few allocations for
	// many states.
	slab []uint8
	dims [][]uint8

	// scratch for expand
	nx      state
	perm    []uint8 // towardGoal's scratch
	counts  []int64
	inBytes int64

	h *bound // nil: plain Dijkstra
}

type priceKey struct {
	op    Op
	group uint64
	in    int64
}

type permKey struct {
	before, after string
	in            int64
}

func newSearcher(sp *space, r *Request, start, goal state, unr []sharding.AxisRef) *searcher {
	s := &searcher{
		sp: sp, r: r, goal: goal, goalMask: goal.used(), unr: unr,
		maxTile:    max(sp.tileElems(start), sp.tileElems(goal)),
		noRep:      !r.Source.IsFullyReplicated() && !r.Target.IsFullyReplicated() && len(unr) == 0,
		prices:     map[priceKey]float64{},
		permPrices: map[permKey]float64{},
		routed:     sp.canRoute(r),
		covers:     map[string]bool{},
		counts:     make([]int64, len(goal)),
	}
	s.nx = make(state, len(goal))
	for d := range s.nx {
		s.nx[d] = make([]uint8, 0, len(sp.atoms))
	}
	if !r.noHeuristic {
		s.h = newBound(sp, r, goal)
	}
	s.weight = 1
	s.goalDirected = !r.fullSearch
	s.goalDim = make([]int, len(sp.atoms))
	for a := range s.goalDim {
		s.goalDim[a] = -1
	}
	s.goalCount = make([]int, len(goal))
	for d, ids := range goal {
		s.goalCount[d] = sp.count(ids)
		for _, a := range ids {
			s.goalDim[a] = d
		}
	}
	if tb, ok := r.Model.(timeBounder); ok && s.routed {
		s.tb, s.minLat, s.peakIn = tb, tb.MinLatency(r.Mesh), tb.PeakDeviceIngress(r.Mesh)
	} else {
		s.routed = false
	}
	return s
}

// keep copies st into the searcher's slabs. Each dim of the copy has its length as its
// capacity, so an append to it reallocates instead of overwriting a neighbour.
func (s *searcher) keep(st state) state {
	n := 0
	for _, d := range st {
		n += len(d)
	}
	// Chunks double (from small ones) so tiny searches stay cheap.
	if cap(s.slab)-len(s.slab) < n {
		s.slab = make([]uint8, 0, max(256, n, 2*cap(s.slab)))
	}
	if r := len(st); cap(s.dims)-len(s.dims) < r {
		s.dims = make([][]uint8, 0, max(32, r, 2*cap(s.dims)))
	}
	i := len(s.dims)
	s.dims = s.dims[:i+len(st)]
	out := state(s.dims[i : i+len(st) : i+len(st)])
	for d, ids := range st {
		j := len(s.slab)
		s.slab = append(s.slab, ids...)
		out[d] = s.slab[j:len(s.slab):len(s.slab)]
	}
	return out
}

// permLB is a lower bound on the routed price of a collective_permute of in bytes per
// device from st to nx: the device that receives its tile takes at least in over
// everything that can flow into one device, after at least one step of the cheapest
// link; and the data each torus half lacks crosses into it (bound.moveTime).
func (s *searcher) permLB(in int64, st, nx state) float64 {
	t := s.tb.Combine(s.minLat, float64(in)/s.peakIn)
	if s.h != nil && len(s.h.cuts) > 0 {
		t = max(t, s.h.moveTime(st, nx))
	}
	return t
}

func (s *searcher) heuristic(st state) float64 {
	if s.h == nil {
		return 0
	}
	return s.h.time(st)
}

// price is the search cost of a move: the model's time for the collective op over the
// group atoms on an input buffer of in bytes, memoized (the same collective recurs on
// many states). It builds the same cost.Collective as (*space).price.
func (s *searcher) price(op Op, group uint64, in int64, before, after state) float64 {
	if op == OpSlice {
		return 0
	}
	if op == OpCollectivePermute && s.routed {
		// The price depends on where every atom goes, not only on the group.
		k := permKey{before.key(), after.key(), in}
		if t, ok := s.permPrices[k]; ok {
			return t
		}
		est, _ := s.sp.routed(s.r, before, after, true, in)
		s.permPrices[k] = est.TimeUS
		return est.TimeUS
	}
	v := in
	if op == OpAllToAll {
		// The bytes of the padded array: the receiving dim's input length is split k
		// ways, padded (as (*space).price counts it).
		for d := range after {
			if len(after[d]) > len(before[d]) {
				v = s.sp.allToAllBytes(before, d, s.sp.countMask(group))
				break
			}
		}
	}
	key := priceKey{op, group, v}
	if t, ok := s.prices[key]; ok {
		return t
	}
	var ids []uint8
	k := int64(1)
	for a := range s.sp.atoms {
		if group&(1<<a) != 0 {
			ids = append(ids, uint8(a))
			k *= int64(s.sp.atoms[a].Size)
		}
	}
	c := cost.Collective{Mesh: s.r.Mesh, Axes: s.sp.refs(sortedAtoms(s.sp, ids))}
	switch op {
	case OpAllGather:
		c.Kind, c.Bytes = cost.AllGather, k*in
	case OpAllToAll:
		c.Kind, c.Bytes = cost.AllToAll, v
	case OpCollectivePermute:
		c.Kind, c.Bytes = cost.CollectivePermute, in
	}
	t := s.r.Model.Estimate(c).TimeUS
	s.prices[key] = t
	return t
}

// feasible is (*space).feasible with the per-dim answers memoized: a dim's answer
// depends only on its atoms before and after and on which of them the group varies.
func (s *searcher) feasible(before, after state, group uint64) bool {
	sp := s.sp
	for d := range before {
		b, a := before[d], after[d]
		if slices.Equal(b, a) {
			continue
		}
		D := sp.shape[d]
		if D%int64(sp.count(b)) == 0 && D%int64(sp.count(a)) == 0 {
			continue
		}
		var rel uint64
		for _, x := range b {
			rel |= 1 << x
		}
		for _, x := range a {
			rel |= 1 << x
		}
		buf := append(s.buf[:0], byte(d), byte(len(b)))
		buf = append(buf, b...)
		buf = append(buf, a...)
		buf = binary.LittleEndian.AppendUint64(buf, group&rel)
		s.buf = buf
		ok, hit := s.covers[string(buf)]
		if !hit {
			ok = sp.dimCovered(d, b, a, group)
			s.covers[string(buf)] = ok
		}
		if !ok {
			return false
		}
	}
	return true
}

// expand calls yield for every move out of st that the request allows and that passes
// the cheap filters (tile size, full replication). nx is scratch, valid during the call
// only. Moves are generated in a fixed order (slices, then per dim gathers and
// all-to-alls, then permutes) so ties resolve the same way on every run.
func (s *searcher) expand(st state, yield func(nx state, op Op, dim, dim2 int, group uint64)) {
	for d := range st {
		s.counts[d] = int64(s.sp.count(st[d]))
	}
	s.inBytes = s.sp.bytes(s.tileOf(-1, 0, -1, 0))
	e := expansion{s: s, st: st, nx: s.nx, used: st.used(), yield: yield}
	if s.r.allowed(OpSlice) {
		e.slices()
	}
	e.gathersAndAllToAlls()
	if s.r.allowed(OpCollectivePermute) {
		e.permutes()
	}
}

// expansion is one call of expand: the state expanded, the scratch successor and the
// consumer of the moves.
type expansion struct {
	s     *searcher
	st    state
	nx    state
	used  uint64
	yield func(nx state, op Op, dim, dim2 int, group uint64)
}

// reset makes the scratch successor a copy of the state.
func (e *expansion) reset() {
	for d := range e.st {
		e.nx[d] = append(e.nx[d][:0], e.st[d]...)
	}
}

// emit applies the cheap filters to the successor in e.nx; c1/c2 are the new counts of
// dims d1/d2 (-1: none).
func (e *expansion) emit(op Op, dim, dim2 int, group uint64, d1 int, c1 int64, d2 int, c2 int64) {
	s := e.s
	if s.tileOf(d1, c1, d2, c2) > s.maxTile {
		return
	}
	if s.noRep && op != OpSlice && e.nx.used() == 0 && !e.nx.equal(s.goal) {
		return // never pass through full replication
	}
	e.yield(e.nx, op, dim, dim2, group)
}

// slices appends each unused goal atom to the dims the goal-directed rules allow.
func (e *expansion) slices() {
	s, sp := e.s, e.s.sp
	for a := range sp.atoms {
		u := uint8(a)
		if e.used&(1<<u) != 0 || s.goalMask&(1<<u) == 0 {
			continue
		}
		for d := range e.st {
			if s.goalDirected && s.goalDim[u] != d && (!s.relax || int64(s.goalCount[d]) != s.counts[d]*int64(sp.atoms[u].Size)) {
				// Slice an atom into the dim that ends with it, or into a dim it
				// brings to its goal count (a permute can exchange it later, as in
				// XLA's slice-then-permute).
				continue
			}
			e.reset()
			e.nx[d] = append(e.nx[d], u)
			e.emit(OpSlice, d, 0, 0, d, s.counts[d]*int64(sp.atoms[u].Size), -1, 0)
		}
	}
}

// gathersAndAllToAlls drops each suffix of each dim (all_gather) or moves it to the
// minor end of another dim (all_to_all).
func (e *expansion) gathersAndAllToAlls() {
	s, sp, goal := e.s, e.s.sp, e.s.goal
	gather, a2a := s.r.allowed(OpAllGather), s.r.allowed(OpAllToAll)
	for d := range e.st {
		n := len(e.st[d])
		var group uint64
		k := int64(1)
		// Goal-directed: the dim's common prefix with its goal stays put.
		keep := 0
		if s.goalDirected {
			for keep < n && keep < len(goal[d]) && e.st[d][keep] == goal[d][keep] {
				keep++
			}
		}
		for j := 1; j <= n-keep; j++ {
			a := e.st[d][n-j]
			group |= 1 << a
			k *= int64(sp.atoms[a].Size)
			suffix := e.st[d][n-j:]
			if gather {
				e.reset()
				e.nx[d] = e.nx[d][:n-j]
				e.emit(OpAllGather, d, 0, group, d, s.counts[d]/k, -1, 0)
			}
			if !a2a {
				continue
			}
			for b := range e.st {
				if b == d || s.goalDirected && s.goalDim[suffix[0]] != b && (!s.relax || int64(s.goalCount[b]) != s.counts[b]*k) {
					continue // move atoms toward their goal dim, or fill a dim to its goal count for a permute
				}
				e.reset()
				e.nx[d] = e.nx[d][:n-j]
				e.nx[b] = append(e.nx[b], suffix...)
				e.emit(OpAllToAll, d, b, group, d, s.counts[d]/k, b, s.counts[b]*k)
			}
		}
	}
}

// permutes generates the collective_permutes: straight to the goal when every dim has
// its goal count, the single-atom swaps and replacements that put a goal atom in place
// (when s.swaps), and each dim rewritten toward its goal (towardGoal).
func (e *expansion) permutes() {
	s, sp, goal := e.s, e.s.sp, e.s.goal
	same := true
	for d := range e.st {
		if s.counts[d] != int64(sp.count(goal[d])) {
			same = false
			break
		}
	}
	if same && !e.st.equal(goal) {
		for d := range e.st {
			e.nx[d] = append(e.nx[d][:0], goal[d]...)
		}
		e.emit(OpCollectivePermute, 0, 0, changedMask(e.st, goal), -1, 0, -1, 0)
	}
	if s.swaps {
		e.swapsAndReplacements()
	}
	// Rewrite one dim as its longest available goal prefix followed by its other atoms,
	// in one permute: this reorders atoms of different sizes (which no swap can) and
	// replaces several atoms at once.
	for d := range e.st {
		e.reset()
		if !s.towardGoal(e.nx, d, e.used) {
			continue
		}
		e.emit(OpCollectivePermute, 0, 0, changedMask(e.st, e.nx), -1, 0, -1, 0)
	}
}

// swapsAndReplacements swaps two equal-sized atoms, or replaces an atom by an unused
// one, when that puts a goal atom at its goal position (undirected permutations only
// widen the search without making plans cheaper: a later permute can do them in the
// same step).
func (e *expansion) swapsAndReplacements() {
	sp, goal, st := e.s.sp, e.s.goal, e.st
	atGoal := func(d, i int, a uint8) bool { return i < len(goal[d]) && goal[d][i] == a }
	for dx := range st {
		for ix, a := range st[dx] {
			for dy := dx; dy < len(st); dy++ {
				iy0 := 0
				if dy == dx {
					iy0 = ix + 1
				}
				for iy := iy0; iy < len(st[dy]); iy++ {
					b := st[dy][iy]
					if sp.atoms[a].Size != sp.atoms[b].Size || !(atGoal(dx, ix, b) || atGoal(dy, iy, a)) {
						continue
					}
					e.reset()
					e.nx[dx][ix], e.nx[dy][iy] = b, a
					e.emit(OpCollectivePermute, 0, 0, 1<<a|1<<b, -1, 0, -1, 0)
				}
			}
			if ix < len(goal[dx]) {
				u := goal[dx][ix]
				if e.used&(1<<u) == 0 && sp.atoms[u].Size == sp.atoms[a].Size {
					e.reset()
					e.nx[dx][ix] = u
					e.emit(OpCollectivePermute, 0, 0, 1<<a|1<<u, -1, 0, -1, 0)
				}
			}
		}
	}
}

// towardGoal rewrites dim d of nx (a copy of a state whose used atoms are used) as a
// permute toward the goal: for each atom of goal[d] in order, take it from nx[d], or
// from the unused atoms in place of an atom of nx[d] of the same size that goal[d] does
// not list; stop at the first goal atom neither provides. The rest of nx[d] follows in
// its order. Every dim keeps its shard count (a replacement swaps equal sizes), so the
// result is a collective_permute. It reports whether nx[d] changed.
func (s *searcher) towardGoal(nx state, d int, used uint64) bool {
	sp, goal := s.sp, s.goal
	cur := nx[d]
	if len(goal[d]) == 0 || len(cur) == 0 {
		return false
	}
	var inGoal uint64
	for _, g := range goal[d] {
		inGoal |= 1 << g
	}
	var curMask uint64
	for _, a := range cur {
		curMask |= 1 << a
	}
	var taken, dropped uint64
	var head [64]uint8
	n := 0
	for _, g := range goal[d] {
		if curMask&(1<<g) != 0 {
			head[n], n = g, n+1
			taken |= 1 << g
			continue
		}
		if used&(1<<g) != 0 {
			break // held by another dim: a swap or an all_to_all moves it
		}
		repl := -1
		for i, a := range cur {
			if (taken|dropped)&(1<<a) == 0 && inGoal&(1<<a) == 0 && sp.atoms[a].Size == sp.atoms[g].Size {
				repl = i
				break
			}
		}
		if repl < 0 {
			break
		}
		dropped |= 1 << cur[repl]
		head[n], n = g, n+1
	}
	if n == 0 {
		return false
	}
	out := append(s.perm[:0], head[:n]...)
	for _, a := range cur {
		if (taken|dropped)&(1<<a) == 0 {
			out = append(out, a)
		}
	}
	s.perm = out
	if slices.Equal(out, cur) {
		return false
	}
	nx[d] = append(nx[d][:0], out...)
	return true
}

// tileOf is the local element count of the expanded state's counts with dim d1 set to
// c1 and d2 to c2 (-1: unchanged).
func (s *searcher) tileOf(d1 int, c1 int64, d2 int, c2 int64) int64 {
	n := int64(1)
	for d, c := range s.counts {
		switch d {
		case d1:
			c = c1
		case d2:
			c = c2
		}
		n *= sharding.CeilDiv(s.sp.shape[d], c)
	}
	return n
}

// changedMask is the set of changedAtoms(a, b) as a bit mask, without allocating.
func changedMask(a, b state) uint64 {
	var m uint64
	for d := range a {
		for i, x := range a[d] {
			if i >= len(b[d]) || b[d][i] != x {
				m |= 1 << x
			}
		}
		for i, x := range b[d] {
			if i >= len(a[d]) || a[d][i] != x {
				m |= 1 << x
			}
		}
	}
	return m
}

func changedAtoms(a, b state) []uint8 {
	var out []uint8
	seen := uint64(0)
	for d := range a {
		for i, x := range a[d] {
			if i >= len(b[d]) || b[d][i] != x {
				if seen&(1<<x) == 0 {
					out = append(out, x)
					seen |= 1 << x
				}
			}
		}
		for i, x := range b[d] {
			if i >= len(a[d]) || a[d][i] != x {
				if seen&(1<<x) == 0 {
					out = append(out, x)
					seen |= 1 << x
				}
			}
		}
	}
	return out
}

// price fills the bytes and the estimate of mv. Buffers are padded (XLA pads uneven
// shards), so bytes count padding: all_gather receives k-1 input buffers; all_to_all and
// reduce_scatter split the input along one dim, padded to a multiple of k, and receive
// k-1 pieces; all_reduce receives 2(k-1) pieces.
func (sp *space) price(r *Request, mv *move) {
	inElems := sp.tileElems(mv.before)
	inBytes := sp.bytes(inElems)
	k := int64(1)
	for _, a := range mv.group {
		k *= int64(sp.atoms[a].Size)
	}
	// piece: the input split k ways along the dim that gets split (padded).
	piece := func(d int) int64 { return sp.pieceBytes(mv.before, inElems, d, k) }
	c := cost.Collective{Mesh: r.Mesh, Axes: sp.refs(sortedAtoms(sp, mv.group))}
	switch mv.op {
	case OpSlice:
		mv.bytes, mv.est = 0, cost.Estimate{}
		return
	case OpAllGather:
		c.Kind, c.Bytes = cost.AllGather, k*inBytes
		mv.bytes = (k - 1) * inBytes
	case OpAllToAll:
		// The array each group exchanges: k input buffers, each padded to k equal
		// pieces along the split dim (more than k buffers on uneven tiles).
		c.Kind, c.Bytes = cost.AllToAll, k*k*piece(mv.dim2)
		mv.bytes = (k - 1) * piece(mv.dim2)
	case OpCollectivePermute:
		mv.bytes = inBytes
		if est, ok := sp.routed(r, mv.before, mv.after, true, inBytes); ok {
			mv.est = est
			return
		}
		c.Kind, c.Bytes = cost.CollectivePermute, inBytes
	case OpReduceScatter:
		c.Kind, c.Bytes = cost.ReduceScatter, k*piece(mv.dim)
		mv.bytes = (k - 1) * piece(mv.dim)
	case OpAllReduce:
		c.Kind, c.Bytes = cost.AllReduce, inBytes
		mv.bytes = 2 * (k - 1) * sp.bytes(sharding.CeilDiv(inElems, k))
	}
	mv.est = r.Model.Estimate(c)
}

// pieceBytes is the bytes of one of the k padded pieces a buffer of state st (inElems
// elements) splits into along dim d.
func (sp *space) pieceBytes(st state, inElems int64, d int, k int64) int64 {
	l := sp.tile(d, st[d])
	if l == 0 {
		return 0
	}
	return sp.bytes(inElems / l * sharding.CeilDiv(l, k))
}

// allToAllBytes is the array an all_to_all over k devices exchanges from state st into
// dim d: k input buffers, each padded to k equal pieces along d.
func (sp *space) allToAllBytes(st state, d int, k int64) int64 {
	return k * k * sp.pieceBytes(st, sp.tileElems(st), d, k)
}

// countMask is the product of the sizes of the atoms in group.
func (sp *space) countMask(group uint64) int64 {
	k := int64(1)
	for a := range sp.atoms {
		if group&(1<<a) != 0 {
			k *= int64(sp.atoms[a].Size)
		}
	}
	return k
}

// sortedAtoms orders atoms by mesh axis and pre-size so adjacent pieces merge.
func sortedAtoms(sp *space, ids []uint8) []uint8 {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b uint8) int {
		ra, rb := sp.atoms[a], sp.atoms[b]
		ia, ib := sp.mesh.AxisIndex(ra.Name), sp.mesh.AxisIndex(rb.Name)
		if ia != ib {
			return ia - ib
		}
		return ra.Pre - rb.Pre
	})
	return out
}

// mergeMoves merges runs of slices and runs of collective-permutes into one step each.
func mergeMoves(sp *space, r *Request, mv []move) []move {
	var out []move
	for _, m := range mv {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.op == OpSlice && m.op == OpSlice {
				last.after = m.after
				if !slices.Contains(last.dims, m.dim) {
					last.dims = append(last.dims, m.dim)
				}
				continue
			}
			if last.op == OpCollectivePermute && m.op == OpCollectivePermute {
				// One permute instead of two when that is no slower (routed prices
				// depend on where every atom goes, so a merge can cost more).
				sp.price(r, last)
				sp.price(r, &m)
				merged := *last
				merged.after = m.after
				merged.group = changedAtoms(merged.before, merged.after)
				sp.price(r, &merged)
				if merged.est.TimeUS <= last.est.TimeUS+m.est.TimeUS {
					*last = merged
					continue
				}
			}
		}
		out = append(out, m)
	}
	return out
}
