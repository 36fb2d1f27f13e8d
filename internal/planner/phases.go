package planner

import (
	"context"
	"math"
	"slices"

	"github.com/shardplan/shardplan/internal/sharding"
)

// Reshard's phases (doc.go, Pipeline): problem, incumbents, search, choose. Each takes
// what the one before returned.

// planProblem is a reshard's search space: the atoms of its two ends (sp; nil or !ok when
// two refs of one axis fit no common factorisation), the states start and goal, and the
// reduction of the partial sums the target drops (pre: none or one move; start is the
// state after it).
type planProblem struct {
	sp          *space
	ok          bool
	reduce      []sharding.AxisRef
	pre         []move
	start, goal state
}

// newProblem is r's problem: a *sharding.FieldError when the target keeps partial sums
// the source does not hold (it may keep some of the source's, whole axes or sub-axes of
// them, never add), a *NoPlanError when the allowed ops cannot drop those it must.
func newProblem(r *Request) (*planProblem, error) {
	reduce, err := reducedRefs(r.Source, r.Target)
	if err != nil {
		return nil, err
	}
	sp, ok := reqSpace(r, false, maxPrimeAtoms)
	pb := &planProblem{sp: sp, ok: ok, reduce: reduce}
	if sp != nil {
		sp.keyFamily(r)
		sp.done = r.done
	}
	if !ok {
		return pb, nil
	}
	pb.start, pb.goal = sp.stateOf(r.Source), sp.stateOf(r.Target)
	if len(reduce) > 0 {
		mv, okr := sp.reduction(pb.start, pb.goal, reduce, r)
		if !okr {
			pb.release()
			return nil, &NoPlanError{Need: []Op{OpAllReduce, OpReduceScatter}}
		}
		pb.pre, pb.start = []move{mv}, mv.after
	}
	return pb, nil
}

// release returns the problem's router.
func (pb *planProblem) release() {
	if pb.sp != nil {
		pb.sp.releaseRouter()
	}
}

// incumbents are the plans that need no search, by producer. The greedy plan (ub: its
// cost as the search counts it, +Inf when it cannot bound the search) bounds the
// candidate search; the side work prices the direct candidates, their hybrids and the
// bounds beside it (without a search space, direct holds the one exchange between the
// shardings and bounds the bounds); others join the candidates after the search's plans
// and bound the structured and complete passes.
type incumbents struct {
	greedy []*Plan
	ub     float64
	side   *sideWork
	direct []*Plan
	bounds reshardBounds
	others []*Plan
}

// incumbents runs the producers of pb's incumbents. One more producer is one more
// entry of others.
func (pb *planProblem) incumbents(r *Request) *incumbents {
	in := &incumbents{ub: math.Inf(1)}
	if pb.ok {
		// The side work starts first: the lower bounds it computes (on 65,536 devices up
		// to a quarter of a millisecond) and the wake-up of the core it runs on overlap
		// the greedy plan and the search.
		in.side = pb.sp.startSideWork(r, pb.pre, pb.start, pb.goal, pb.reduce)
		defer in.side.postGreedy(nil, false) // the side work never waits in vain
		in.greedy, in.ub = pb.sp.greedyIncumbent(r, pb.pre, pb.start, pb.goal)
		in.side.postGreedy(in.greedy, !math.IsInf(in.ub, 1))
	} else {
		in.bounds = boundsOf(r)
		in.direct = exchangeBetweenShardings(r, pb.reduce, in.bounds.between)
	}
	in.others = present(
		xlaIncumbent(r),
	)
	return in
}

// release gives up the side work (a request that ends early leaves nothing running).
func (in *incumbents) release() {
	if in.side != nil {
		in.side.postGreedy(nil, false)
		in.side.run.drop()
	}
}

// directs waits for the side work and returns the direct candidates and the bounds.
func (in *incumbents) directs() ([]*Plan, reshardBounds) {
	if in.side == nil {
		return in.direct, in.bounds
	}
	in.side.wait()
	return in.side.direct, in.side.bounds
}

// present is the plans that are not nil.
func present(plans ...*Plan) []*Plan {
	return slices.DeleteFunc(plans, func(p *Plan) bool { return p == nil })
}

// exchangeBetweenShardings is the direct exchange for refs that fit no common
// factorisation (only it expresses the reshard), when allowed and nothing is reduced.
func exchangeBetweenShardings(r *Request, reduce []sharding.AxisRef, between int64) []*Plan {
	if !r.allowed(OpAllToAllV) || len(reduce) > 0 {
		return nil
	}
	av := &Plan{Request: r}
	av.Steps = []Step{directFromShardings(r, between)}
	return []*Plan{av.named(string(OpAllToAllV))}
}

// searched is what the search phase found: the candidates in the order pickBest sees
// them, whether the answer is proven, the request's bounds, and the candidate search's
// counters.
type searched struct {
	cands  []*Plan
	proven bool
	bounds reshardBounds
	stats  searchStats
}

// search is the search phase: the candidate search bounded by the greedy plan, the
// hybrids of every plan and the late exchange, then the incumbents' others, then the
// chain candidate (chainincumbent.go) and the structured and complete passes, each
// bounded by all of them.
func (pb *planProblem) search(ctx context.Context, r *Request, in *incumbents) (searched, error) {
	out := searched{cands: slices.Clone(in.greedy)}
	var hybrids []*Plan
	if pb.ok {
		mk := &searchPlans{r: r, pre: pb.pre, goal: pb.goal, side: in.side}
		s, err := pb.sp.search(ctx, r, pb.start, pb.goal, r.Target.Unreduced, in.ub, mk)
		if err != nil {
			return out, err
		}
		out.stats, hybrids = s.stats, append(s.hybrids, in.side.hybrids...)
		out.cands = append(out.cands, present(s.plan)...)
	}
	direct, bounds := in.directs()
	out.cands, out.bounds = append(out.cands, direct...), bounds
	if pb.ok {
		var err error
		if out.cands, err = pb.exchanges(ctx, r, in.side, out.cands, hybrids); err != nil {
			return out, err
		}
	}
	out.cands = append(out.cands, in.others...)
	out.cands = append(out.cands, present(chainIncumbent(ctx, r, out.cands))...)
	if r.noComplete {
		return out, nil
	}
	var err error
	out.cands, out.proven, err = passes(ctx, r, out.cands, out.bounds.time)
	return out, err
}

// exchanges adds to cands the best of hybrids when it beats them, then the best of its
// own hybrids priced in closed form (a second exchange), then, when the side work left
// the direct exchange out for its transfers and every plan rematerializes, that
// exchange (lateExchange).
func (pb *planProblem) exchanges(ctx context.Context, r *Request, side *sideWork, cands, hybrids []*Plan) ([]*Plan, error) {
	if h := bestHybrid(r, cands, hybrids); h != nil {
		cands = append(cands, h)
		// A second exchange: the hybrids of the best hybrid, priced in closed form.
		// Two exchanges can beat one by half: dimension-ordered routing puts the
		// direct exchange's crossings on the few lines whose transfers need them,
		// and an exchange to an intermediate sharding spreads the data over more
		// lines first. Routing the second round's exchanges too finds no cheaper plan
		// and costs large meshes planning time (docs/PERFORMANCE.md, planner tunables).
		if h2 := bestHybrid(r, cands, []*Plan{pb.sp.hybridOf(r, h, pb.goal, side.limit(), true)}); h2 != nil {
			cands = append(cands, h2)
		}
	}
	if !side.omitted || !allRematerialize(cands) {
		return cands, nil
	}
	av, err := pb.sp.lateExchange(ctx, r, pb.pre, pb.start, pb.goal, side.bounds.between)
	return append(cands, present(av)...), err
}
