package planner

import (
	"cmp"
	"container/heap"
	"context"
	"math"
	"slices"
	"time"

	"github.com/shardplan/shardplan/internal/sharding"
)

// The chain incumbent (Reshard's incumbent stage, before the passes): structured
// steps from the source, one point-to-point step, and structured steps to the goal.
// Over the complete pass's prime atoms, a Dijkstra from the source over the structured
// moves (a slice by one atom the goal leaves free, a gather or all-to-all of a minor
// suffix) and one into the goal over their reverses (slices by atoms the source leaves
// free) give the nearest states of either end with their distances. Each pair (u, v)
// of them, and each u with the keep targets of the goal's nearest states (the state
// with u's atoms that it leaves free kept, then gathered), is priced as dist(source, u)
// + exchange(u, v) + dist(v, goal): the exchange an all_to_all_v, or a
// collective_permute where u and v have the same shard counts, priced in closed form.
// The pairs are priced in order of an estimate (their distances and their exchange's
// bound, scaled by calibration), and pruned by the bound against the best plan. A
// slice, gather or all-to-all before an exchange, or two structured steps after it,
// are plans the complete pass's large family does not search above
// completeStateLimit (docs/PERFORMANCE.md, the chain incumbent).
//
// Under EffortExhaustive it also plans, for every state one structured step from
// either end, the rest of the reshard at the default effort (chainOfPlans): the
// chains of the service's own answers through one structured neighbour.

// chainBudget is a row of the chain incumbent's budgets: per side the structured
// steps from its end and the states it keeps, the goal's side's nearest states whose
// keep targets are priced, and the exchanges priced.
type chainBudget struct{ depth, states, bases, pairs int }

// chainIncumbent is the cheapest plan of structured steps, one point-to-point step and
// structured steps, when it is strictly cheaper than every candidate in cands under
// the request's rules (nil otherwise, or when the request allows no all_to_all_v,
// prices exchanges by no router, or has partial sums to reduce).
func chainIncumbent(ctx context.Context, r *Request, cands []*Plan) *Plan {
	if !r.allowed(OpAllToAllV) || r.noComplete {
		return nil
	}
	cp, ok := passSpace(r)
	if !ok {
		return nil
	}
	defer cp.releaseRouter()
	if !cp.canRoute(r) {
		return nil
	}
	start := cnode{cp.stateOf(r.Source), maskOf(cp.atomsOf(r.Source.Unreduced))}
	goal := cnode{cp.stateOf(r.Target), maskOf(cp.atomsOf(r.Target.Unreduced))}
	if start.unr != goal.unr || start.st.equal(goal.st) {
		return nil
	}
	cs := newCompleteSearch(ctx, cp, r, start, goal, 0)
	free, any, _ := bestCandidates(r, cands)
	ch := &chainSearch{c: cs, unr: start.unr, best: any, budget: chainDefault}
	if cs.noRep && !r.AllowFullRemat {
		ch.best = free // a plan that never replicates the tensor wins whatever the times
	} else {
		cs.noRep = false
	}
	if r.Effort != EffortExhaustive {
		return ch.run()
	}
	// The chain phase of EffortExhaustive takes at most chainBudgetShare of the time
	// left before the request's planning deadline, on the request's clock; the legs it
	// plans stop with it (their context ends then on the wall clock).
	now := r.clock()
	share := time.Duration(float64(r.until.Sub(now)) * chainBudgetShare)
	ch.budget, ch.until, ch.clock = chainExhaustive, now.Add(share), r.clock
	var cancel context.CancelFunc
	ch.c.ctx, cancel = context.WithTimeout(ctx, share)
	defer cancel()
	p := ch.chainOfPlans()
	if pp := ch.run(); pp != nil {
		p = pp
	}
	return p
}

// chainSearch is one chain incumbent's search.
type chainSearch struct {
	c      *completeSearch // prices, bounds and the coverage check
	unr    uint64          // the unreduced atoms of both ends
	best   float64         // the price to beat
	budget chainBudget
	until  time.Time        // when the exhaustive chain phase ends (zero: no limit)
	clock  func() time.Time // the request's clock, that until is read on
	fwd    chainSide
	bwd    chainSide
}

// chainSide is one side's Dijkstra tree: its nodes, by key, and the ones settled in order.
type chainSide struct {
	nodes   []chainNode
	at      map[string]int32
	settled []int32
}

// chainNode is a state at distance g from its side's end, depth structured steps away,
// reached by edge from prev (the source's side: prev to st; the goal's: st to prev).
type chainNode struct {
	st    state
	g     float64
	depth int
	prev  int32
	edge  cedge
	done  bool
}

// run grows both sides, prices the pairs, and answers the cheapest plan found.
func (ch *chainSearch) run() *Plan {
	ch.fwd = ch.grow(ch.c.start.st, true)
	ch.bwd = ch.grow(ch.c.goal.st, false)
	if ch.stopped() {
		return nil
	}
	c := ch.c
	kappa := ch.calibration()
	q := &pairQueue{}
	for _, u := range ch.fwd.settled {
		gu := ch.fwd.nodes[u].g
		for _, v := range slices.Concat(ch.bwd.settled, ch.keeps(ch.fwd.nodes[u].st)) {
			if g := gu + ch.bwd.nodes[v].g; !ch.over(g + c.floor) {
				*q = append(*q, chainPair{u: u, v: v, g: g, lb: g + c.floor, f: g + kappa*c.floor})
			}
		}
	}
	heap.Init(q)
	var bestPath []cstep
	priced := 0
	for pops := 1; q.Len() > 0 && priced < ch.budget.pairs && pops <= chainPopsPerPair*ch.budget.pairs; pops++ {
		if pops&63 == 0 && ch.stopped() {
			break
		}
		p := heap.Pop(q).(chainPair)
		if ch.over(p.lb) {
			continue
		}
		u, v := ch.fwd.nodes[p.u].st, ch.bwd.nodes[p.v].st
		if !p.bounded && !u.equal(v) && !c.sp.sliceOnly(u, v) {
			eb := c.exchangeBound(u, v)
			p.bounded, p.lb, p.f = true, p.g+eb, p.g+kappa*eb
			if !ch.over(p.lb) {
				heap.Push(q, p)
			}
			continue
		}
		mid, t, ok := ch.link(u, v, &priced)
		if !ok || ch.over(p.g+t) {
			continue
		}
		ch.best = p.g + t
		bestPath = ch.path(p.u, p.v, mid)
	}
	if bestPath == nil {
		return nil
	}
	return (&Plan{Request: c.r, sp: c.sp, Steps: c.completeSteps(bestPath)}).named("chain")
}

// calibration is how far the direct exchange from the source to the goal costs above
// its bound (at least 1): the pairs are priced in order of their distances plus their
// exchange's bound times it, an estimate of the exchange's price, where the bound
// alone (the data a device lacks over the most it takes in, the least latency) puts
// far dearer exchanges first.
func (ch *chainSearch) calibration() float64 {
	c := ch.c
	s, g := c.start.st, c.goal.st
	eb := c.exchangeBound(s, g)
	if eb <= 0 || c.sp.sliceOnly(s, g) || !c.sp.exchangeInClosedForm(c.r, s, g) {
		return 1
	}
	return max(1, c.price(cedge{op: OpAllToAllV}, c.start, c.goal)/eb)
}

// link is the cheapest step from u to v (none when they are equal, a slice when v
// slices u, else an exchange or a permute priced in closed form) when it can beat the
// best plan from a path of g already: its edge (nil: none), its price, and ok.
func (ch *chainSearch) link(u, v state, priced *int) (*cedge, float64, bool) {
	c := ch.c
	if u.equal(v) {
		return nil, 0, true
	}
	if c.sp.sliceOnly(u, v) {
		if !c.r.allowed(OpSlice) {
			return nil, 0, false
		}
		return &cedge{op: OpSlice}, 0, true
	}
	closed := c.sp.exchangeInClosedForm(c.r, u, v)
	if !closed && (ch.budget != chainExhaustive || !c.cheapExchange(u, v)) {
		return nil, 0, false
	}
	*priced++
	from, to := cnode{u, ch.unr}, cnode{v, ch.unr}
	best, t := &cedge{op: OpAllToAllV}, c.price(cedge{op: OpAllToAllV}, from, to)
	if c.r.allowed(OpCollectivePermute) {
		if _, ok := c.sp.digitSrc(u, v); ok {
			pe := cedge{op: OpCollectivePermute, group: changedAtoms(u, v)}
			if c.feasible(from, to, pe) {
				if tp := c.price(pe, from, to); tp < t {
					best, t = &pe, tp
				}
			}
		}
	}
	return best, t, true
}

// path is the plan's path: the source's side to u, mid from u to v (nil: u is v), and
// the goal's side from v.
func (ch *chainSearch) path(u, v int32, mid *cedge) []cstep {
	var out []cstep
	for id := u; ch.fwd.nodes[id].prev >= 0; id = ch.fwd.nodes[id].prev {
		n := ch.fwd.nodes[id]
		out = append(out, cstep{edge: n.edge, before: cnode{ch.fwd.nodes[n.prev].st, ch.unr}, after: cnode{n.st, ch.unr}})
	}
	slices.Reverse(out)
	if mid != nil {
		out = append(out, cstep{edge: *mid, before: cnode{ch.fwd.nodes[u].st, ch.unr}, after: cnode{ch.bwd.nodes[v].st, ch.unr}})
	}
	for id := v; ch.bwd.nodes[id].prev >= 0; id = ch.bwd.nodes[id].prev {
		n := ch.bwd.nodes[id]
		out = append(out, cstep{edge: n.edge, before: cnode{n.st, ch.unr}, after: cnode{ch.bwd.nodes[n.prev].st, ch.unr}})
	}
	return out
}

// keeps are the goal's side's nodes for the keep targets of u (keepTargets) from the
// nearest bases of the goal's side (the goal first): each base with u's atoms that it
// leaves free kept, then gathered to the base. Nodes the Dijkstra did not reach are
// added once.
func (ch *chainSearch) keeps(u state) []int32 {
	c, side := ch.c, &ch.bwd
	var out []int32
	if !c.r.allowed(OpAllGather) {
		return nil
	}
	for _, b := range side.settled[:min(len(side.settled), ch.budget.bases)] {
		base := side.nodes[b]
		// keepTargets reads the goal alone: the base stands in for it.
		for _, v := range (&completeSearch{goal: cnode{base.st, ch.unr}}).keepTargets(u) {
			k := v.key()
			if id, ok := side.at[k]; ok {
				if side.nodes[id].done && !slices.Contains(out, id) {
					out = append(out, id)
				}
				continue
			}
			d := -1
			for i := range v {
				if len(v[i]) > len(base.st[i]) {
					d = i
				}
			}
			if d < 0 || !ch.admits(v) {
				continue
			}
			e := cedge{op: OpAllGather, dim: d, group: slices.Clone(v[d][len(base.st[d]):])}
			from, to := cnode{v, ch.unr}, cnode{base.st, ch.unr}
			if !c.feasible(from, to, e) {
				continue
			}
			id := int32(len(side.nodes))
			side.nodes = append(side.nodes, chainNode{st: v, g: base.g + c.price(e, from, to), depth: base.depth + 1, prev: b, edge: e, done: true})
			side.at[k] = id
			out = append(out, id)
		}
	}
	return out
}

// admits reports whether a path may go through st: not the fully replicated state
// where the request forbids it, and within the memory budget.
func (ch *chainSearch) admits(st state) bool {
	c := ch.c
	if c.noRep && st.used() == 0 && ch.unr == 0 {
		return false
	}
	return c.budget <= 0 || c.tileBytes(st) <= c.budget
}

// over reports whether a path of cost f cannot beat the best plan.
func (ch *chainSearch) over(f float64) bool {
	return f >= ch.best-1e-9*math.Max(1, math.Abs(ch.best))
}

// stopped reports whether the request is abandoned or its planning budget has ended.
func (ch *chainSearch) stopped() bool {
	c := ch.c
	return c.ctx.Err() != nil || !ch.until.IsZero() && !ch.clock().Before(ch.until)
}

// grow is the Dijkstra of one side from end over the structured moves (forward: out
// of the source; else into the goal), settling the nearest states up to the budget.
// Slices are free, and slices by atoms the other end uses would fill the budget with
// states an exchange gains nothing from.
func (ch *chainSearch) grow(end state, forward bool) chainSide {
	c := ch.c
	side := chainSide{nodes: []chainNode{{st: end, prev: -1}}, at: map[string]int32{end.key(): 0}}
	// Slices (gathers into the goal) only by atoms the other end leaves free: the
	// atoms an exchange keeps where they are.
	other := c.goal.st
	if !forward {
		other = c.start.st
	}
	blocked := ch.unr | other.used()
	q := &pairQueue{{}} // u: the node, f: its distance
	for q.Len() > 0 && len(side.settled) < ch.budget.states {
		it := heap.Pop(q).(chainPair)
		n := &side.nodes[it.u]
		if n.done || it.f > n.g {
			continue
		}
		n.done = true
		side.settled = append(side.settled, it.u)
		if n.depth >= ch.budget.depth || ch.stopped() {
			continue
		}
		cur, g, depth := n.st, n.g, n.depth
		structuredNeighbours(c.sp, cur, blocked, func(nx state, out, in cedge) {
			e, before, after := out, cur, nx
			if !forward {
				e, before, after = in, nx, cur
			}
			if !c.r.allowed(e.op) || !ch.admits(nx) {
				return
			}
			k := nx.key()
			id, seen := side.at[k]
			if seen && (side.nodes[id].done || side.nodes[id].g <= g) {
				return
			}
			from, to := cnode{before, ch.unr}, cnode{after, ch.unr}
			if !c.feasible(from, to, e) {
				return
			}
			t := g + c.price(e, from, to)
			if t >= ch.best || seen && t >= side.nodes[id].g {
				return
			}
			if !seen {
				id = int32(len(side.nodes))
				side.nodes = append(side.nodes, chainNode{st: nx})
				side.at[k] = id
			}
			side.nodes[id].g, side.nodes[id].depth, side.nodes[id].prev, side.nodes[id].edge = t, depth+1, it.u, e
			heap.Push(q, chainPair{u: id, f: t})
		})
	}
	return side
}

// structuredNeighbours calls fn with every state one structured step from st (a slice
// by one atom outside st and blocked, a gather or all-to-all of a minor suffix), the
// edge from st to it (out) and the edge from it back to st (in).
func structuredNeighbours(sp *space, st state, blocked uint64, fn func(nx state, out, in cedge)) {
	blocked |= st.used()
	for d := range st {
		for a := range sp.atoms {
			if blocked&(1<<a) != 0 {
				continue
			}
			nx := st.clone()
			nx[d] = append(nx[d], uint8(a))
			fn(nx, cedge{op: OpSlice, dim: d}, cedge{op: OpAllGather, dim: d, group: []uint8{uint8(a)}})
		}
		n := len(st[d])
		for j := 1; j <= n; j++ {
			suffix := slices.Clone(st[d][n-j:])
			gathered := st.clone()
			gathered[d] = gathered[d][:n-j]
			fn(gathered, cedge{op: OpAllGather, dim: d, group: suffix}, cedge{op: OpSlice, dim: d})
			for b := range st {
				if b != d { // the gathered suffix to the minor end of dim b
					moved := gathered.clone()
					moved[b] = append(moved[b], suffix...)
					fn(moved, cedge{op: OpAllToAll, dim: d, dim2: b, group: suffix}, cedge{op: OpAllToAll, dim: b, dim2: d, group: suffix})
				}
			}
		}
	}
}

// chainPair is a pair of the two sides' nodes at distance g, with lb its bound (g and
// the least a collective costs, then g and the exchange's bound once bounded) and f
// its estimate (calibration).
type chainPair struct {
	u, v     int32
	g, lb, f float64
	bounded  bool
}

// pairQueue orders pairs by their estimate (and a side's Dijkstra its nodes by
// distance).
type pairQueue []chainPair

func (q pairQueue) Len() int           { return len(q) }
func (q pairQueue) Less(i, j int) bool { return q[i].f < q[j].f }
func (q pairQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *pairQueue) Push(x any)        { *q = append(*q, x.(chainPair)) }
func (q *pairQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// chainOfPlans (EffortExhaustive) prices, for every structured neighbour x of either
// end, cheapest step first while the planning budget lasts, the default effort's plan
// of the rest (x to the goal, or the source to x) after (before) the step between the
// end and x or the default effort's plan of it, whichever is cheaper: the cheapest such
// chain strictly below the best plan (nil: none). Its legs are the plans the service
// answers for them, so no chain of them through one structured neighbour it reached
// beats the answer.
func (ch *chainSearch) chainOfPlans() *Plan {
	c := ch.c
	r := c.r
	type neighbour struct {
		step cstep
		t    float64
		fwd  bool
	}
	var nbs []neighbour
	for _, fwd := range []bool{true, false} {
		end := c.start.st
		if !fwd {
			end = c.goal.st
		}
		structuredNeighbours(c.sp, end, ch.unr, func(nx state, out, in cedge) {
			e, before, after := out, end, nx
			if !fwd {
				e, before, after = in, nx, end
			}
			if !r.allowed(e.op) || !ch.admits(nx) || nx.equal(c.start.st) || nx.equal(c.goal.st) {
				return
			}
			from, to := cnode{before, ch.unr}, cnode{after, ch.unr}
			if !c.feasible(from, to, e) {
				return
			}
			if t := c.price(e, from, to); !ch.over(t) {
				nbs = append(nbs, neighbour{cstep{edge: e, before: from, after: to}, t, fwd})
			}
		})
	}
	slices.SortStableFunc(nbs, func(a, b neighbour) int { return cmp.Compare(a.t, b.t) })
	ctx := c.ctx
	var best *Plan
	for _, n := range nbs {
		if ch.over(n.t) || ch.stopped() {
			break
		}
		x := n.step.after.st
		if !n.fwd {
			x = n.step.before.st
		}
		xs := c.sp.sharding(x, r.Source.Unreduced)
		xs.Canonicalize(r.Mesh)
		// far: the default effort's plan of the rest; near: the step, or the default
		// effort's plan between the end and x when that is cheaper.
		plan := func(from, to sharding.Sharding) ([]Step, float64, bool) {
			q := *r
			q.Effort, q.PlanningBudget, q.Source, q.Target = EffortThorough, 0, from, to
			p, err := Reshard(ctx, &q)
			if err != nil || p.Summary.FullRematerialization && c.noRep {
				return nil, 0, false
			}
			steps, ok := ch.onSpace(p.Steps)
			return steps, p.Summary.TimeUS, ok
		}
		nearFrom, nearTo, farFrom, farTo := r.Source, xs, xs, r.Target
		if !n.fwd {
			nearFrom, nearTo, farFrom, farTo = xs, r.Target, r.Source, xs
		}
		far, farT, ok := plan(farFrom, farTo)
		if !ok || ch.over(farT) {
			continue
		}
		near, nearT := c.completeSteps([]cstep{n.step}), n.t
		if ps, t, ok := plan(nearFrom, nearTo); ok && t < nearT {
			near, nearT = ps, t
		}
		if ch.over(nearT + farT) {
			continue
		}
		steps := append(slices.Clip(near), far...)
		if !n.fwd {
			steps = append(slices.Clip(far), near...)
		}
		p := (&Plan{Request: r, sp: c.sp, Steps: steps}).named("chain")
		if p.finishTotals(); ch.over(p.Summary.TimeUS) || p.Summary.FullRematerialization && c.noRep {
			continue
		}
		best, ch.best = p, p.Summary.TimeUS
	}
	return best
}

// onSpace is steps (a plan of another space) with their states on the chain's space:
// ok false when some step's shardings are not states of it.
func (ch *chainSearch) onSpace(steps []Step) ([]Step, bool) {
	sp := ch.c.sp
	out := slices.Clone(steps)
	for i := range out {
		st := &out[i]
		st.before, st.after = sp.stateOf(st.Before), sp.stateOf(st.After)
		for _, x := range []struct {
			s  state
			sh sharding.Sharding
		}{{st.before, st.Before}, {st.after, st.After}} {
			back := sp.sharding(x.s, x.sh.Unreduced)
			back.Canonicalize(sp.mesh)
			if !back.SameLayout(x.sh) {
				return nil, false
			}
		}
	}
	return out, true
}
