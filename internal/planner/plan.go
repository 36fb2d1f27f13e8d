package planner

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shardplan/shardplan/internal/collective"
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Version identifies the planner's algorithm and prices; it is part of every cache key.
const Version = "planner/17"

// Effort is how long a reshard's search looks for a cheaper plan.
type Effort string

// The efforts. EffortThorough runs an anytime pass (the weighted search with every
// move, which goes on after each plan it finds) beside the exact pass; EffortFast
// leaves it out, as the suggestion search does: on issue 12's random set (tpu-v5p)
// it plans a median request in about a third of the time, and its plans take 5.0%
// longer to run on geomean (2.4% on h100), up to 2x (BENCHMARKS.md, sessions 12, 14).
const (
	EffortThorough Effort = "thorough"
	EffortFast     Effort = "fast"
)

// Op is a step op of API.md: a local slice or a collective (named by package
// collective).
type Op string

// The step ops.
const (
	OpSlice             Op = "slice"
	OpAllGather            = Op(collective.AllGather)
	OpAllToAll             = Op(collective.AllToAll)
	OpCollectivePermute    = Op(collective.CollectivePermute)
	OpAllToAllV            = Op(collective.AllToAllV)
	OpReduceScatter        = Op(collective.ReduceScatter)
	OpAllReduce            = Op(collective.AllReduce)
)

// AllOps lists every step op.
var AllOps = []Op{OpSlice, OpAllGather, OpAllToAll, OpCollectivePermute, OpAllToAllV, OpReduceScatter, OpAllReduce}

// Strategy names a planning strategy.
type Strategy string

// The strategies.
const (
	Optimal Strategy = "optimal"
	XLA     Strategy = "xla"
)

// Request is one reshard problem. Source and Target are validated shardings of Shape
// on Mesh.
type Request struct {
	Mesh     *sharding.Mesh
	Shape    []int64
	ElemBits int
	Source   sharding.Sharding
	Target   sharding.Sharding
	Model    cost.Model
	// AllowedOps restricts the step ops (nil: all).
	AllowedOps []Op
	// MaxExpansions bounds the search (0: DefaultMaxExpansions).
	MaxExpansions int
	// AllowFullRemat lets a plan that goes through a full rematerialization win when
	// it is the fastest. By default (false) a plan without one wins whatever the times
	// (pickBest), the rule of a CI gate; a caller that does not gate on it can ask for
	// the fastest plan instead.
	AllowFullRemat bool
	// Effort is how long the search looks for a cheaper plan: EffortThorough ("", the
	// default) or EffortFast.
	Effort Effort
	// MemoryBudget, when positive, bounds every state of a plan: no device holds a
	// buffer of more bytes at any step (Summary.PeakBytesPerDevice). Reshard answers a
	// *BudgetError when no plan fits.
	MemoryBudget int64

	// noHeuristic makes the search plain Dijkstra (tests compare it with A*).
	noHeuristic bool
	// noComplete leaves out the complete pass (tests of the candidate search).
	noComplete bool
	// noAnytime leaves out the search's anytime pass: the plan is the exact pass's, or
	// the first weighted pass's when that is cheaper (the suggestion search, which wants
	// a plan's states more than its last percent).
	noAnytime bool
	// fullSearch lifts the goal-directed move restriction (tests measure what it
	// costs).
	fullSearch bool
	// allMoves gives the exact pass the weighted passes' moves too: the single-atom swap
	// and replace permutes and the relaxed fills.
	allMoves bool
	// bounds, when set, are the request's lower bounds already computed (they depend on
	// the mesh, shape, ends and model alone): the suggestion search plans the same
	// reshard again under other allowed ops and prices its chain against them.
	bounds *reshardBounds
}

// reshardBounds are a reshard's lower bounds: the bytes a device lacks (between), the
// bytes bound with the reduction's share (lb), and the time bound (time; ok false when
// the model has none).
type reshardBounds struct {
	between, lb int64
	time        float64
	ok          bool
}

// boundsOf computes r's lower bounds, or returns r.bounds when set.
func boundsOf(r *Request) reshardBounds {
	if r.bounds != nil {
		return *r.bounds
	}
	b := reshardBounds{}
	b.between, b.lb = requestBounds(r)
	b.time, b.ok = timeLowerBound(r, b.between, b.lb)
	return b
}

// maxOptionalTransfers bounds the transfers the planner routes to price the direct
// all_to_all_v candidate when another plan exists.
const maxOptionalTransfers = 1 << 15

// maxDirectTransfers bounds the transfers the planner routes to price the direct
// all_to_all_v candidate when only gather-then-slice (a full rematerialization) would
// stand in for it.
const maxDirectTransfers = 1 << 20

// DefaultMaxExpansions bounds the number of states the search's exact pass expands;
// its weighted passes take an eighth (the first, or the greedier second) and a
// thirty-second (the anytime second). At 2,000, 2 of issue 12's 250 random reshards stopped
// at the budget; both finish within 4,000 (about 20 ms each), and the others expand
// the same states as before (BENCHMARKS.md).
const DefaultMaxExpansions = 4000

// Step is one step of a plan. Field use by op follows API.md.
type Step struct {
	Op               Op
	Dims             []int // slice: the dims sliced
	Dim              int   // all_gather, reduce_scatter, a halo collective_permute; -1 otherwise
	SplitDim         int   // all_to_all; -1 otherwise
	ConcatDim        int   // all_to_all; -1 otherwise
	MeshAxes         []sharding.AxisRef
	Before, After    sharding.Sharding
	LocalShapeBefore []int64
	LocalShapeAfter  []int64
	GroupSize        int
	GroupCount       int
	BytesPerDevice   int64
	Cost             cost.Estimate
	// Halo is set on a collective_permute that exchanges halos (strategy xla on uneven
	// dims; xla_halo.go): Before equals After, Dim is the dim, and the receivers keep
	// what they receive for the next step.
	Halo *Halo
	// NearestHolders is set on an all_to_all_v whose senders are the nearest holders of
	// the data (Transfers' nearest): wherever the source replicates an axis, the holder
	// with the receiver's own coordinates, where by default receivers of the same data
	// ask different holders. The planner prices both and keeps the cheaper.
	NearestHolders bool

	before, after state // atom states (nil for a fallback step built from shardings)
	// origin names where a hybrid's step comes from: the candidate it was kept from, or
	// the op that replaced some of its steps ("": the plan's own).
	origin string
}

// Summary totals a plan.
type Summary struct {
	Strategy                 Strategy
	Collectives              int
	TimeUS                   float64
	BytesPerDevice           int64
	LowerBoundBytesPerDevice int64
	Efficiency               float64
	// TimeLowerBoundUS is the least time any schedule takes on the model's links to move
	// the data (TimeLowerBound; 0 when the model does not describe its links), and
	// TimeEfficiency is TimeLowerBoundUS / TimeUS (1 for a plan that moves nothing).
	TimeLowerBoundUS      float64
	TimeEfficiency        float64
	PeakBytesPerDevice    int64
	FullRematerialization bool
	SearchExpansions      int
	// Optimality is OptimalityProven when the complete pass ended within its budget (no
	// plan is cheaper under the model, the allowed ops, the rematerialization rule and
	// the memory budget), else OptimalityBestFound.
	Optimality Optimality
	Candidates []Candidate
}

// Optimality is a plan's certificate.
type Optimality string

// The certificates.
const (
	OptimalityProven    Optimality = "proven"
	OptimalityBestFound Optimality = "best_found"
)

// Candidate is a plan the planner priced and compared.
type Candidate struct {
	Name           string  `json:"name"`
	Steps          int     `json:"steps"`
	TimeUS         float64 `json:"time_us"`
	BytesPerDevice int64   `json:"bytes_per_device"`
	Chosen         bool    `json:"chosen"`
}

// Plan is a schedule that moves the data from Source to Target.
type Plan struct {
	Request *Request
	Steps   []Step
	Summary Summary

	sp *space
	// searchSp is the space of the request's candidate search (its counters, for tests).
	searchSp *space
	name     string
	// candidates are the plans Reshard compared (tests check every one of them).
	candidates []*Plan
}

// ErrNoPlan is returned when the allowed ops admit no plan.
var ErrNoPlan = errors.New("no plan")

// NoPlanError says which ops would make a plan possible.
type NoPlanError struct{ Need []Op }

func (e *NoPlanError) Error() string {
	names := make([]string, len(e.Need))
	for i, o := range e.Need {
		names[i] = string(o)
	}
	return "no plan uses only the allowed ops; allow one of: " + strings.Join(names, ", ")
}

func (e *NoPlanError) Unwrap() error { return ErrNoPlan }

func (r *Request) allowed(op Op) bool {
	return r.AllowedOps == nil || slices.Contains(r.AllowedOps, op)
}

// Reshard plans the cheapest schedule it can find from r.Source to r.Target. The error
// is a *sharding.FieldError for requests the planner cannot express (target unreduced
// axes the source does not hold as partial sums), a *NoPlanError when AllowedOps admit no
// plan, or ctx's error.
func Reshard(ctx context.Context, r *Request) (*Plan, error) {
	if r.MaxExpansions == 0 {
		r.MaxExpansions = DefaultMaxExpansions
	}
	src, tgt := r.Source, r.Target
	// Unreduced axes: the target may keep some of the source's partial sums (whole axes
	// or sub-axes of them), never add.
	reduce, err := reducedRefs(src, tgt)
	if err != nil {
		return nil, err
	}
	sp, ok := newSpace(r.Mesh, r.Shape, r.ElemBits, src, tgt)
	if sp != nil {
		defer sp.releaseRouter()
		sp.keyFamily(r)
	}
	p := &Plan{Request: r, sp: sp}
	var cands []*Plan
	var side *sideWork // the bounds, the direct candidates and hybrids, beside the search
	if ok {
		start := sp.stateOf(src)
		goal := sp.stateOf(tgt)
		var pre []move
		if len(reduce) > 0 {
			mv, okr := sp.reduction(start, goal, reduce, r)
			if !okr {
				return nil, &NoPlanError{Need: []Op{OpAllReduce, OpReduceScatter}}
			}
			pre = append(pre, mv)
			start = mv.after
		}
		// The side work starts first: the lower bounds it computes (on 65,536 devices up
		// to a quarter of a millisecond) and the wake-up of the core it runs on
		// overlap the greedy plan and the search.
		side = sp.startSideWork(r, pre, start, goal, reduce)
		defer side.run.drop()
		defer side.postGreedy(nil, false) // the side work never waits in vain
		sp.side = side.run
		greedy, ub := sp.greedyIncumbent(r, pre, start, goal)
		cands = append(cands, greedy...)
		side.postGreedy(greedy, !math.IsInf(ub, 1))
		// The exact pass's plan, built and its hybrids priced on its own goroutine, then
		// the first weighted pass's hybrids there too; the anytime pass's, on this one
		// while the exact pass still runs (else after it: as the search's plan, or when
		// it improved on the first pass's plan and the exact plan is the search's).
		// Every one of them is offered: a plan that costs more move by move can still
		// make the better hybrid.
		var exactSteps, anySteps []Step
		var exactHybrid, anyHybrid, firstHybrid *Plan
		var anyMoves, firstMoves []move
		sp.onExact = func(fork *space, mv []move) {
			ep := &Plan{Request: r, sp: fork}
			ep.Steps = fork.steps(r, append(slices.Clone(pre), mv...)) // mv is merged already
			exactSteps = ep.Steps
			if exactHybrid = fork.hybridOf(r, ep.named("search"), goal, side.limit()); exactHybrid != nil {
				exactHybrid.sp = sp
			}
		}
		sp.onFirst = func(fork *space, mv []move) {
			fp := &Plan{Request: r, sp: fork}
			fp.Steps = fork.steps(r, append(slices.Clone(pre), mv...))
			firstMoves = mv
			// Only exchanges priced in closed form: on the random set every first-plan
			// hybrid that wins is one, and routing others transfer by transfer put
			// 100-200 µs on large meshes' median for no plan.
			fork.closedFormOnly = true
			firstHybrid = fork.hybridOf(r, fp.named("search"), goal, side.limit())
			fork.closedFormOnly = false
			if firstHybrid != nil {
				firstHybrid.sp = sp
			}
		}
		sp.onAnytime = func(mv []move) {
			ap := &Plan{Request: r, sp: sp}
			ap.Steps = sp.steps(r, append(slices.Clone(pre), mv...))
			anyMoves, anySteps = mv, ap.Steps
			anyHybrid = sp.hybridOf(r, ap.named("search"), goal, side.limit())
		}
		moves, expansions, found, err := sp.search(ctx, r, start, goal, tgt.Unreduced, ub, func() float64 {
			side.wait()
			return side.ub
		})
		if err != nil {
			return nil, err
		}
		p.Summary.SearchExpansions = expansions
		for i := range pre {
			sp.price(r, &pre[i])
			sp.searchCost += pre[i].est.TimeUS
		}
		var hybrids []*Plan
		if exactHybrid != nil && !sp.searchFromExact {
			hybrids = append(hybrids, exactHybrid)
		}
		if firstHybrid != nil && !sameMoves(firstMoves, moves) {
			hybrids = append(hybrids, firstHybrid) // the anytime pass improved on it
		}
		if found {
			sc := &Plan{Request: r, sp: sp}
			sc.Summary.SearchExpansions = expansions
			switch {
			case sp.searchFromExact:
				sc.Steps = exactSteps
				hybrids = append(hybrids, exactHybrid)
				if anyHybrid != nil { // the anytime pass's plan, dearer or as dear
					hybrids = append(hybrids, anyHybrid)
				}
			case anySteps != nil && sameMoves(moves, anyMoves):
				sc.Steps = anySteps
				hybrids = append(hybrids, anyHybrid)
			default:
				sc.Steps = sp.steps(r, append(pre, moves...))
				hybrids = append(hybrids, sp.hybridOf(r, sc.named("search"), goal, side.limit()))
			}
			cands = append(cands, sc.named("search"))
		}
		side.wait()
		cands = append(cands, side.direct...)
		if h := bestHybrid(r, cands, append(hybrids, side.hybrids...)); h != nil {
			cands = append(cands, h)
			// A second exchange: the hybrids of the best hybrid, priced in closed form.
			// Two exchanges can beat one by half: dimension-ordered routing puts the
			// direct exchange's crossings on the few lines whose transfers need them,
			// and an exchange to an intermediate sharding spreads the data over more
			// lines first (random set: 22 plans faster on tpu-v5p, to 0.73x; reshard
			// 198's two exchanges take half the direct one's time; routing the second
			// round's exchanges too gained nothing more and cost h100 large meshes
			// 10-20%; BENCHMARKS.md, session 14).
			sp.closedFormOnly = true
			h2 := bestHybrid(r, cands, []*Plan{sp.hybridOf(r, h, goal, side.limit())})
			sp.closedFormOnly = false
			if h2 != nil {
				cands = append(cands, h2)
			}
		}
		if side.omitted && allRematerialize(cands) {
			av, err := sp.lateExchange(ctx, r, pre, start, goal, side.bounds.between)
			if err != nil {
				return nil, err
			}
			if av != nil {
				cands = append(cands, av)
			}
		}
	}
	var bounds reshardBounds
	if side != nil {
		bounds = side.bounds
	} else {
		bounds = boundsOf(r) // no side work computed them
		if r.allowed(OpAllToAllV) && len(reduce) == 0 {
			// Refs that fit no common factorisation: only the direct exchange expresses it.
			av := &Plan{Request: r}
			av.Steps = []Step{directFromShardings(r, bounds.between)}
			cands = append(cands, av.named(string(OpAllToAllV)))
		}
	}
	var cp *Plan
	proven := false
	if !r.noComplete {
		if cp, proven, err = completePass(ctx, r, cands); err != nil {
			return nil, err
		}
	}
	if cp != nil {
		cands = append(cands, cp)
	}
	if r.MemoryBudget > 0 {
		cands = withinBudget(cands, r.MemoryBudget)
		if len(cands) == 0 {
			return nil, budgetError(ctx, r)
		}
	}
	if len(cands) == 0 {
		return nil, &NoPlanError{Need: []Op{OpAllToAllV, OpAllGather, OpSlice}}
	}
	best := pickBest(cands, r.AllowFullRemat)
	best.Summary.Optimality = OptimalityBestFound
	if proven {
		best.Summary.Optimality = OptimalityProven
	}
	best.candidates = cands
	best.searchSp = sp
	best.Summary.SearchExpansions = p.Summary.SearchExpansions
	best.finishWith(bounds)
	for _, c := range cands {
		c.finishTotals()
		best.Summary.Candidates = append(best.Summary.Candidates, Candidate{Name: c.name, Steps: len(c.Steps), TimeUS: c.Summary.TimeUS, BytesPerDevice: c.Summary.BytesPerDevice, Chosen: c == best})
	}
	return best, nil
}

// sameMoves reports whether a and b are the same slice of moves (the search returns the
// anytime pass's plan as it handed it to onAnytime).
func sameMoves(a, b []move) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

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
// median request of issue 12's random set) with ub, the cheapest of them without a full
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

// postGreedy hands the greedy plan to the side work, once (later calls do nothing).
func (w *sideWork) postGreedy(plans []*Plan, ok bool) {
	if !w.posted {
		w.posted = true
		w.greedy <- greedyPlan{plans, ok} // buffered: never blocks
	}
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

// limit waits for the side work and returns its hybridCap, which bounds the hybrids
// of the search's plans: hybridOf leaves out every hybrid that costs more, as no such
// hybrid could be chosen.
func (w *sideWork) limit() float64 {
	w.wait()
	return w.hybridCap
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
		if sideWorkHook != nil {
			sideWorkHook()
		}
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
			if h := fork.hybridOf(r, c, goal, w.hybridCap); h != nil {
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

// sideWorkHook, when set (tests), runs first in every side work.
var sideWorkHook func()

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

// maxHybridTransfers bounds the transfers hybridOf routes to price one exchange (its
// digit maps are priced in closed form at any size).
const maxHybridTransfers = 1 << 12

// hybridOf is the cheapest plan that takes the first steps of c and then the direct
// all_to_all_v from where they leave the tensor to goal, or one all_to_all_v that makes
// c's first steps and then c's remaining ones, or c's first steps, one all_to_all_v
// that makes some steps after them and c's remaining ones (a search plan's only),
// priced on sp (nil: none cheaper than both c and limit, or the request does not
// allow the exchange). A search step moves whole tiles the
// structured way (a gather, an all-to-all), and what is left (or what comes before) is
// often a small, scattered move that no one structured collective makes but one
// exchange does: on issue 12's random set 112 of 250 plans got cheaper this way on
// tpu-v5p, to 0.24x, geomean 0.911 (BENCHMARKS.md). No hybrid passes through full
// replication (the ends may be replicated), folds a reduction of partial sums into an
// exchange, or prices an exchange of more than maxHybridTransfers transfers with no
// closed form. Reshard prices the hybrids of its candidates beside the search where it
// can (the greedy plan's and gather-then-slice's in the side work, the exact pass's on
// its goroutine) and bestHybrid keeps the best.
func (sp *space) hybridOf(r *Request, c *Plan, goal state, limit float64) *Plan {
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
	// No hybrid above limit could be chosen. (Until planner/15 a window was also left
	// out when the kept steps plus the model's least latency reached bestT; but an
	// exchange whose every receiver holds its tile already costs nothing, and a gather
	// may leave exactly that: hybridExchange answers a slice then.)
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
		if d, ok := sp.hybridExchange(r, st.after, goal, bestT-t); ok {
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
		if d, ok := sp.hybridExchange(r, from, st.after, bestT-rest); ok {
			keep(append(append(slices.Clone(c.Steps[:i0]), replaced(d)), c.Steps[k+1:]...))
		}
	}
	// Exchange in the middle (planner/15): c's steps before i kept, one exchange in
	// place of steps i..k, the steps after k kept (i past the reductions and past c's
	// first step, k before its last: the two kinds above cover the other windows).
	// Often a free local slice first, so that the exchange moves less, and a gather
	// after it. Only a search plan's windows, and only exchanges priced in closed form:
	// there are quadratically many; on issue 12's random set and large meshes no other
	// candidate's window made a plan faster, and routing the others' exchanges made 6
	// of 534 faster for 5-10% of h100 large meshes' median (BENCHMARKS.md, session 14).
	for i := i0 + 1; i < len(c.Steps)-1 && strings.Contains(c.name, "search"); i++ {
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
			if d, ok := sp.hybridExchange(r, c.Steps[i].before, st.after, bestT-prefix-suffix); ok {
				keep(append(append(slices.Clone(c.Steps[:i]), replaced(d)), c.Steps[k+1:]...))
			}
		}
	}
	return best
}

// hybridExchange is the direct all_to_all_v from before to after when it takes less
// than limit µs and can be priced cheaply: in closed form, or by routing at most
// maxHybridTransfers transfers (ok false otherwise). Where every device holds its
// after tile already (after only appends unused atoms to before's dims), it is the
// local slice instead: an exchange of no transfers would still be a collective to
// launch, which its price (0) would hide.
func (sp *space) hybridExchange(r *Request, before, after state, limit float64) (Step, bool) {
	if sp.sliceOnly(before, after) {
		if limit <= 0 {
			return Step{}, false
		}
		unr := r.Target.Unreduced
		return sp.steps(r, []move{{op: OpSlice, before: before, after: after, unrBefore: unr, unrAfter: unr}})[0], true
	}
	if !sp.exchangeInClosedForm(r, before, after) && (sp.closedFormOnly || newPattern(sp, before, after, false, 0).transfersAtMost() > maxHybridTransfers) {
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

// maxLateTransfers bounds the transfers lateExchange routes: up to about a second of
// routing on a torus (65,536 devices each asking 256 holders), where the alternative is
// a full rematerialization.
const maxLateTransfers = 1 << 24

// lateTransferCost is what lateExchange budgets per transfer against the request's
// deadline: about the most a routed transfer took on a torus (8.7 M in 0.80 s,
// BENCHMARKS.md), twice over.
const lateTransferCost = 200 * time.Nanosecond

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

// pickBest prefers plans without full rematerialization (unless allowRemat), then the
// lowest time, then fewer steps.
func pickBest(cands []*Plan, allowRemat bool) *Plan {
	best := cands[0]
	for _, c := range cands[1:] {
		c.finishTotals()
		best.finishTotals()
		if better(c, best, allowRemat) {
			best = c
		}
	}
	return best
}

func better(a, b *Plan, allowRemat bool) bool {
	if !allowRemat && a.Summary.FullRematerialization != b.Summary.FullRematerialization {
		return !a.Summary.FullRematerialization
	}
	const eps = 1e-9
	if a.Summary.TimeUS < b.Summary.TimeUS-eps {
		return true
	}
	if a.Summary.TimeUS > b.Summary.TimeUS+eps {
		return false
	}
	// At equal time: fewer communication steps (collectives; local slices are free),
	// then standard collectives over collective_permute over all_to_all_v (every
	// backend runs the standard ones, and they are what XLA and Shardy emit), then fewer
	// steps in all.
	if a.Summary.Collectives != b.Summary.Collectives {
		return a.Summary.Collectives < b.Summary.Collectives
	}
	if ar, br := a.p2pRank(), b.p2pRank(); ar != br {
		return ar < br
	}
	if len(a.Steps) != len(b.Steps) {
		return len(a.Steps) < len(b.Steps)
	}
	return a.Summary.BytesPerDevice < b.Summary.BytesPerDevice
}

// p2pRank is 2 when p uses all_to_all_v, 1 when it uses collective_permute, else 0.
func (p *Plan) p2pRank() int {
	rank := 0
	for _, s := range p.Steps {
		switch s.Op {
		case OpAllToAllV:
			return 2
		case OpCollectivePermute:
			rank = 1
		}
	}
	return rank
}

func (p *Plan) named(n string) *Plan { p.name = n; return p }

// finishTotals fills the totals that do not need the lower bound.
func (p *Plan) finishTotals() {
	s := &p.Summary
	s.Strategy = Optimal
	s.Collectives, s.TimeUS, s.BytesPerDevice = 0, 0, 0
	r := p.Request
	srcRep, tgtRep := r.Source.IsFullyReplicated(), r.Target.IsFullyReplicated()
	s.PeakBytesPerDevice = bufferBytes(r, r.Source)
	s.FullRematerialization = false
	for i, st := range p.Steps {
		if st.Op != OpSlice {
			s.Collectives++
		}
		s.TimeUS += st.Cost.TimeUS
		s.BytesPerDevice += st.BytesPerDevice
		s.PeakBytesPerDevice = max(s.PeakBytesPerDevice, bufferBytes(r, st.After))
		if i < len(p.Steps)-1 && !srcRep && !tgtRep && st.After.IsFullyReplicated() && len(r.Shape) > 0 {
			s.FullRematerialization = true
		}
	}
}

// finishWith fills the plan's summary: its totals, and its lower bounds and
// efficiencies from the request's bounds b (boundsOf, or the side work's).
func (p *Plan) finishWith(b reshardBounds) {
	p.finishTotals()
	s := &p.Summary
	s.LowerBoundBytesPerDevice = b.lb
	s.Efficiency = 1
	if s.BytesPerDevice > 0 {
		s.Efficiency = float64(b.lb) / float64(s.BytesPerDevice)
	}
	s.TimeLowerBoundUS = b.time
	s.TimeEfficiency = 1
	if s.TimeUS > 0 {
		s.TimeEfficiency = s.TimeLowerBoundUS / s.TimeUS
	}
}

// bufferBytes is the padded local buffer size of s.
func bufferBytes(r *Request, s sharding.Sharding) int64 {
	n := int64(1)
	for d, c := range s.ShardCounts() {
		n *= sharding.CeilDiv(r.Shape[d], int64(c))
	}
	return sharding.BufferBytes(n, r.ElemBits)
}

func localShape(r *Request, s sharding.Sharding) []int64 {
	out := make([]int64, len(r.Shape))
	for d, c := range s.ShardCounts() {
		out[d] = sharding.CeilDiv(r.Shape[d], int64(c))
	}
	return out
}
