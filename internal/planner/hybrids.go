package planner

import (
	"math"
	"slices"
	"strings"
)

// Hybrid plans: a candidate's steps with a direct all_to_all_v in place of some of them.

// hybridOf is the cheapest plan that takes the first steps of c and then the direct
// all_to_all_v from where they leave the tensor to goal, or one all_to_all_v that makes
// c's first steps and then c's remaining ones, or c's first steps, one all_to_all_v
// that makes some steps after them and c's remaining ones (a search plan's only),
// priced on sp (nil: none cheaper than both c and limit, or the request does not
// allow the exchange); closedOnly leaves out every exchange not priced in closed form. A search step moves whole tiles the
// structured way (a gather, an all-to-all), and what is left (or what comes before) is
// often a small, scattered move that no one structured collective makes but one
// exchange does: on testgen.RandomSet 112 of 250 plans got cheaper this way on
// tpu-v5p, to 0.24x, geomean 0.911. No hybrid passes through full
// replication (the ends may be replicated), folds a reduction of partial sums into an
// exchange, or prices an exchange of more than maxHybridTransfers transfers with no
// closed form. Reshard prices the hybrids of its candidates beside the search where it
// can (the greedy plan's and gather-then-slice's in the side work, the exact pass's on
// its goroutine) and bestHybrid keeps the best.
func (sp *space) hybridOf(r *Request, c *Plan, goal state, limit float64, closedOnly bool) *Plan {
	if !r.allowed(OpAllToAllV) || !sp.canRoute(r) || len(c.Steps) < 2 {
		return nil
	}
	replicatedEnds := r.Source.IsFullyReplicated() || r.Target.IsFullyReplicated()
	// c's time and whether it rematerializes, read without writing c (other goroutines
	// may read it).
	total, remat := 0.0, false
	for i, st := range c.Steps {
		total += st.Cost.TimeUS
		remat = remat || i < len(c.Steps)-1 && st.After.IsFullyReplicated()
	}
	bestT := total
	if remat && !replicatedEnds {
		bestT = math.Inf(1) // a hybrid without the rematerialization may cost more
	}
	// No hybrid above limit could be chosen. A window is not left out because its kept
	// steps plus the model's least latency reach bestT: an exchange whose every receiver
	// holds its tile already costs nothing, and a gather may leave exactly that
	// (hybridExchange answers a slice then).
	bestT = min(bestT, limit)
	var best *Plan
	keep := func(steps []Step) {
		h := &Plan{Request: r, sp: sp, Steps: steps}
		h.named(hybridName(steps, c.name)).finishTotals()
		best, bestT = h, h.Summary.TimeUS
	}
	// Exchange last: c's first steps, up to k, then the exchange to goal.
	t := 0.0
	for k, st := range c.Steps[:len(c.Steps)-1] {
		t += st.Cost.TimeUS
		if st.after == nil || !replicatedEnds && st.After.IsFullyReplicated() {
			break
		}
		if t >= bestT || onlySlices(c.Steps[k+1:]) {
			continue
		}
		if d, ok := sp.hybridExchange(r, st.after, goal, bestT-t, closedOnly); ok {
			keep(append(slices.Clone(c.Steps[:k+1]), replaced(d)))
		}
	}
	// Exchange first: c's first steps, up to k, made by one exchange from where they take
	// the tensor to where they leave it, and the rest of c kept (a reduction of partial
	// sums stays where it is: an exchange moves data, it does not add it up).
	i0 := 0
	for i0 < len(c.Steps) && isReduction(c.Steps[i0].Op) {
		i0++
	}
	if i0 == len(c.Steps) || c.Steps[i0].before == nil {
		return best
	}
	from, rest := c.Steps[i0].before, total
	for k := i0; k < len(c.Steps)-1; k++ {
		st := c.Steps[k]
		rest -= st.Cost.TimeUS // what the steps after k and the reductions before i0 take
		if st.after == nil || isReduction(st.Op) {
			break
		}
		if rest >= bestT || rematAfter(c.Steps[k:len(c.Steps)-1], replicatedEnds) {
			continue // the exchange's end, st.After, is a state of the hybrid too
		}
		if d, ok := sp.hybridExchange(r, from, st.after, bestT-rest, closedOnly); ok {
			keep(append(append(slices.Clone(c.Steps[:i0]), replaced(d)), c.Steps[k+1:]...))
		}
	}
	// Exchange in the middle: c's steps before i kept, one exchange in
	// place of steps i..k, the steps after k kept (i past the reductions and past c's
	// first step, k before its last: the two kinds above cover the other windows).
	// Often a free local slice first, so that the exchange moves less, and a gather
	// after it. Only a search plan's windows, and only exchanges priced in closed form:
	// there are quadratically many; on testgen.RandomSet and large meshes no other
	// candidate's window made a plan faster, and routing the others' exchanges made 6
	// of 534 faster for 5-10% of h100 large meshes' median.
	for i := i0 + 1; i < len(c.Steps)-1 && c.fromSearch(); i++ {
		if c.Steps[i].before == nil || !replicatedEnds && c.Steps[i].Before.IsFullyReplicated() {
			break // the hybrid would keep a rematerializing prefix
		}
		prefix := 0.0 // c's steps before i, its reductions included
		for _, st := range c.Steps[:i] {
			prefix += st.Cost.TimeUS
		}
		suffix := total - prefix // c's steps after k
		for k := i; k < len(c.Steps)-1; k++ {
			st := c.Steps[k]
			suffix -= st.Cost.TimeUS
			if st.after == nil || isReduction(st.Op) {
				break
			}
			if prefix+suffix >= bestT || rematAfter(c.Steps[k:len(c.Steps)-1], replicatedEnds) {
				continue
			}
			if !sp.exchangeInClosedForm(r, c.Steps[i].before, st.after) {
				continue
			}
			if d, ok := sp.hybridExchange(r, c.Steps[i].before, st.after, bestT-prefix-suffix, closedOnly); ok {
				keep(append(append(slices.Clone(c.Steps[:i]), replaced(d)), c.Steps[k+1:]...))
			}
		}
	}
	return best
}

// hybridExchange is the direct all_to_all_v from before to after when it takes less
// than limit µs and can be priced cheaply: in closed form, or (unless closedOnly) by
// routing at most maxHybridTransfers transfers (ok false otherwise). Where every device holds its
// after tile already (after only appends unused atoms to before's dims), it is the
// local slice instead: an exchange of no transfers would still be a collective to
// launch, which its price (0) would hide.
func (sp *space) hybridExchange(r *Request, before, after state, limit float64, closedOnly bool) (Step, bool) {
	if sp.sliceOnly(before, after) {
		if limit <= 0 {
			return Step{}, false
		}
		unr := r.Target.Unreduced
		return sp.steps(r, []move{{op: OpSlice, before: before, after: after, unrBefore: unr, unrAfter: unr}})[0], true
	}
	if !sp.exchangeInClosedForm(r, before, after) && (closedOnly || newPattern(sp, before, after, false, 0).transfersAtMost() > maxHybridTransfers) {
		return Step{}, false
	}
	if est, ok := sp.routed(r, before, after, false, 0); !ok || est.TimeUS >= limit {
		return Step{}, false // priced (memoized for directStep) and not cheaper
	}
	return sp.directStep(r, before, after, r.Target.Unreduced), true
}

// replaced marks d as the step that took the place of some of a hybrid's steps.
func replaced(d Step) Step {
	d.origin = replacedOrigin + string(d.Op)
	return d
}

// replacedOrigin starts the origin of a step that replaced others (replaced).
const replacedOrigin = "="

// hybridName names a hybrid of the plan called from by its steps' origins (a step
// without one is from's): each replacing step by its op, each run of a candidate's
// steps by the candidate's name: "search+all_to_all_v", "all_to_all_v+search",
// "search+all_to_all_v+search", "all_to_all_v+all_to_all_v". It marks the steps
// without an origin as from's, so that a hybrid of the hybrid names them too.
func hybridName(steps []Step, from string) string {
	var b strings.Builder
	last := ""
	for i := range steps {
		if steps[i].origin == "" {
			steps[i].origin = from
		}
		o := steps[i].origin
		if o == last && !strings.HasPrefix(o, replacedOrigin) {
			continue
		}
		if last != "" {
			b.WriteByte('+')
		}
		b.WriteString(strings.TrimPrefix(o, replacedOrigin))
		last = o
	}
	return b.String()
}

// sliceOnly reports whether after differs from before only by atoms, unused in
// before, appended to the minor end of its dims, and each device's after tile lies in
// its before tile (on an uneven dim the ceildiv boundaries need not nest): a local
// slice makes it.
func (sp *space) sliceOnly(before, after state) bool {
	used, changed := before.used(), false
	for d := range after {
		b, a := before[d], after[d]
		if len(a) < len(b) || !slices.Equal(b, a[:len(b)]) {
			return false
		}
		for _, x := range a[len(b):] {
			if used&(1<<x) != 0 {
				return false
			}
		}
		if len(a) == len(b) {
			continue
		}
		changed = true
		if D := sp.shape[d]; (D%int64(sp.count(b)) != 0 || D%int64(sp.count(a)) != 0) && !sp.dimCovered(d, b, a, 0) {
			return false
		}
	}
	return changed
}

// isReduction reports whether op reduces partial sums.
func isReduction(op Op) bool { return op == OpReduceScatter || op == OpAllReduce }

// rematAfter reports whether some step of steps leaves the tensor fully replicated
// (never, when an end of the reshard is).
func rematAfter(steps []Step, replicatedEnds bool) bool {
	if replicatedEnds {
		return false
	}
	for _, st := range steps {
		if st.After.IsFullyReplicated() {
			return true
		}
	}
	return false
}

// bestHybrid is the best of hybrids (nil entries skipped) when it beats every plan of
// cands in pickBest's order, else nil.
func bestHybrid(r *Request, cands, hybrids []*Plan) *Plan {
	if len(cands) == 0 {
		return nil
	}
	cur := pickBest(cands, r.AllowFullRemat)
	var best *Plan
	for _, h := range hybrids {
		if h == nil {
			continue
		}
		if h.finishTotals(); better(h, cur, r.AllowFullRemat) && (best == nil || better(h, best, r.AllowFullRemat)) {
			best = h
		}
	}
	return best
}

// onlySlices reports whether steps are all local slices.
func onlySlices(steps []Step) bool {
	for _, st := range steps {
		if st.Op != OpSlice {
			return false
		}
	}
	return true
}

// fromSearch reports whether c is a search plan or a hybrid that keeps some of a search
// plan's steps (the kinds whose middle windows hybridOf tries).
func (c *Plan) fromSearch() bool {
	if c.kind == kindSearch {
		return true
	}
	for _, st := range c.Steps {
		if st.origin == originSearch {
			return true
		}
	}
	return false
}
