package planner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/shardplan/shardplan/internal/collective"
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Version identifies the planner's algorithm and prices; it is part of every cache key.
const Version = "planner/22"

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
	// PlanningBudget, when positive, bounds the request's planning from Reshard's start:
	// when it ends, the exhaustive chain phase and the structured and complete passes
	// answer the best plan found (OptimalityBestFound). It is capped by ctx's deadline
	// (they end a tenth of the time left before it).
	PlanningBudget time.Duration
	// now is the clock of the planning budget (nil: time.Now; tests use a fake one).
	now func() time.Time
	// until is when every phase of the request stops and answers its best plan (zero:
	// no planning budget), set once when Reshard starts (planningDeadline); the plans a
	// phase makes for parts of the request inherit it.
	until time.Time
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
	// search is the request's candidate search's counters (tests read them).
	search searchStats
	name   string
	kind   candidateKind
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
	r = r.withMemos().withDone(ctx).withPlanningDeadline(ctx)
	// Problem: the atoms of the two ends, their states, and the reduction of the partial
	// sums the target drops.
	pb, err := newProblem(r)
	if err != nil {
		return nil, err
	}
	defer pb.release()
	// Incumbents: the plans that need no search (the greedy plan bounds the search; the
	// direct candidates are priced beside it).
	in := pb.incumbents(r)
	defer in.release()
	// Search: the candidate search and the hybrids of every plan, then the structured and
	// complete passes, each bounded by the plans before it.
	found, err := pb.search(ctx, r, in)
	if err != nil {
		return nil, err
	}
	// Choose: the plan pickBest prefers among those within the memory budget.
	return choose(ctx, r, found)
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
	cp.deadline = r.until
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
	if cp.deadlineHit {
		// A pass stopped at the planning deadline: the other's proof covers less than the
		// answer claims.
		return cands, false, nil
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

// withPlanningDeadline is r with its planning deadline set, when it has none yet: one
// deadline for every phase, so the budget bounds the whole request.
func (r *Request) withPlanningDeadline(ctx context.Context) *Request {
	if !r.until.IsZero() {
		return r
	}
	d := planningDeadline(ctx, r)
	if d.IsZero() {
		return r
	}
	c := *r
	c.until = d
	return &c
}

// clock is the request's clock (now, or time.Now).
func (r *Request) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// sameMoves reports whether a and b are the same slice of moves (the search returns the
// anytime pass's plan as it priced it, searchPlans.offer).
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
