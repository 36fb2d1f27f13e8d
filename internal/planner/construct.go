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
	for iter := 0; iter <= 4*len(sp.atoms)+len(goal)+2; iter++ {
		if cur.equal(goal) {
			return out
		}
		mv, ok := sp.nextGreedy(r, cur, goal, relaxed)
		if !ok {
			return nil
		}
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
	rank := len(cur)
	mk := func(op Op, dim, dim2 int, group []uint8, after state) move {
		return move{op: op, dim: dim, dim2: dim2, group: group, before: cur, after: after, unrBefore: r.Target.Unreduced, unrAfter: r.Target.Unreduced}
	}
	sameCounts := true
	for d := range rank {
		if sp.count(cur[d]) != sp.count(goal[d]) {
			sameCounts = false
			break
		}
	}
	if sameCounts && r.allowed(OpCollectivePermute) {
		return mk(OpCollectivePermute, 0, 0, changedAtoms(cur, goal), goal.clone()), true
	}
	prefix := make([]int, rank)
	clean := make([]bool, rank) // cur[d] is a prefix of goal[d]
	for d := range rank {
		k := 0
		for k < len(cur[d]) && k < len(goal[d]) && cur[d][k] == goal[d][k] {
			k++
		}
		prefix[d] = k
		clean[d] = k == len(cur[d])
	}
	// all_to_all: the longest misplaced suffix some clean dim continues with.
	if r.allowed(OpAllToAll) {
		for d := range rank {
			tail := cur[d][prefix[d]:]
			for j := range tail {
				suf := tail[j:]
				for e := range rank {
					if e == d || !clean[e] {
						continue
					}
					next := goal[e][len(cur[e]):]
					if len(next) < len(suf) || !slices.Equal(next[:len(suf)], suf) {
						continue
					}
					after := cur.clone()
					after[d] = after[d][:len(after[d])-len(suf)]
					after[e] = append(after[e], suf...)
					return mk(OpAllToAll, d, e, slices.Clone(suf), after), true
				}
			}
		}
	}
	// all_to_all of a misplaced tail into a dim that still needs that many shards (its
	// count times the tail's divides its goal count): a permute puts the atoms in place
	// once every dim has its goal count (XLA's all-to-all then permute).
	if relaxed && r.allowed(OpAllToAll) && r.allowed(OpCollectivePermute) {
		for d := range rank {
			tail := cur[d][prefix[d]:]
			for j := range tail {
				suf := tail[j:]
				k := sp.count(suf)
				for e := range rank {
					ce, ge := sp.count(cur[e]), sp.count(goal[e])
					if e == d || ce >= ge || ge%(ce*k) != 0 {
						continue
					}
					after := cur.clone()
					after[d] = after[d][:len(after[d])-len(suf)]
					after[e] = append(after[e], suf...)
					return mk(OpAllToAll, d, e, slices.Clone(suf), after), true
				}
			}
		}
	}
	// Slices of unused goal atoms into dims that still need that many shards, for the
	// same permute.
	if relaxed && r.allowed(OpSlice) && r.allowed(OpCollectivePermute) {
		used := cur.used()
		after := cur.clone()
		var dims []int
		for e := range rank {
			for _, a := range goal[e] {
				ce, ge := sp.count(after[e]), sp.count(goal[e])
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
		if len(dims) > 0 && !clean[dims[0]] {
			m := mk(OpSlice, 0, 0, nil, after)
			m.dims = dims
			return m, true
		}
	}
	// all_gather: the misplaced atoms of the first dim that has some.
	for d := range rank {
		if clean[d] {
			continue
		}
		if !r.allowed(OpAllGather) {
			return move{}, false
		}
		after := cur.clone()
		after[d] = after[d][:prefix[d]]
		return mk(OpAllGather, d, 0, slices.Clone(cur[d][prefix[d]:]), after), true
	}
	// Every dim is a prefix of its goal: slice in what is missing.
	if !r.allowed(OpSlice) {
		return move{}, false
	}
	used := cur.used()
	after := cur.clone()
	var dims []int
	for d := range rank {
		for _, a := range goal[d][len(cur[d]):] {
			if used&(1<<a) != 0 {
				return move{}, false // held elsewhere at its goal place: cannot happen when all dims are clean
			}
			after[d] = append(after[d], a)
		}
		if len(after[d]) != len(cur[d]) {
			dims = append(dims, d)
		}
	}
	m := mk(OpSlice, 0, 0, nil, after)
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
