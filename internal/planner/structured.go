package planner

import (
	"context"
	"encoding/binary"
	"math"
	"slices"

	"github.com/shardplan/shardplan/internal/sharding"
)

// The structured pass: the complete pass's engine (complete.go) over the structured
// graph, searched to the end at every mesh size. Its states place units, not prime
// atoms: every mesh axis whole, or split where the two shardings name sub-axes of it
// (the common refinement of their boundaries); a unit is the run of the pass space's
// prime atoms it covers, kept together and in order. Its moves are the structured ones:
//
//	slice              a sequence of unused units appended to the minor end of a dim
//	                   (one unit where the dim's tiles are even whatever its units)
//	all_gather         a minor suffix of whole units dropped, in one step or in two:
//	                   a minor run of its atoms, then the rest
//	all_to_all         a minor suffix of whole units moved to the minor end of another dim
//	reduce_scatter     pending partial-sum units reduced and appended to a dim
//	all_reduce         pending partial-sum units reduced
//	collective_permute every other unit state with the same shard count per dim
//
// Units of 4 mesh axes at rank 3 make 685 states per unreduced set, whatever the mesh
// size, and every edge is priced as the plan's step is: gathers, all-to-alls and
// reductions by the model's formula, permutes as digit permutations of the prime atoms
// (priced when generated: a digit permutation's price depends only on where each atom's
// digit goes and on the bytes, so the space prices each once, and a pass prices tens
// of thousands of permutes for a few thousand routings).
// The pass runs before the complete pass, bounded by the candidates; its plan (or the
// proof that none of its graph is strictly cheaper) is what makes plans under the
// structured ops proven at every size (structuredOnly), and what keeps a plan that never
// replicates the tensor whenever the structured graph holds one.

// structuredOps are the step ops the structured graph's moves use.
var structuredOps = []Op{OpSlice, OpAllGather, OpAllToAll, OpReduceScatter, OpAllReduce, OpCollectivePermute}

// structuredOnly reports whether r allows only structured ops: its plans are then
// proven when the structured pass ends within its budgets.
func structuredOnly(r *Request) bool {
	if r.AllowedOps == nil {
		return false
	}
	for _, op := range r.AllowedOps {
		if !slices.Contains(structuredOps, op) {
			return false
		}
	}
	return true
}

// unitsOf groups cp's atoms into units: per unit ref of the common refinement (every
// mesh axis, split at the sub-axis boundaries r's shardings name and at the node
// boundaries of r's model, nodeCuts), the atoms of cp it covers, major to minor. It
// reports false when some ref of the shardings is not a union of units.
func unitsOf(cp *space, r *Request) ([][]uint8, bool) {
	us, ok := newSpaceCut(r.Mesh, r.Shape, r.ElemBits, true, 0, nodeCuts(r.Mesh, r.Model), r.Source, r.Target)
	if !ok {
		return nil, false
	}
	var units [][]uint8
	covered := uint64(0)
	for _, u := range us.atoms {
		ids := cp.atomsOf([]sharding.AxisRef{u})
		if len(ids) == 0 {
			return nil, false
		}
		for _, a := range ids {
			covered |= 1 << a
		}
		units = append(units, ids)
	}
	return units, covered == uint64(1)<<len(cp.atoms)-1
}

// structuredPass runs the structured pass over cp (the complete pass's space) against
// cands: a plan strictly cheaper than the best of them under the request's rules (nil:
// none), and whether the pass proved that no plan of the structured graph is cheaper.
func structuredPass(ctx context.Context, r *Request, cp *space, cands []*Plan) (*Plan, bool, error) {
	units, ok := unitsOf(cp, r)
	if !ok {
		return nil, false, nil
	}
	states := countStates(len(units), len(r.Shape))
	if states > structuredStateLimit {
		return cleanStructuredPass(ctx, r, cp, cands, units)
	}
	start := cnode{cp.stateOf(r.Source), maskOf(cp.atomsOf(r.Source.Unreduced))}
	goal := cnode{cp.stateOf(r.Target), maskOf(cp.atomsOf(r.Target.Unreduced))}
	if start.unr&goal.unr != goal.unr {
		return nil, false, nil
	}
	cs := newCompleteSearch(ctx, cp, r, start, goal, start.unr&^goal.unr)
	cs.units = units
	cs.passConfig = passConfig{moves: unitMoves{}, full: true, weight: 1, maxExp: structuredExpansions, maxP2P: structuredP2PPerState * int(states)}.forEffort(r.Effort)
	free, any, _ := bestCandidates(r, cands)
	noRep := cs.noRep
	var first *Plan
	if !structuredOnly(r) && r.Effort != EffortExhaustive {
		// With exchanges allowed the structured graph gives an incumbent within a
		// smaller budget, and the exchange families (the complete pass) cover what
		// permutes reach.
		cs.noPermute = true
		cs.maxExp = structuredIncumbentExpansions
		p, _, err := cs.against(free, any, "structured")
		if err == nil && p == nil {
			return cleanStructuredPass(ctx, r, cp, cands, units)
		}
		return p, false, err
	}
	if r.allowed(OpCollectivePermute) {
		// The graph without permutes first: its plan bounds the permutes the full
		// graph prices.
		cs.noPermute = true
		p, _, err := cs.against(free, any, "structured")
		if err != nil {
			return nil, false, err
		}
		if p != nil {
			first = p
			free, any, _ = bestCandidates(r, append(slices.Clip(cands), p))
		}
		cs.noPermute, cs.noRep = false, noRep
	}
	p, ok, err := cs.against(free, any, "structured")
	if p == nil {
		p = first
	}
	ok = ok && structuredOnly(r)
	return p, ok, err
}

// cleanStructuredPass is the structured pass over a graph above structuredStateLimit,
// or with exchanges allowed when the incumbent's budget found nothing: when no
// candidate avoids a full rematerialization, a search of the graph for a plan that
// does, within structuredExpansions (not proven): without permutes, then, when that
// finds none, with them.
func cleanStructuredPass(ctx context.Context, r *Request, cp *space, cands []*Plan, units [][]uint8) (*Plan, bool, error) {
	free, _, _ := bestCandidates(r, cands)
	if r.AllowFullRemat || !math.IsInf(free, 1) {
		return nil, false, nil
	}
	start := cnode{cp.stateOf(r.Source), maskOf(cp.atomsOf(r.Source.Unreduced))}
	goal := cnode{cp.stateOf(r.Target), maskOf(cp.atomsOf(r.Target.Unreduced))}
	if start.unr&goal.unr != goal.unr {
		return nil, false, nil
	}
	cs := newCompleteSearch(ctx, cp, r, start, goal, start.unr&^goal.unr)
	if !cs.noRep {
		return nil, false, nil
	}
	cs.units, cs.noPermute = units, true
	cs.passConfig = passConfig{moves: unitMoves{}, full: true, weight: structuredCleanGreedy, maxExp: structuredExpansions, maxP2P: structuredP2PPerState * structuredStateLimit}
	res, err := cs.run(free)
	if err == nil && res.path == nil && r.allowed(OpCollectivePermute) {
		cs.noPermute = false
		res, err = cs.run(free)
	}
	if err != nil || res.path == nil {
		return nil, false, err
	}
	p := &Plan{Request: r, sp: cp, Steps: cs.completeSteps(res.path)}
	return p.named("structured"), false, nil
}

// unitRuns splits a dim's atoms into its units' runs (every structured state's dims
// are whole units in order), returning each run's length, major to minor.
func (c *completeSearch) unitRuns(ids []uint8) []int {
	var out []int
	for i := 0; i < len(ids); {
		u := c.unitOfAtom(ids[i])
		n := len(c.units[u])
		out = append(out, n)
		i += n
	}
	return out
}

// unitOfAtom is the unit holding atom a.
func (c *completeSearch) unitOfAtom(a uint8) int {
	for u, ids := range c.units {
		if slices.Contains(ids, a) {
			return u
		}
	}
	return -1
}

// expandUnits generates every structured edge out of node id (unit mode).
func (c *completeSearch) expandUnits(id int32) {
	cur := c.nodes[id].n
	st := cur.st
	r := c.r
	used := st.used()
	pending := cur.unr & c.reducible
	if r.allowed(OpSlice) {
		var free []uint8
		for u, ids := range c.units {
			if (used|cur.unr)&maskOf(ids) == 0 {
				free = append(free, uint8(u))
			}
		}
		for d := range st {
			// Several units in one slice only where a tile may be uneven (the slice
			// by the first alone may not be local); elsewhere slices by one unit
			// chain at no cost.
			maxLen := 1
			if c.r.Shape[d]%int64(c.devicesN) != 0 {
				maxLen = len(free)
			}
			eachSequence(free, maxLen, func(seq []uint8) {
				nx := st.clone()
				for _, u := range seq {
					nx[d] = append(nx[d], c.units[u]...)
				}
				c.consider(id, cedge{op: OpSlice, dim: d}, cnode{nx, cur.unr})
			})
		}
	}
	for d := range st {
		runs := c.unitRuns(st[d])
		n := len(st[d])
		j := 0
		for k := len(runs) - 1; k >= 0; k-- {
			j += runs[k]
			suffix := slices.Clone(st[d][n-j:])
			if r.allowed(OpAllGather) {
				nx := st.clone()
				nx[d] = nx[d][:n-j]
				c.consider(id, cedge{op: OpAllGather, dim: d, group: suffix}, cnode{nx, cur.unr})
				for k := 1; k < j; k++ {
					e := cedge{op: OpAllGather, dim: d, group: suffix, pieces: []uint8{uint8(k), uint8(j - k)}}
					if c.piecesFeasible(e, cur, cnode{nx, cur.unr}) {
						c.consider(id, e, cnode{nx, cur.unr})
					}
				}
			}
			if r.allowed(OpAllToAll) {
				c.allToAlls(id, cur, d, suffix)
			}
		}
	}
	if pending != 0 {
		c.unitReductions(id, cur, pending)
		return
	}
	if r.allowed(OpCollectivePermute) && !c.noPermute {
		for _, nx := range c.permuteTargets(cur) {
			c.unitPermute(id, cedge{op: OpCollectivePermute, group: changedAtoms(st, nx)}, cnode{nx, cur.unr})
		}
	}
}

// unitPermute considers the permute e from node id to nx, priced at once when it is a
// digit permutation (its price then depends only on where each atom's digit goes and
// on the bytes, memoized per space), else lazily as consider does.
func (c *completeSearch) unitPermute(id int32, e cedge, nx cnode) {
	from := c.nodes[id]
	if _, ok := c.sp.digitSrc(from.n.st, nx.st); !ok {
		c.consider(id, e, nx)
		return
	}
	if id2, ok := c.bykey[nx.key()]; ok && c.nodes[id2].g <= from.g {
		return // reached at least as cheaply already
	}
	if c.budget > 0 && c.tileBytes(nx.st) > c.budget {
		return
	}
	isGoal := nx.unr == c.goal.unr && nx.st.equal(c.goal.st)
	hn := 0.0
	if !isGoal {
		if c.noRep && c.replicated(nx) {
			return
		}
		hn = c.h(nx)
	}
	if c.over(from.g + hn) {
		return
	}
	known := len(c.sp.digitRoutes)
	est, ok := c.sp.routed(c.r, from.n.st, nx.st, true, c.tileBytes(from.n.st))
	if !ok {
		c.consider(id, e, nx)
		return
	}
	if len(c.sp.digitRoutes) > known {
		c.p2p++ // a digit permutation routed
	}
	if !c.over(from.g+est.TimeUS+hn) && c.feasible(from.n, nx, e) {
		c.push(nx, from.g+est.TimeUS, from.steps+1, id, e)
	}
}

// unitReductions generates all_reduce and reduce_scatter over every nonempty set of
// the pending partial-sum units (reduce_scatter: in every order, onto every dim).
func (c *completeSearch) unitReductions(id int32, cur cnode, pending uint64) {
	r := c.r
	var us []uint8
	for u, ids := range c.units {
		if pending&maskOf(ids) != 0 {
			us = append(us, uint8(u))
		}
	}
	for sub := uint64(1); sub < 1<<len(us); sub++ {
		var set []uint8
		var mask uint64
		for i, u := range us {
			if sub&(1<<i) != 0 {
				set = append(set, u)
				mask |= maskOf(c.units[u])
			}
		}
		var atoms []uint8
		for _, u := range set {
			atoms = append(atoms, c.units[u]...)
		}
		if r.allowed(OpAllReduce) {
			c.consider(id, cedge{op: OpAllReduce, group: atoms, reduce: mask}, cnode{cur.st.clone(), cur.unr &^ mask})
		}
		if !r.allowed(OpReduceScatter) {
			continue
		}
		eachPermutation(set, func(order []uint8) {
			var group []uint8
			for _, u := range order {
				group = append(group, c.units[u]...)
			}
			for d := range cur.st {
				nx := cur.st.clone()
				nx[d] = append(nx[d], group...)
				c.consider(id, cedge{op: OpReduceScatter, dim: d, group: slices.Clone(group), reduce: mask}, cnode{nx, cur.unr &^ mask})
			}
		})
	}
}

// unitStatesOver lists every unit state over the units outside mask (their atoms in
// place), as statesOver does for atoms.
func (c *completeSearch) unitStatesOver(mask uint64) []state {
	rank := len(c.goal.st)
	var out []state
	cur := make([][]uint8, rank) // per dim, unit ids
	var rec func(u int)
	rec = func(u int) {
		if u == len(c.units) {
			st := make(state, rank)
			for d, us := range cur {
				for _, v := range us {
					st[d] = append(st[d], c.units[v]...)
				}
			}
			out = append(out, st)
			return
		}
		rec(u + 1) // unused
		if mask&maskOf(c.units[u]) != 0 {
			return
		}
		for d := range cur {
			for pos := 0; pos <= len(cur[d]); pos++ {
				saved := slices.Clone(cur[d])
				cur[d] = slices.Insert(cur[d], pos, uint8(u))
				rec(u + 1)
				cur[d] = saved
			}
		}
	}
	rec(0)
	return out
}

// unitPermuteTargets are the unit states other than cur's with its shard count per
// dim (permutes run once no reduction is pending: cur has the goal's unreduced set).
func (c *completeSearch) unitPermuteTargets(cur cnode) []state {
	if cur.unr != c.goal.unr {
		return nil
	}
	if c.byCounts == nil {
		c.byCounts = map[string][]state{}
		for _, o := range c.statesOver(c.goal.unr) {
			k := c.countsKey(o)
			c.byCounts[k] = append(c.byCounts[k], o)
		}
	}
	var out []state
	for _, o := range c.byCounts[c.countsKey(cur.st)] {
		if !o.equal(cur.st) {
			out = append(out, o)
		}
	}
	return out
}

// countsKey keys a state by its shard count per dim.
func (c *completeSearch) countsKey(st state) string {
	var b []byte
	for d := range st {
		b = binary.LittleEndian.AppendUint64(b, uint64(c.sp.count(st[d])))
	}
	return string(b)
}

// gatherPieces are the gathers of a pieces edge: from before, the minor-most run of
// e.pieces[0] atoms of the dim dropped, then the next run, to after. Gathering a
// large axis in two steps over its sub-axes can cost less than in one (the
// hierarchical gather), and the states between are sub-axis states the unit graph does
// not hold.
func (c *completeSearch) gatherPieces(e cedge, before, after cnode) []move {
	var out []move
	cur := before.st
	unr := c.unrRefs(before.unr)
	for _, k := range e.pieces {
		n := len(cur[e.dim])
		nx := cur.clone()
		nx[e.dim] = nx[e.dim][:n-int(k)]
		out = append(out, move{op: OpAllGather, dim: e.dim, group: slices.Clone(cur[e.dim][n-int(k):]), before: cur, after: nx, unrBefore: unr, unrAfter: unr})
		cur = nx
	}
	return out
}

// piecesFeasible reports whether every gather of a pieces edge passes the coverage
// check.
func (c *completeSearch) piecesFeasible(e cedge, before, after cnode) bool {
	for _, m := range c.gatherPieces(e, before, after) {
		if !c.unitFeasible(m.before, m.after, maskOf(m.group)) {
			return false
		}
	}
	return true
}

// unitFeasible is space.feasible with each uneven dim's coverage check memoized: the
// structured graph's dims take the same few unit lists in thousands of states.
func (c *completeSearch) unitFeasible(before, after state, group uint64) bool {
	for d := range before {
		b, a := before[d], after[d]
		D := c.sp.shape[d]
		if slices.Equal(b, a) || D%int64(c.sp.count(b)) == 0 && D%int64(c.sp.count(a)) == 0 {
			continue
		}
		// The check reads the group's atoms among the dim's only.
		var in uint64
		k := append(append(append(make([]byte, 0, len(b)+len(a)+11), byte(d)), b...), 0xff)
		for _, x := range b {
			in |= 1 << x
		}
		for _, x := range a {
			in |= 1 << x
		}
		k = binary.LittleEndian.AppendUint64(append(append(k, a...), 0xff), group&in)
		ok, seen := c.covered[string(k)]
		if !seen {
			ok = c.sp.dimCovered(d, b, a, group)
			if c.covered == nil {
				c.covered = map[string]bool{}
			}
			c.covered[string(k)] = ok
		}
		if !ok {
			return false
		}
	}
	return true
}
