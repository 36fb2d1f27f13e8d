package planner

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"sync"

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

// node is one entry of the search: the state with key reached at cost g (f orders the
// queue) by the move op/dim/dim2 from node prev (-1 at the start). The state itself is
// not stored: its key decodes to it (searchKey), which keeps nodes small and spares a
// copy of every state pushed.
type node[K searchKey] struct {
	key       K
	g, f      float64
	steps     int32
	prev      int32
	dim, dim2 int16
	op        opCode
	// lazy marks a collective_permute edge priced optimistically (permFloor, moveTime); its
	// exact price is computed when the node is popped.
	lazy bool
}

// opCode is a search move's op in one byte (node size: nodes are most of a search's
// memory).
type opCode uint8

// searchOps are the ops the search generates, by opCode.
var searchOps = [...]Op{OpSlice, OpAllGather, OpAllToAll, OpCollectivePermute}

// codeOf is op's opCode (op one of searchOps).
func codeOf(op Op) opCode {
	switch op {
	case OpAllGather:
		return 1
	case OpAllToAll:
		return 2
	case OpCollectivePermute:
		return 3
	}
	return 0
}

// searchKey is a state key the search can turn back into its state: decode rewrites dst
// (rank dims, each with room for every atom) as the state and returns it.
type searchKey interface {
	comparable
	decode(dst state) state
}

// openQueue is the search's open list: its nodes, and a heap of their indices.
type openQueue[K searchKey] struct {
	nodes []node[K]
	idx   openHeap
}

func (q *openQueue[K]) push(i int32) {
	q.idx.push(openEntry{q.nodes[i].f, q.nodes[i].steps, i})
}

func (q *openQueue[K]) pop() int32 { return q.idx.pop().i }

// openHeap is the open list of both engines (the candidate search's passes here; the
// complete and structured passes, complete.go): a binary heap of entries ordered by f,
// then fewer steps, each naming its item by index, so that the heap's comparisons do
// not visit the items. push and pop are container/heap's algorithm without the
// interface boxing.
type openHeap []openEntry

// openEntry is a queued item: its order and its index.
type openEntry struct {
	f     float64
	steps int32
	i     int32
}

func (q openHeap) less(i, j int) bool {
	a, b := &q[i], &q[j]
	if a.f != b.f {
		return a.f < b.f
	}
	return a.steps < b.steps
}

func (q *openHeap) push(e openEntry) {
	*q = append(*q, e)
	h := *q
	j := len(h) - 1
	for j > 0 {
		p := (j - 1) / 2
		if !h.less(j, p) {
			break
		}
		h[p], h[j] = h[j], h[p]
		j = p
	}
}

func (q *openHeap) pop() openEntry {
	h := *q
	n := len(h) - 1
	h[0], h[n] = h[n], h[0]
	i := 0
	for {
		l := 2*i + 1
		if l >= n || l < 0 {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	x := h[n]
	*q = h[:n]
	return x
}

// seen is what the search knows of a state: the cheapest cost found in pass pass, and
// its heuristic (the same in every pass: the passes of one search share the table).
type seen struct {
	g, h float64
	pass int32
}

// searchMemo is what the passes of one search share: the states seen, with their
// heuristics (computed once per search, not once per pass), and the queue's buffers.
type searchMemo[K searchKey] struct {
	best *stateTable[K]
	q    openQueue[K]
	pass int32
	// perm memoizes the routed price of a collective_permute by its two states (the
	// input bytes follow from the first): the same permute recurs from many nodes.
	perm map[[2]K]float64
}

// search finds the cheapest schedule from start to goal over slice, all_gather,
// all_to_all and collective_permute moves, and returns it as a candidate plan (after
// mk's reduction) with the hybrids of every plan its passes found (searchOut).
//
// ub is the cost of a plan already known (math.Inf(1): none): states whose cost plus
// heuristic exceeds it cannot lead to a cheaper plan and are not pushed. The side work's
// plans (mk.side.bound, which may wait for them) bound the exact pass, and the greedier
// pass's, too.
//
// The plan found may be the weighted passes' and cost no less than ub or the side
// work's plans (searchStats.bound is the smaller): a candidate still, whose hybrids may
// beat them.
func (sp *space) search(ctx context.Context, r *Request, start, goal state, unr []sharding.AxisRef, ub float64, mk *searchPlans) (searchOut, error) {
	res, err := sp.passes(ctx, r, start, goal, unr, ub, mk)
	if err != nil {
		return searchOut{}, err
	}
	out := mk.collect(sp, res)
	out.stats.bound = math.Inf(1)
	if res.found {
		out.stats.bound = min(ub, mk.side.bound())
	}
	return out, nil
}

// searchOut is what the candidate search returns: its plan (nil: none within its
// budgets), the hybrids of the plans its passes found (nil entries: none), and its
// counters.
type searchOut struct {
	plan    *Plan
	hybrids []*Plan
	stats   searchStats
}

// searchStats are the candidate search's counters (the chosen plan carries them for
// tests).
type searchStats struct {
	ran        bool // the request had a search space
	expansions int
	// exact is set when the exact pass ran to completion (no budget cut): its plan is
	// then the cheapest the search's moves admit.
	exact bool
	cost  float64 // the search's plan as priced move by move, before merging, reductions included
	bound float64 // the cost the search's plan had to beat (it may not have)
}

// passResult is what the passes found: the plan's moves and counters, and what was
// priced beside them (the exact pass's plan and hybrids, the anytime pass's).
type passResult struct {
	moves     []move
	found     bool
	stats     searchStats
	fromExact bool      // the plan is the exact pass's run beside the weighted ones
	exact     *exactRun // that pass (nil: none ran beside them)
	anytime   *offered  // the anytime pass's plan, priced with its hybrid (nil: not priced)
}

// offered is a weighted pass's plan priced as a candidate, with its best hybrid.
type offered struct {
	moves        []move
	plan, hybrid *Plan
}

// searchPlans turns the search's moves into candidate plans and prices their hybrids:
// the reduction pre comes before the moves, goal is the search's, and the side work's
// hybridCap bounds the hybrids (hybridOf leaves out any that could not be chosen).
type searchPlans struct {
	r    *Request
	pre  []move
	goal state
	side *sideWork
}

// plan is the candidate plan of the search's moves mv, priced on sp.
func (m *searchPlans) plan(sp *space, mv []move) *Plan {
	p := &Plan{Request: m.r, sp: sp}
	p.Steps = sp.steps(m.r, append(slices.Clone(m.pre), mv...))
	return p.named(originSearch)
}

// hybrid is the best hybrid of p priced on sp (only exchanges in closed form when
// closedOnly), as a plan of home (nil: none).
func (m *searchPlans) hybrid(sp, home *space, p *Plan, closedOnly bool) *Plan {
	h := sp.hybridOf(m.r, p, m.goal, m.side.limit(), closedOnly)
	if h != nil {
		h.sp = home
	}
	return h
}

// offer prices the moves mv of a weighted pass on sp, with their hybrid.
func (m *searchPlans) offer(sp *space, mv []move) *offered {
	p := m.plan(sp, mv)
	return &offered{moves: mv, plan: p, hybrid: m.hybrid(sp, sp, p, false)}
}

// collect is the search's plan and the hybrids to offer beside it, from what the passes
// found on sp: the exact pass's hybrids (priced on its goroutine) when its plan is not
// the search's, the first pass's when the anytime pass improved on it, and the search
// plan's own (priced once: the exact pass's or the anytime pass's when the plan is
// theirs). Every one of them is offered: a plan that costs more move by move can
// still make the better hybrid.
func (m *searchPlans) collect(sp *space, res passResult) searchOut {
	out := searchOut{stats: res.stats}
	out.stats.ran = true
	for i := range m.pre {
		mv := m.pre[i]
		sp.price(m.r, &mv)
		out.stats.cost += mv.est.TimeUS
	}
	x := res.exact
	if x == nil {
		x = &exactRun{}
	}
	if x.hybrid != nil && !res.fromExact {
		out.hybrids = append(out.hybrids, x.hybrid)
	}
	if x.firstHybrid != nil && !sameMoves(x.firstMoves, res.moves) {
		out.hybrids = append(out.hybrids, x.firstHybrid) // the anytime pass improved on it
	}
	if !res.found {
		return out
	}
	switch {
	case res.fromExact:
		out.plan = x.plan
		out.plan.sp = sp
		out.hybrids = append(out.hybrids, x.hybrid)
		if res.anytime != nil { // the anytime pass's plan, dearer or as dear
			out.hybrids = append(out.hybrids, res.anytime.hybrid)
		}
	case res.anytime != nil && sameMoves(res.moves, res.anytime.moves):
		out.plan = res.anytime.plan
		out.hybrids = append(out.hybrids, res.anytime.hybrid)
	default:
		out.plan = m.plan(sp, res.moves)
		out.hybrids = append(out.hybrids, m.hybrid(sp, sp, out.plan, false))
	}
	out.plan.Summary.SearchExpansions = res.stats.expansions
	return out
}

// The search runs in passes, the rows of searchPasses, in order. A weighted pass orders
// its queue by f = g + w·h: it reaches the goal in few expansions, at most w times the
// optimum of its moves. The exact pass (w = 1) finds the cheapest plan its moves admit,
// within its budget. A pass's plan that costs less than the incumbent (ub: the plan to
// beat, from the caller and the passes before) becomes the incumbent.

// searchPass is one pass of the search, a row of searchPasses (tunables.go). The first
// moves toward the goal; when it reaches the goal, the anytime pass, with the relaxed
// moves, looks only for strictly cheaper plans and goes on after each; when it does
// not, the greedier pass, with the relaxed moves, looks for a plan that beats every
// incumbent. The exact pass runs last, or, with the anytime pass on, beside the
// weighted passes from the start on the side work's goroutine (startExact), bounded by
// the incumbent it started with, not by theirs.
type searchPass struct {
	name   string
	weight float64   // f = g + weight·h (1: the exact pass)
	share  int       // its budget: r.MaxExpansions / share expansions
	moves  moveSet   // what it generates (expand.go)
	bound  passBound // which states it prunes
	// side: the incumbent includes the side work's candidates (sideWork.bound; it may
	// wait for them).
	side bool
	// slack loosens the exact pass's bound when it runs beside the weighted passes
	// (exactBoundSlack).
	slack float64
	when  passRule // when it runs
	hand  passHand // who else gets its plan
}

// exactRow is the exact pass's row of searchPasses (the last).
const exactRow = len(searchPasses) - 1

// moveSet is what a pass generates beside the moves every pass has (expand.go). The
// exact pass's goalMoves move strictly toward the goal (the towardGoal permute and the
// direct permute stay): leaving out partial gathers and fills lets more exact searches
// finish within their budget, which makes plans cheaper on the whole
// (docs/PERFORMANCE.md, planner tunables); the relaxed moves add the fills (for a later
// permute, as XLA's slice-then-permute).
type moveSet struct {
	swaps        bool // permutes that swap or replace single atoms (searcher.swaps)
	relax        bool // moves that fill a dim to its goal count with other atoms (searcher.relax)
	wholeGathers bool // goal-directed searches gather a dim's whole suffix past its goal prefix, never part of it
}

// exactMoves is the exact pass's move set: its row's, or relaxedMoves when no weighted
// pass runs (the plan is then the exact pass's alone) or r.allMoves asks for every move
// (tests comparing A* with Dijkstra, which has them all).
func exactMoves(r *Request, weighted bool) moveSet {
	if r.allMoves || !weighted {
		return relaxedMoves
	}
	return searchPasses[exactRow].moves
}

// passBound is which states a pass prunes, against the incumbent ub.
type passBound uint8

const (
	// boundNone prunes none: the pass's plan is kept if it beats the incumbent.
	boundNone passBound = iota
	// boundCheaper prunes the states that cannot lead to a strictly cheaper plan; each
	// plan found tightens the bound and the pass goes on (anytime: its best plan is
	// returned).
	boundCheaper
	// boundBest prunes the states that cannot lead to a plan as cheap.
	boundBest
)

// of is the searcher's ub for a pass bounded by b against the incumbent ub.
func (b passBound) of(ub float64) float64 {
	switch b {
	case boundCheaper:
		return ub * (1 - 1e-9)
	case boundBest:
		return ub * (1 + 1e-9)
	}
	return math.Inf(1)
}

// passRule is when a pass runs. The weighted passes run when the search has a
// heuristic and r.MaxExpansions >= 64; the anytime pass runs on every such request but
// EffortFast's and the suggestion search's (r.noAnytime).
type passRule uint8

const (
	runFirst    passRule = iota // first of the weighted passes
	runOnPlan                   // after the first, when it found a plan and the anytime pass is on
	runOnNoPlan                 // after the first, when it found none
	runLast                     // always (the exact pass)
)

// passHand is who gets a pass's plan besides the incumbent.
type passHand uint8

const (
	handNone passHand = iota // the incumbent only
	// handToExact: the exact pass's goroutine, which prices its hybrids after its own
	// (exactRun.postFirst, startExact); posted even when the pass found none.
	handToExact
	// handOffer: the search, which prices its hybrids on the request's goroutine while
	// the exact pass runs (searchPlans.offer); or after it, when the exact plan won and
	// the pass improved on the plan before it.
	handOffer
)

// runs reports whether pass p runs, given whether the weighted passes run, whether the
// anytime pass is on, and whether the first pass found a plan.
func (p *searchPass) runs(weighted, anytime, firstFound bool) bool {
	switch p.when {
	case runFirst:
		return weighted
	case runOnPlan:
		return weighted && anytime && firstFound
	case runOnNoPlan:
		return weighted && !firstFound
	}
	return true
}

// passes runs search's passes: the rows of searchPasses that apply, in order.
func (sp *space) passes(ctx context.Context, r *Request, start, goal state, unr []sharding.AxisRef, ub float64, mk *searchPlans) (passResult, error) {
	if start.equal(goal) {
		return passResult{found: true}, nil
	}
	s := newSearcher(sp, r, start, goal, unr)
	defer s.release()
	weighted := s.h != nil && !r.noHeuristic && r.MaxExpansions >= 64
	anytime := weighted && !r.noAnytime && r.Effort != EffortFast
	var exact *exactRun // the exact pass beside the weighted ones (nil: it runs last, here)
	if anytime {
		exact = sp.startExact(ctx, s, start, ub, mk)
	}
	var (
		best       []move // the weighted passes' best plan (nil: none)
		bestG      float64
		spent      int
		firstFound bool
		offerRan   bool     // a handOffer pass ran
		before     []move   // the best plan before it
		any        *offered // its plan, priced
	)
	for i := range searchPasses[:exactRow] {
		p := &searchPasses[i]
		if !p.runs(weighted, anytime, firstFound) {
			continue
		}
		if p.side {
			ub = min(ub, mk.side.bound())
		}
		prev := best
		mv, n, found, err := s.runPass(ctx, start, p, p.moves, p.bound.of(ub))
		spent += n
		if err != nil {
			exact.drop()
			return passResult{}, err
		}
		if found && s.goalG < ub { // search costs (move by move), as the exact pass counts
			ub, best, bestG = s.goalG, mv, s.goalG
		}
		if p.when == runFirst {
			firstFound = found
		}
		switch p.hand {
		case handToExact:
			exact.postFirst(best)
		case handOffer:
			offerRan, before = true, prev
			if best != nil && exact != nil && !exact.w.isDone() {
				any = mk.offer(sp, best) // while the exact pass runs: its plan may not be chosen
			}
		}
	}
	p := &searchPasses[exactRow]
	if exact != nil {
		res, err := sp.withExact(exact, best, bestG, spent, ub)
		if err == nil && res.fromExact && offerRan && any == nil && best != nil && !sameMoves(best, before) {
			// The exact plan won, at most as dear as the offering pass's, whose hybrids
			// can still be the cheaper (the first pass's were priced).
			any = mk.offer(sp, best)
		}
		res.anytime = any
		return res, err
	}
	// The exact pass, on this searcher (warm with the weighted passes' heuristics and
	// prices).
	if p.side {
		ub = min(ub, mk.side.bound())
	}
	mv, n, found, err := s.runPass(ctx, start, p, exactMoves(r, weighted), p.bound.of(ub))
	res := passResult{stats: searchStats{expansions: spent + n, exact: !s.capped}}
	if err != nil {
		return res, err
	}
	if found {
		res.moves, res.found, res.stats.cost = mv, true, s.goalG
		return res, nil
	}
	res.moves, res.found, res.stats.cost = best, best != nil, bestG
	return res, nil
}

// runPass runs pass p of s from start with the moves ms, pruning the states whose cost
// plus heuristic exceeds ub.
func (s *searcher) runPass(ctx context.Context, start state, p *searchPass, ms moveSet, ub float64) ([]move, int, bool, error) {
	s.weight, s.ub, s.anytime, s.capped = p.weight, ub, p.bound == boundCheaper, false
	s.swaps, s.relax, s.wholeGathers = ms.swaps, ms.relax, ms.wholeGathers && s.goalDirected
	return s.run(ctx, start, s.r.MaxExpansions/p.share)
}

// run runs one pass of s from start on a budget of expansions.
func (s *searcher) run(ctx context.Context, start state, budget int) ([]move, int, bool, error) {
	s.budget = budget
	if smallPackable(s.sp, len(s.goal)) {
		return runSearch(ctx, s, start, func(st state) smallKey { return packSmall(st) })
	}
	if packable(s.sp, len(s.goal)) {
		return runSearch(ctx, s, start, func(st state) packedKey { return packKey(st) })
	}
	return runSearch(ctx, s, start, func(st state) stringKey { return stringKey(st.key()) })
}

// exactRun is an exact pass run beside the request's weighted passes (startExact).
type exactRun struct {
	w      *worker
	mv     []move
	n      int
	found  bool
	err    error
	capped bool
	g      float64
	// first carries the first weighted pass's plan (nil: none) from the request's
	// goroutine to the exact pass's, which prices its hybrids after its own; posted
	// once, in every path (postFirst).
	first  chan []move
	posted bool
	// What the exact pass's goroutine priced after the pass: its plan and that plan's
	// best hybrid (found only), and the first weighted pass's moves and their best
	// hybrid, exchanges in closed form only (nil: none).
	plan, hybrid *Plan
	firstMoves   []move
	firstHybrid  *Plan
}

// postFirst hands the first weighted pass's plan (nil: none) to the exact pass's
// goroutine, once; x may be nil (no exact pass beside the search).
func (x *exactRun) postFirst(mv []move) {
	if x != nil && !x.posted {
		x.posted = true
		x.first <- mv // buffered: never blocks
	}
}

// drop gives up the exact pass (nil: none runs), first posting no first plan for it
// if none was (it may be waiting for one).
func (x *exactRun) drop() {
	if x != nil {
		x.postFirst(nil)
		x.w.drop()
	}
}

// startExact starts the exact pass from start, bounded by exactBoundSlack times the
// cheaper of ub and the side work's plans, with a searcher of its own over a fork of
// the space, on the side work's goroutine once that is done (worker.then); when the
// request waits for it before it has begun, the request runs it itself (worker). Its
// bound never depends on what the weighted passes beside it find, so what the search
// returns does not depend on their timing. It starts at once rather than after the
// first weighted pass: the same plans, and no goroutine of its own queued behind the
// busy request goroutine (75-90 µs on testgen.RandomSet's median). After the pass the
// same goroutine builds its plan and prices its hybrids, then the first weighted
// pass's (off the request's critical path: when the anytime pass improves on that
// plan, its hybrids can still beat every candidate).
func (sp *space) startExact(ctx context.Context, s *searcher, start state, ub float64, mk *searchPlans) *exactRun {
	x := &exactRun{first: make(chan []move, 1)}
	x.w = newWorker(func() {
		fork := sp.fork()
		defer fork.releaseRouter()
		e := newSearcher(fork, s.r, start, s.goal, s.unr)
		defer e.release()
		p := &searchPasses[exactRow]
		x.mv, x.n, x.found, x.err = e.runPass(ctx, start, p, exactMoves(s.r, true), p.bound.of(min(ub, mk.side.bound())*p.slack))
		x.capped, x.g = e.capped, e.goalG
		if x.found && x.err == nil {
			x.plan = mk.plan(fork, x.mv) // mv is merged already
			x.hybrid = mk.hybrid(fork, sp, x.plan, false)
		}
		if first := <-x.first; first != nil && x.err == nil {
			// Only exchanges priced in closed form: the first-plan hybrids that win are
			// such exchanges, and routing others transfer by transfer costs large meshes
			// planning time for no plan (docs/PERFORMANCE.md, planner tunables).
			x.firstMoves = first
			x.firstHybrid = mk.hybrid(fork, sp, mk.plan(fork, first), true)
		}
	})
	mk.side.run.then(x.w)
	return x
}

// withExact waits for the exact pass x and returns its plan when it costs at most ub
// (the weighted passes' best, first, or the incumbent's), else first, even when that
// costs no less than the direct candidates: it stays a candidate, for its hybrids
// (dropping it lost 28 of testgen.RandomSet's best plans on tpu-v5p).
func (sp *space) withExact(x *exactRun, first []move, firstG float64, spent int, ub float64) (passResult, error) {
	x.w.wait()
	res := passResult{exact: x, stats: searchStats{expansions: spent + x.n, exact: !x.capped}}
	if x.err != nil {
		return res, x.err
	}
	if x.found && x.g <= ub*(1+1e-9) {
		res.moves, res.found, res.fromExact, res.stats.cost = x.mv, true, true, x.g
		return res, nil
	}
	res.moves, res.found, res.stats.cost = first, first != nil, firstG
	return res, nil
}

// memoPool recycles the searchMemos of finished searches keyed by packedKey (release;
// smallMemoPool those keyed by smallKey): a search's tables
// and queue grow to thousands of entries, and growing them anew every request (hashing
// every entry again at each doubling, copying the queue) costs more than clearing them.
var memoPool sync.Pool

// release returns the search's memo to memoPool, cleared (nothing the search returns
// refers to it: reachGoal builds its moves from fresh states).
func (s *searcher) release() {
	switch m := s.memo.(type) {
	case *searchMemo[smallKey]:
		m.recycle(&smallMemoPool)
	case *searchMemo[packedKey]:
		m.recycle(&memoPool)
	}
	s.memo = nil
	pricePool.put(s.prices)
	coverPool.put(s.covers)
	refsPool.put(s.refsOf)
	s.prices, s.covers, s.refsOf = nil, nil, nil
	if s.h != nil {
		s.h.release()
		s.h = nil
	}
}

// smallMemoPool is memoPool for searches keyed by smallKey.
var smallMemoPool sync.Pool

// recycle puts m, cleared, into pool unless its tables grew past maxPooledStates.
func (m *searchMemo[K]) recycle(pool *sync.Pool) {
	if m.best.len() <= maxPooledStates && len(m.perm) <= maxPooledStates && cap(m.q.nodes) <= 4*maxPooledStates {
		m.best.clear()
		clear(m.perm)
		m.q.nodes, m.q.idx, m.pass = m.q.nodes[:0], m.q.idx[:0], 0
		pool.Put(m)
	}
}

// runSearch is the search loop over a state key type K: smallKey or packedKey when every
// state fits one (no allocation per lookup), the string key otherwise.
func runSearch[K searchKey](ctx context.Context, s *searcher, start state, keyOf func(state) K) ([]move, int, bool, error) {
	m, _ := s.memo.(*searchMemo[K])
	if m == nil {
		var x any
		switch any(m).(type) {
		case *searchMemo[smallKey]:
			x = smallMemoPool.Get()
		case *searchMemo[packedKey]:
			x = memoPool.Get()
		}
		if m, _ = x.(*searchMemo[K]); m == nil {
			m = &searchMemo[K]{best: newStateTable[K](), perm: map[[2]K]float64{}}
		}
		s.memo = m
	}
	m.pass++
	m.q.nodes, m.q.idx = m.q.nodes[:0], m.q.idx[:0]
	rs := &searchRun[K]{s: s, q: &m.q, best: m.best, perm: m.perm, pass: m.pass, keyOf: keyOf, bestNode: -1}
	rs.cur, rs.curSt, rs.parentSt = &rs.curNode, s.scratchState(), s.scratchState()
	startKey := keyOf(start)
	e, ok := m.best.get(startKey)
	h0 := e.h
	if !ok {
		h0 = s.heuristic(start)
	}
	rs.best.put(startKey, seen{0, h0, rs.pass})
	rs.push(startKey, 0, h0, 0, -1, 0, 0, 0, false)
	goalKey := keyOf(s.goal)
	q := rs.q
	successor := rs.successor // one method value for the pass, not one per expansion
	for len(q.idx) > 0 {
		ni := q.pop()
		rs.curNode = q.nodes[ni]
		n := &rs.curNode
		if n.lazy {
			rs.priceLazy(n)
			continue
		}
		if b, _ := rs.best.get(n.key); b.g < n.g {
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
		rs.curIdx = ni
		s.expand(n.key.decode(rs.curSt), successor)
	}
	if rs.bestNode >= 0 {
		s.goalG = rs.bestG
		return mergeMoves(s.sp, s.r, rs.movesTo(rs.bestNode)), rs.expansions, true, nil
	}
	return nil, rs.expansions, false, nil
}

// searchRun is one pass of runSearch: the open queue, what is known of each state, the
// node being expanded (a copy: the queue may grow under it) and its state, and
// (anytime passes) the cheapest plan found so far.
type searchRun[K searchKey] struct {
	s               *searcher
	q               *openQueue[K]
	best            *stateTable[K] // entries of earlier passes count for their h only
	perm            map[[2]K]float64
	pass            int32
	keyOf           func(state) K
	expansions      int
	curNode         node[K]
	cur             *node[K] // &curNode
	curIdx          int32
	curSt, parentSt state // decoded states: the node expanded, a lazy node's parent
	bestNode        int32 // anytime passes: the cheapest goal node so far (-1: none)
	bestG           float64
}

// push queues a node; h is the heuristic (a lower bound, which prunes against s.ub), and
// the queue orders by f = g + weight x h.
func (rs *searchRun[K]) push(key K, g, h float64, steps, prev int32, op opCode, dim, dim2 int, lazy bool) {
	rs.q.nodes = append(rs.q.nodes, node[K]{key: key, g: g, f: g + rs.s.weight*h, steps: steps, prev: prev, op: op, dim: int16(dim), dim2: int16(dim2), lazy: lazy})
	rs.q.push(int32(len(rs.q.nodes) - 1))
}

// priceLazy prices a lazy permute edge now (Lazy A*: it was priced from below). best
// only ever holds exact costs, so no path was discarded on an optimistic price.
func (rs *searchRun[K]) priceLazy(n *node[K]) {
	s := rs.s
	parent := &rs.q.nodes[n.prev]
	t, ok := rs.perm[[2]K{parent.key, n.key}]
	if !ok {
		before := parent.key.decode(rs.parentSt)
		in := s.sp.bytes(s.sp.tileElems(before)) // the parent's input buffer, as expand computed it
		t = s.price(OpCollectivePermute, 0, in, before, n.key.decode(rs.curSt))
		rs.perm[[2]K{parent.key, n.key}] = t
	}
	g := parent.g + t
	b, ok := rs.best.get(n.key)
	if ok && b.g <= g {
		return
	}
	h := b.h
	rs.best.put(n.key, seen{g, h, rs.pass})
	if g+h > s.ub {
		return
	}
	rs.push(n.key, g, h, n.steps, n.prev, n.op, int(n.dim), int(n.dim2), false)
}

// reachGoal handles the goal node ni: it returns the merged moves of its path, or nil
// when the pass is anytime: the node is then kept (its path is rebuilt when the pass
// ends) and only strictly cheaper plans are sought.
func (rs *searchRun[K]) reachGoal(ni int32) []move {
	s := rs.s
	g := rs.q.nodes[ni].g
	if !s.anytime {
		s.goalG = g
		return mergeMoves(s.sp, s.r, rs.movesTo(ni))
	}
	if rs.bestNode < 0 || g < rs.bestG {
		rs.bestNode, rs.bestG = ni, g
		s.ub = g * (1 - 1e-9)
	}
	return nil
}

// movesTo rebuilds the moves of the path to node ni (the pass's nodes stay in the queue's
// node list until the next pass).
func (rs *searchRun[K]) movesTo(ni int32) []move {
	s, q := rs.s, rs.q
	mv := make([]move, 0, q.nodes[ni].steps)
	after := q.nodes[ni].key.decode(s.scratchState())
	for x := ni; q.nodes[x].prev >= 0; x = q.nodes[x].prev {
		nx := &q.nodes[x]
		before := q.nodes[nx.prev].key.decode(s.scratchState())
		mv = append(mv, s.moveOf(before, &after, searchOps[nx.op], int(nx.dim), int(nx.dim2)))
		after = before
	}
	slices.Reverse(mv)
	return mv
}

// successor prices the move from the node being expanded to nx and queues nx unless a
// path at least as cheap is known, the move is infeasible, or nx cannot beat the
// incumbent.
func (rs *searchRun[K]) successor(nx state, op Op, dim, dim2 int, group uint64) {
	s, n, st := rs.s, rs.cur, rs.curSt
	lazy := op == OpCollectivePermute && s.routed
	var g float64
	if lazy {
		g = n.g + s.permFloor(s.inBytes) // the cut part below, only if needed
	} else {
		g = n.g + s.price(op, group, s.inBytes, st, nx)
	}
	k := rs.keyOf(nx)
	old, known := rs.best.get(k)
	ok := known && old.pass == rs.pass // a cost of this pass
	if ok && old.g <= g {
		return
	}
	if lazy && s.h != nil && len(s.h.cuts) > 0 {
		g = max(g, n.g+s.h.moveTime(st, nx))
		if ok && old.g <= g {
			return
		}
	}
	if op != OpCollectivePermute && !s.feasible(st, nx, group) {
		return
	}
	h := old.h
	over := g+h > s.ub
	if !known {
		h, over = s.heuristicOver(nx, g)
	}
	if over {
		return // cannot beat the incumbent
	}
	if lazy {
		if !ok {
			rs.best.put(k, seen{math.Inf(1), h, rs.pass}) // remember h; no exact cost yet
		}
		rs.push(k, g, h, n.steps+1, rs.curIdx, codeOf(op), dim, dim2, true)
		return
	}
	rs.best.put(k, seen{g, h, rs.pass})
	rs.push(k, g, h, n.steps+1, rs.curIdx, codeOf(op), dim, dim2, false)
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

	prices map[priceKey]float64
	refsOf map[uint64][]sharding.AxisRef // groupRefs' memo
	routed bool                          // the model prices point-to-point steps by their traffic
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
	wholeGathers bool    // an all_gather drops a dim's whole suffix past its goal prefix, never part of it
	capped       bool    // the last pass stopped at its budget
	anytime      bool    // a goal tightens ub and the pass goes on (its best plan is returned)
	goalG        float64 // the search cost of the last pass' plan (before merging)
	budget       int     // expansions of this pass
	tb           timeBounder
	minLat       float64
	peakIn       float64
	ub           float64 // prune states whose cost plus heuristic exceeds it
	covers       map[string]bool
	memo         any // *searchMemo[K] of the search's key type
	buf          []byte

	// scratch for expand
	nx      state
	perm    []uint8 // towardGoal's scratch
	counts  []int64
	inBytes int64

	h *bound // nil: plain Dijkstra
}

// priceKey is a collective of the search: its op in the top bits of its group (atom ids
// are below 61), and its array's bytes. Two words without padding hash as memory.
type priceKey struct {
	opGroup uint64
	bytes   int64 // the collective's array
}

func newSearcher(sp *space, r *Request, start, goal state, unr []sharding.AxisRef) *searcher {
	s := &searcher{
		sp: sp, r: r, goal: goal, goalMask: goal.used(), unr: unr,
		maxTile: max(sp.tileElems(start), sp.tileElems(goal)),
		noRep:   !r.Source.IsFullyReplicated() && !r.Target.IsFullyReplicated() && len(unr) == 0,
		prices:  pricePool.get(),
		routed:  sp.canRoute(r),
		covers:  coverPool.get(),
		counts:  make([]int64, len(goal)),
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

// scratchState is an empty state of the goal's rank with room for every atom in each
// dim (decode's destination).
func (s *searcher) scratchState() state {
	n := len(s.sp.atoms)
	st := make(state, len(s.goal))
	buf := make([]uint8, len(st)*n) // one array for every dim (each capped at n)
	for d := range st {
		st[d] = buf[d*n : d*n : (d+1)*n]
	}
	return st
}

// A lazy permute's lower bound (its price until it is popped) is the larger of
// permFloor and, on torus models, the cut part bound.moveTime: the data each torus half
// lacks crosses into it. successor adds the cut part only for states no cheaper path
// has reached already.

// permFloor is the cheap part of a lazy permute's lower bound for in bytes per device:
// the device that receives its tile takes at least in over everything that can flow
// into one device, after at least one step of the cheapest link.
func (s *searcher) permFloor(in int64) float64 {
	return s.tb.Combine(s.minLat, float64(in)/s.peakIn)
}

func (s *searcher) heuristic(st state) float64 {
	if s.h == nil {
		return 0
	}
	return s.h.time(st)
}

// heuristicOver is the heuristic of st reached at cost g and whether g plus it exceeds
// s.ub (the state cannot beat the incumbent), which part of it may tell alone
// (bound.timeOver).
func (s *searcher) heuristicOver(st state, g float64) (float64, bool) {
	if s.h == nil {
		return 0, g > s.ub
	}
	return s.h.timeOver(st, g, s.ub)
}

// price is the search cost of a move: the model's time for the collective op over the
// group atoms on an input buffer of in bytes, memoized (the same collective recurs on
// many states). It builds the same cost.Collective as (*space).price.
func (s *searcher) price(op Op, group uint64, in int64, before, after state) float64 {
	if op == OpSlice {
		return 0
	}
	if op == OpCollectivePermute && s.routed {
		// The price depends on where every atom goes, not only on the group (the
		// search memoizes it by the two states: searchMemo.perm).
		est, _ := s.sp.routed(s.r, before, after, true, in)
		return est.TimeUS
	}
	// The collective's array, as (*space).price builds it: k input buffers for an
	// all_gather; for an all_to_all k input buffers padded to k pieces along the
	// receiving dim.
	k := s.sp.countMask(group)
	c := cost.Collective{Mesh: s.r.Mesh}
	switch op {
	case OpAllGather:
		c.Kind, c.Bytes = cost.AllGather, k*in
	case OpAllToAll:
		c.Kind = cost.AllToAll
		for d := range after {
			if len(after[d]) > len(before[d]) {
				c.Bytes = s.sp.allToAllBytes(before, d, k)
				break
			}
		}
	case OpCollectivePermute:
		c.Kind, c.Bytes = cost.CollectivePermute, in
	}
	key := priceKey{uint64(codeOf(op))<<62 | group, c.Bytes}
	if t, ok := s.prices[key]; ok {
		return t
	}
	c.Axes = s.groupRefs(group)
	t := s.r.Model.Estimate(c).TimeUS
	s.prices[key] = t
	return t
}

// groupRefs is the mesh axes of the atoms in group, as (*space).price names a
// collective's (sorted, merged), memoized per group: a group recurs on many buffer
// sizes, and building its refs was a fifth of pricing the search's collectives.
func (s *searcher) groupRefs(group uint64) []sharding.AxisRef {
	if refs, ok := s.refsOf[group]; ok {
		return refs
	}
	var buf [64]uint8
	ids := buf[:0]
	for a := range s.sp.atoms {
		if group&(1<<a) != 0 {
			ids = append(ids, uint8(a))
		}
	}
	sortAtoms(s.sp, ids)
	refs := s.sp.refs(ids)
	if s.refsOf == nil {
		s.refsOf = refsPool.get()
	}
	s.refsOf[group] = refs
	return refs
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
