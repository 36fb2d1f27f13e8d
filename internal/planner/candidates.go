package planner

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The candidates before the complete pass: the greedy plan, the side work (bounds,
// the direct exchange, gather-then-slice and their hybrids) and the late exchange.

// greedyIncumbent is the greedy plan after the reduction pre (start is the state after
// it; none, or one) and ub, the cost the search must beat: the plan's cost when it has
// no full rematerialization (pickBest prefers those whatever their time), priced move by
// move as the search counts, else +Inf. The direct candidates bound the search too
// (startSideWork). The greedy plan stands in when the search runs out of budget.
func (sp *space) greedyIncumbent(r *Request, pre []move, start, goal state) (greedy []*Plan, ub float64) {
	ub = math.Inf(1)
	if mv := sp.construct(r, start, goal); mv != nil {
		t := sp.planCost(r, mv)
		mv = mergeMoves(sp, r, mv)
		gp := &Plan{Request: r, sp: sp}
		gp.Steps = sp.steps(r, append(slices.Clone(pre), mv...))
		greedy = append(greedy, gp.named("greedy"))
		if gp.finishTotals(); !gp.Summary.FullRematerialization || r.AllowFullRemat {
			ub = t
		}
	}
	return greedy, ub
}

// sideWork is what a request computes beside its search, on another goroutine: the
// direct candidates (the all_to_all_v exchange routes every transfer: a sixth of a
// median request of testgen.RandomSet) with ub, the cheapest of them without a full
// rematerialization (+Inf: none), and the plan's bounds. The search reads ub only where
// it bounds the exact pass (or, when the first pass reaches no goal, the greedier
// pass's plan) and waits for it there; the anytime pass never sees it, so nothing the
// search returns depends on when the side work ends. It is a worker: when the request
// needs it before its goroutine has begun (a second core waking from idle can take
// hundreds of µs), the request computes it itself.
type sideWork struct {
	run     *worker
	direct  []*Plan
	hybrids []*Plan // hybridOf the greedy plan and the direct candidates
	omitted bool    // the direct all_to_all_v was left out for its transfers
	ub      float64
	// hybridCap is what a hybrid must cost less than to be chosen: the cheapest of
	// the greedy plan and the direct candidates (the full plans, reductions included)
	// that pickBest could choose over it (those without a full rematerialization,
	// unless the request allows one), with a hair of slack for the tie-breaks.
	hybridCap float64
	bounds    reshardBounds
	// greedy carries the greedy plan (and whether it does without a full
	// rematerialization) from the request's goroutine, posted once (postGreedy).
	greedy chan greedyPlan
	posted bool
}

// greedyPlan is what the side work needs of the greedy plan: the plans (none or one)
// and whether one does without a full rematerialization (it then bounds the search).
type greedyPlan struct {
	plans []*Plan
	ok    bool
}

// requestBounds are r's byte lower bounds: the data some device lacks
// (LowerBoundBetween) and the plan's (lowerBoundWith), r.bounds' when set.
func requestBounds(r *Request) (between, lb int64) {
	if r.bounds != nil {
		return r.bounds.between, r.bounds.lb
	}
	between = LowerBoundBetween(r, r.Source, r.Target)
	return between, lowerBoundWith(r, between)
}

// directCandidates are the plans that need no search, after the reduction pre (start is
// the state before it): the direct all_to_all_v exchange and gather-then-slice, where
// the request allows them; omitted reports an exchange left out for its transfers
// (lateExchange prices it when every plan would rematerialize).
func (sp *space) directCandidates(r *Request, pre []move, start, goal state, reduce []sharding.AxisRef, between int64, greedy bool) (out []*Plan, omitted bool) {
	from := afterOf(pre, start)
	tgt := r.Target
	// The direct exchange is priced by routing its transfers, unless it is a digit map
	// (exchangeInClosedForm: every dim tiled evenly, the atom sizes equal position by
	// position), whose price does not grow with them. When it has more transfers than
	// maxOptionalTransfers (65,536 devices each asking many holders) and another plan
	// without a full rematerialization exists (greedy: the greedy plan is one), it is
	// left out rather than routed; past maxDirectTransfers it is left out whenever
	// gather-then-slice stands in.
	others := r.allowed(OpAllGather) && r.allowed(OpSlice)
	optional := false
	if r.allowed(OpAllToAllV) && sp.canRoute(r) && (greedy || others) && !sp.exchangeInClosedForm(r, from, goal) {
		n := newPattern(sp, from, goal, false, 0).transfersAtMost()
		optional = greedy && n > maxOptionalTransfers || others && n > maxDirectTransfers
	}
	if r.allowed(OpAllToAllV) && (len(reduce) == 0 || len(pre) > 0) && !optional {
		av := &Plan{Request: r, sp: sp}
		var d Step
		if len(pre) == 0 {
			// from is the source: the exchange moves exactly the bound's bytes.
			d = sp.directStepBytes(r, from, goal, tgt.Unreduced, between)
		} else {
			d = sp.directStep(r, from, goal, tgt.Unreduced)
		}
		av.Steps = append(sp.steps(r, pre), d)
		out = append(out, av.named(string(OpAllToAllV)))
	}
	if others {
		gs := &Plan{Request: r, sp: sp}
		gs.Steps = sp.steps(r, append(slices.Clone(pre), sp.gatherThenSlice(from, goal, tgt.Unreduced)...))
		out = append(out, gs.named("gather_then_slice"))
	}
	return out, optional && (len(reduce) == 0 || len(pre) > 0)
}

// allRematerialize reports whether every plan in cands goes through a full
// rematerialization.
func allRematerialize(cands []*Plan) bool {
	for _, c := range cands {
		if c.finishTotals(); !c.Summary.FullRematerialization {
			return false
		}
	}
	return true
}

// lateExchange is the direct all_to_all_v that directCandidates left out for the
// transfers its pattern might have (a loose count), priced now that every other plan
// goes through a full rematerialization: when its exact transfer count is at most
// maxLateTransfers, by routing them, which stops when ctx ends (its error is returned).
// nil when it has more, or when ctx's deadline leaves less than lateTransferCost per
// transfer (a graph plans many reshards under one deadline: the rematerializing plan
// then stands rather than the request failing). A request that allows full
// rematerialization (AllowFullRemat) runs it too: the exchange may be the faster plan.
func (sp *space) lateExchange(ctx context.Context, r *Request, pre []move, start, goal state, between int64) (*Plan, error) {
	from := afterOf(pre, start)
	unr := r.Target.Unreduced
	n := TransferCount(r.Mesh, r.Shape, sp.sharding(from, unr), sp.sharding(goal, unr))
	if n > maxLateTransfers || !sp.acquireRouter(r) {
		return nil, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < time.Duration(n)*lateTransferCost {
		return nil, nil
	}
	bytes := between
	if len(pre) > 0 {
		bytes = -1 // the exchange starts after the reduction
	}
	st := sp.directStepUnpriced(r, from, goal, unr, bytes)
	tr := newPattern(sp, from, goal, false, 0).traffic(cost.AllToAllV)
	each := tr.Each
	tr.Each = func(yield func(from, to []int, bytes int64) bool) {
		n := 0
		each(func(from, to []int, bytes int64) bool {
			if n++; n&(1<<14-1) == 0 && ctx.Err() != nil {
				return false
			}
			return yield(from, to, bytes)
		})
	}
	st.Cost = sp.router.Price(tr).Estimate
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	av := &Plan{Request: r, sp: sp}
	av.Steps = append(sp.steps(r, pre), st)
	return av.named(string(OpAllToAllV)), nil
}

func afterOf(pre []move, start state) state {
	if len(pre) == 0 {
		return start
	}
	return pre[len(pre)-1].after
}

// postGreedy hands the greedy plan to the side work, once (later calls do nothing).
func (w *sideWork) postGreedy(plans []*Plan, ok bool) {
	if !w.posted {
		w.posted = true
		w.greedy <- greedyPlan{plans, ok} // buffered: never blocks
	}
}

// limit waits for the side work and returns its hybridCap, which bounds the hybrids
// of the search's plans: hybridOf leaves out every hybrid that costs more, as no such
// hybrid could be chosen.
func (w *sideWork) limit() float64 {
	w.wait()
	return w.hybridCap
}

// bound waits for the side work and returns its ub, which bounds the exact pass (and
// the greedier pass).
func (w *sideWork) bound() float64 {
	w.wait()
	return w.ub
}

// wait blocks until the side work is done (any number of calls; a panic of the side
// work is raised on the first).
func (w *sideWork) wait() { w.run.wait() }

// startSideWork starts the side work of a request, with the arguments directCandidates
// takes. It prices on a fork of the space (its own router and memos), so the search's
// space is the main goroutine's alone; the candidates then point at sp.
func (sp *space) startSideWork(r *Request, pre []move, start, goal state, reduce []sharding.AxisRef) *sideWork {
	w := &sideWork{ub: math.Inf(1), greedy: make(chan greedyPlan, 1)}
	pre = slices.Clone(pre)
	w.run = goWorker(func() {
		between, lb := requestBounds(r)
		g := <-w.greedy
		fork := sp.fork()
		w.direct, w.omitted = fork.directCandidates(r, pre, start, goal, reduce, between, g.ok)
		w.hybridCap = math.Inf(1)
		for _, c := range w.direct {
			c.finishTotals() // the greedy plan's are (greedyIncumbent), and are read only here
		}
		for _, c := range append(slices.Clone(g.plans), w.direct...) {
			if !c.Summary.FullRematerialization || r.AllowFullRemat {
				w.hybridCap = min(w.hybridCap, c.Summary.TimeUS*(1+1e-9))
			}
		}
		for _, c := range append(slices.Clone(g.plans), w.direct...) {
			if h := fork.hybridOf(r, c, goal, w.hybridCap, false); h != nil {
				h.sp = sp
				w.hybrids = append(w.hybrids, h)
			}
		}
		fork.releaseRouter()
		for _, c := range w.direct {
			c.sp = sp
			if c.finishTotals(); c.Summary.FullRematerialization && !r.AllowFullRemat {
				continue
			}
			t := 0.0
			for _, st := range c.Steps[len(pre):] {
				t += st.Cost.TimeUS
			}
			w.ub = min(w.ub, t)
		}
		if b := r.bounds; b != nil && b.between == between && b.lb == lb {
			w.bounds = *b
		} else {
			t, ok := timeLowerBoundIn(r, fork, between, lb)
			w.bounds = reshardBounds{between: between, lb: lb, time: t, ok: ok}
		}
	})
	return w
}
