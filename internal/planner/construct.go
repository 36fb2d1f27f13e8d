package planner

import "slices"

// construct builds a plan from start to goal greedily, in the order Shardy's
// reshard_to_collectives and XLA's ReshardNoCache favour: one collective_permute when
// every dim already has its goal's shard count; otherwise, while some dim holds atoms
// past its common prefix with its goal, move the longest such suffix to the dim whose
// goal continues with it (all_to_all) or, when no dim can take it, gather it
// (all_gather); then slice in the atoms every dim still lacks. Every move is checked
// like the search's (allowed ops, feasibility on uneven dims, the buffer and
// replication limits). It returns nil when the greedy order is blocked; the search then
// runs without an incumbent.
//
// The plan is an upper bound the search must beat (Reshard prunes every state whose
// cost plus heuristic exceeds it), and a candidate of its own when the search gives up.
func (sp *space) construct(r *Request, start, goal state) []move {
	// The search's own limits: no buffer above the larger end, no full replication in
	// between (when neither end is replicated).
	noRep := !r.Source.IsFullyReplicated() && !r.Target.IsFullyReplicated() && len(r.Target.Unreduced) == 0
	maxTile := max(sp.tileElems(start), sp.tileElems(goal))
	a := sp.constructWith(r, start, goal, maxTile, noRep, false)
	b := sp.constructWith(r, start, goal, maxTile, noRep, true)
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case sp.planCost(r, b) < sp.planCost(r, a):
		return b
	}
	return a
}

// constructWith is construct with its limits given: the largest tile (elements) a state
// may have, and whether states may not be fully replicated. relaxed also moves atoms
// (all_to_all, slice) into dims that are not yet a prefix of their goal when their
// count stays a divisor of the goal's, for a final permute to put them in order.
func (sp *space) constructWith(r *Request, start, goal state, maxTile int64, noRep, relaxed bool) []move {
	cur := start
	var out []move
	// The states passed: a move back to one is a loop (two dims can hand the same
	// suffix back and forth, allToAllFilling), which gives up at once rather than at the
	// iteration cap. Steering the loop elsewhere (a filling all_to_all that avoids them)
	// can give a greedy plan where there was none, but its tighter bound can prune the
	// anytime pass's way to a cheaper plan, so the greedy construction gives up instead.
	seen := map[string]bool{start.key(): true}
	for iter := 0; iter <= 4*len(sp.atoms)+len(goal)+2; iter++ {
		if cur.equal(goal) {
			return out
		}
		mv, ok := sp.nextGreedy(r, cur, goal, relaxed)
		if !ok || seen[mv.after.key()] {
			return nil
		}
		seen[mv.after.key()] = true
		if mv.op != OpCollectivePermute && !sp.feasible(mv.before, mv.after, maskOf(mv.group)) {
			return nil
		}
		if sp.tileElems(mv.after) > maxTile || noRep && mv.after.used() == 0 && !mv.after.equal(goal) {
			return nil
		}
		out = append(out, mv)
		cur = mv.after
	}
	return nil
}

// nextGreedy is construct's next move from cur.
func (sp *space) nextGreedy(r *Request, cur, goal state, relaxed bool) (move, bool) {
	g := greedyStep{sp: sp, r: r, cur: cur, goal: goal}
	if g.sameCounts() && r.allowed(OpCollectivePermute) {
		return g.mk(OpCollectivePermute, 0, 0, changedAtoms(cur, goal), goal.clone()), true
	}
	g.prefixes()
	if r.allowed(OpAllToAll) {
		if mv, ok := g.allToAllOnward(); ok {
			return mv, true
		}
	}
	if relaxed && r.allowed(OpAllToAll) && r.allowed(OpCollectivePermute) {
		if mv, ok := g.allToAllFilling(); ok {
			return mv, true
		}
	}
	if relaxed && r.allowed(OpSlice) && r.allowed(OpCollectivePermute) {
		if mv, ok := g.sliceFilling(); ok {
			return mv, true
		}
	}
	// all_gather: the misplaced atoms of the first dim that has some.
	for d := range cur {
		if g.clean[d] {
			continue
		}
		if !r.allowed(OpAllGather) {
			return move{}, false
		}
		after := cur.clone()
		after[d] = after[d][:g.prefix[d]]
		return g.mk(OpAllGather, d, 0, slices.Clone(cur[d][g.prefix[d]:]), after), true
	}
	// Every dim is a prefix of its goal: slice in what is missing.
	if !r.allowed(OpSlice) {
		return move{}, false
	}
	return g.sliceMissing()
}

// greedyStep is one step of nextGreedy: the current state, its goal, and per dim the
// length of its common prefix with the goal and whether it is all prefix (clean).
type greedyStep struct {
	sp        *space
	r         *Request
	cur, goal state
	prefix    []int
	clean     []bool
}

func (g *greedyStep) mk(op Op, dim, dim2 int, group []uint8, after state) move {
	unr := g.r.Target.Unreduced
	return move{op: op, dim: dim, dim2: dim2, group: group, before: g.cur, after: after, unrBefore: unr, unrAfter: unr}
}

// sameCounts reports whether every dim has its goal's shard count.
func (g *greedyStep) sameCounts() bool {
	for d := range g.cur {
		if g.sp.count(g.cur[d]) != g.sp.count(g.goal[d]) {
			return false
		}
	}
	return true
}

func (g *greedyStep) prefixes() {
	g.prefix = make([]int, len(g.cur))
	g.clean = make([]bool, len(g.cur))
	for d, ids := range g.cur {
		k := 0
		for k < len(ids) && k < len(g.goal[d]) && ids[k] == g.goal[d][k] {
			k++
		}
		g.prefix[d], g.clean[d] = k, k == len(ids)
	}
}

// moveSuffix is the all_to_all of suf, the last atoms of dim d, to the end of dim e.
func (g *greedyStep) moveSuffix(d, e int, suf []uint8) move {
	after := g.cur.clone()
	after[d] = after[d][:len(after[d])-len(suf)]
	after[e] = append(after[e], suf...)
	return g.mk(OpAllToAll, d, e, slices.Clone(suf), after)
}

// allToAllOnward is the all_to_all of the longest misplaced suffix some clean dim's goal
// continues with.
func (g *greedyStep) allToAllOnward() (move, bool) {
	for d := range g.cur {
		tail := g.cur[d][g.prefix[d]:]
		for j := range tail {
			suf := tail[j:]
			for e := range g.cur {
				if e == d || !g.clean[e] {
					continue
				}
				next := g.goal[e][len(g.cur[e]):]
				if len(next) >= len(suf) && slices.Equal(next[:len(suf)], suf) {
					return g.moveSuffix(d, e, suf), true
				}
			}
		}
	}
	return move{}, false
}

// allToAllFilling is the all_to_all of a misplaced tail into a dim that still needs that
// many shards (its count times the tail's divides its goal count): a permute puts the
// atoms in place once every dim has its goal count (XLA's all-to-all then permute).
func (g *greedyStep) allToAllFilling() (move, bool) {
	sp := g.sp
	for d := range g.cur {
		tail := g.cur[d][g.prefix[d]:]
		for j := range tail {
			suf := tail[j:]
			k := sp.count(suf)
			for e := range g.cur {
				ce, ge := sp.count(g.cur[e]), sp.count(g.goal[e])
				if e != d && ce < ge && ge%(ce*k) == 0 {
					return g.moveSuffix(d, e, suf), true
				}
			}
		}
	}
	return move{}, false
}

// sliceFilling slices unused goal atoms into dims that still need that many shards, for
// the same permute.
func (g *greedyStep) sliceFilling() (move, bool) {
	sp := g.sp
	used := g.cur.used()
	after := g.cur.clone()
	var dims []int
	for e := range g.cur {
		for _, a := range g.goal[e] {
			ce, ge := sp.count(after[e]), sp.count(g.goal[e])
			if used&(1<<a) != 0 || ce >= ge || ge%(ce*sp.atoms[a].Size) != 0 {
				continue
			}
			after[e] = append(after[e], a)
			used |= 1 << a
			if !slices.Contains(dims, e) {
				dims = append(dims, e)
			}
		}
	}
	if len(dims) == 0 || g.clean[dims[0]] {
		return move{}, false
	}
	m := g.mk(OpSlice, 0, 0, nil, after)
	m.dims = dims
	return m, true
}

// sliceMissing slices in every goal atom a clean state lacks.
func (g *greedyStep) sliceMissing() (move, bool) {
	used := g.cur.used()
	after := g.cur.clone()
	var dims []int
	for d := range g.cur {
		for _, a := range g.goal[d][len(g.cur[d]):] {
			if used&(1<<a) != 0 {
				return move{}, false // held elsewhere at its goal place: cannot happen when all dims are clean
			}
			after[d] = append(after[d], a)
		}
		if len(after[d]) != len(g.cur[d]) {
			dims = append(dims, d)
		}
	}
	m := g.mk(OpSlice, 0, 0, nil, after)
	m.dims = dims
	return m, true
}

// planCost is the search cost of moves (the sum of their prices).
func (sp *space) planCost(r *Request, mv []move) float64 {
	t := 0.0
	for i := range mv {
		sp.price(r, &mv[i])
		t += mv[i].est.TimeUS
	}
	return t
}
