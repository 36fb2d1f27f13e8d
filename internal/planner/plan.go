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
const Version = "planner/20"

// Effort is how long a reshard's search looks for a cheaper plan.
type Effort string

// The efforts. EffortThorough runs an anytime pass (the weighted search with every
// move, which goes on after each plan it finds) beside the exact pass; EffortFast
// leaves it out, as the suggestion search does: on testgen.RandomSet (tpu-v5p)
// it plans a median request in about a third of the time, and its plans take 5.0%
// longer to run on geomean (2.4% on h100), up to 2x.
//
// EffortExhaustive searches on, anytime, for as long as its planning budget lets it: the
// structured pass with every structured move whatever the allowed ops, and the complete
// pass generating every permute and exchange on spaces of up to exhaustiveStateLimit
// states (above it, the wide hierarchical family) with budgets exhaustiveScale times
// the default's; it answers when the complete pass proves its plan or when the budget
// ends (DefaultExhaustiveBudget unless Request.PlanningBudget says otherwise).
const (
	EffortThorough   Effort = "thorough"
	EffortFast       Effort = "fast"
	EffortExhaustive Effort = "exhaustive"
)

// DefaultExhaustiveBudget is the planning budget of EffortExhaustive when the request
// names none.
const DefaultExhaustiveBudget = 2 * time.Second

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
	// default), EffortFast or EffortExhaustive.
	Effort Effort
	// PlanningBudget, when positive, bounds the time the structured and complete passes
	// spend: when it ends they answer the best plan found (OptimalityBestFound). It is
	// capped by ctx's deadline (the passes end a tenth of the time left before it).
	PlanningBudget time.Duration
	// now is the clock of the planning budget (nil: time.Now; tests use a fake one).
	now func() time.Time
	// MemoryBudget, when positive, bounds every state of a plan: no device holds a
	// buffer of more bytes at any step (Summary.PeakBytesPerDevice). Reshard answers a
	// *BudgetError when no plan fits.
	MemoryBudget int64
	// Memos keeps what planning computes from the model and the mesh alone for later
	// requests (a server shares one between all its requests). Nil: Reshard and
	// ReshardXLA use a fresh one for the call.
	Memos *Memos

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
	// done is the Done channel of the context the request is planned under (withDone):
	// the routers that price its steps watch it, so a step of billions of transfers
	// stops when the request is abandoned.
	done <-chan struct{}
}

// withDone is r, or a copy of r watching ctx's Done channel when r does not already.
func (r *Request) withDone(ctx context.Context) *Request {
	d := ctx.Done()
	if r.done == d {
		return r
	}
	c := *r
	c.done = d
	return &c
}

// watch makes rt, a router pricing r's steps, stop when r is abandoned, and returns it.
func (r *Request) watch(rt *cost.Router) *cost.Router {
	rt.Watch(r.done)
	return rt
}

// reshardBounds are a reshard's lower bounds: the bytes a device lacks (between), the
// bytes bound with the reduction's share (lb), and the time bound (time; ok false when
// the model has none).
type reshardBounds struct {
	between, lb int64
	time        float64
	ok          bool
}

// withMemos is r, or a copy of r with fresh memos when it has none: a call without
// memos shares what its searches compute among them, and nothing after it.
func (r *Request) withMemos() *Request {
	if r.Memos != nil {
		return r
	}
	c := *r
	c.Memos = &Memos{}
	return &c
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

// DefaultMaxExpansions bounds the number of states the search's exact pass expands;
// its weighted passes take an eighth (the first, or the greedier second) and a
// thirty-second (the anytime second). At 2,000, 2 of testgen.RandomSet's 250 reshards stopped
// at the budget; both finish within 4,000 (about 20 ms each), and the others expand
// the same states as before.
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
	kind     candidateKind
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.MaxExpansions == 0 {
		r.MaxExpansions = DefaultMaxExpansions
	}
	r = r.withMemos().withDone(ctx)
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
			if exactHybrid = fork.hybridOf(r, ep.named(originSearch), goal, side.limit()); exactHybrid != nil {
				exactHybrid.sp = sp
			}
		}
		sp.onFirst = func(fork *space, mv []move) {
			fp := &Plan{Request: r, sp: fork}
			fp.Steps = fork.steps(r, append(slices.Clone(pre), mv...))
			firstMoves = mv
			// Only exchanges priced in closed form: the first-plan hybrids that win are
			// such exchanges, and routing others transfer by transfer costs large meshes
			// planning time for no plan (docs/PERFORMANCE.md, planner tunables).
			fork.closedFormOnly = true
			firstHybrid = fork.hybridOf(r, fp.named(originSearch), goal, side.limit())
			fork.closedFormOnly = false
			if firstHybrid != nil {
				firstHybrid.sp = sp
			}
		}
		sp.onAnytime = func(mv []move) {
			ap := &Plan{Request: r, sp: sp}
			ap.Steps = sp.steps(r, append(slices.Clone(pre), mv...))
			anyMoves, anySteps = mv, ap.Steps
			anyHybrid = sp.hybridOf(r, ap.named(originSearch), goal, side.limit())
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
				hybrids = append(hybrids, sp.hybridOf(r, sc.named(originSearch), goal, side.limit()))
			}
			cands = append(cands, sc.named(originSearch))
		}
		side.wait()
		cands = append(cands, side.direct...)
		if h := bestHybrid(r, cands, append(hybrids, side.hybrids...)); h != nil {
			cands = append(cands, h)
			// A second exchange: the hybrids of the best hybrid, priced in closed form.
			// Two exchanges can beat one by half: dimension-ordered routing puts the
			// direct exchange's crossings on the few lines whose transfers need them,
			// and an exchange to an intermediate sharding spreads the data over more
			// lines first. Routing the second round's exchanges too finds no cheaper plan
			// and costs large meshes planning time (docs/PERFORMANCE.md, planner tunables).
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
	if xp := xlaIncumbent(r); xp != nil {
		cands = append(cands, xp)
	}
	if ch := chainIncumbent(ctx, r, cands); ch != nil {
		cands = append(cands, ch)
	}
	proven := false
	if !r.noComplete {
		if cands, proven, err = passes(ctx, r, cands, bounds.time); err != nil {
			return nil, err
		}
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
	if err := ctx.Err(); err != nil {
		return nil, err // a router may have stopped: the candidates' prices are meaningless
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

// passes runs the structured pass, then the complete pass, over the space of every mesh
// axis, each bounded by the candidates before it: the candidates with their plans, and
// whether the answer is proven (by the complete pass, or under structured ops by the
// structured pass).
//
// Once ctx is done it returns ctx's error: the routers pricing its steps stop then, and
// what they priced is meaningless.
func passes(ctx context.Context, r *Request, cands []*Plan, lowerBound float64) (_ []*Plan, _ bool, err error) {
	defer func() {
		if err == nil {
			err = ctx.Err()
		}
	}()
	cp, ok := passSpace(r)
	if !ok {
		return cands, false, nil
	}
	defer cp.releaseRouter()
	cp.deadline = planningDeadline(ctx, r)
	proven := false
	if countStates(len(cp.atoms), len(r.Shape)) > completeStateLimit {
		// A complete pass that generates every move covers the structured graph.
		sp, sproven, err := structuredPass(ctx, r, cp, cands)
		if err != nil {
			return nil, false, err
		}
		if sp != nil {
			cands = append(cands, sp)
		}
		proven = sproven && structuredOnly(r)
	}
	p, cproven, err := completePassOn(ctx, r, cp, cands, lowerBound)
	if err != nil {
		return nil, false, err
	}
	if p != nil {
		cands = append(cands, p)
	}
	return cands, proven || cproven, nil
}

// xlaIncumbent is strategy xla's plan (xla.go) as a candidate, when the allowed ops
// admit every step of it (nil otherwise): the optimal strategy never answers a plan
// slower than the one XLA's partitioner emits.
func xlaIncumbent(r *Request) *Plan {
	e, err := xlaEmulate(r)
	if err != nil {
		return nil
	}
	p := &Plan{Request: r, sp: e.sp, Steps: e.steps()}
	for _, st := range p.Steps {
		if !r.allowed(st.Op) {
			return nil
		}
	}
	return p.named("xla")
}

// planningDeadline is when the request's passes stop and answer their best plan (zero:
// no planning budget): its budget (EffortExhaustive's default when it names none) from
// now, at most nine tenths of the time left before ctx's deadline.
func planningDeadline(ctx context.Context, r *Request) time.Time {
	budget := r.PlanningBudget
	if budget <= 0 && r.Effort == EffortExhaustive {
		budget = DefaultExhaustiveBudget
	}
	if budget <= 0 {
		return time.Time{}
	}
	now := r.clock()
	d := now.Add(budget)
	if cd, ok := ctx.Deadline(); ok {
		if c := now.Add(cd.Sub(now) * 9 / 10); c.Before(d) {
			d = c
		}
	}
	return d
}

// clock is the request's clock (now, or time.Now).
func (r *Request) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// sameMoves reports whether a and b are the same slice of moves (the search returns the
// anytime pass's plan as it handed it to onAnytime).
func sameMoves(a, b []move) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// named names p (the name candidates carry in Summary.Candidates) and sets its kind
// from it.
func (p *Plan) named(n string) *Plan {
	p.name = n
	switch n {
	case originSearch:
		p.kind = kindSearch
	case "complete", "structured":
		p.kind = kindComplete
	default:
		p.kind = kindOther
	}
	return p
}

// candidateKind is what produced a candidate plan.
type candidateKind uint8

// The kinds hybridOf and the tests tell apart.
const (
	kindOther    candidateKind = iota // greedy, the direct ones, hybrids
	kindSearch                        // the candidate search's plan
	kindComplete                      // the complete or structured pass's plan
)

// originSearch is the name (and the steps' origin) of the candidate search's plan.
const originSearch = "search"
