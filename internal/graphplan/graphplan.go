// Package graphplan plans a whole op graph: it runs sharding propagation, plans every
// reshard and reduction the propagated shardings need (each distinct one once, in
// parallel), and orders the collectives as the ops need them. It knows nothing of HTTP:
// the api package decodes a request into a Request and renders the Result.
package graphplan

import (
	"context"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Request is one graph to plan.
type Request struct {
	Graph    *propagation.Graph
	Mesh     *sharding.Mesh
	Options  propagation.Options
	Strategy planner.Strategy // planner.XLA predicts XLA's reshards; reductions are always planned optimally
	Model    cost.Model
	// AllowFullRemat lets the fastest plan of a reshard win even when it goes through a
	// full rematerialization (planner.Request.AllowFullRemat; optimal strategy).
	AllowFullRemat bool
	// Effort is every reshard's search effort (planner.Request.Effort).
	Effort planner.Effort
	// PlanningBudget is each distinct reshard's planning budget (planner.Request.
	// PlanningBudget; 0: none, or planner.DefaultExhaustiveBudget under
	// EffortExhaustive). Under a context deadline each reshard gets at most its share of
	// the time left (shareBudget), so a graph of many reshards answers before it.
	PlanningBudget time.Duration
	// Memos are every reshard's planner memos (planner.Request.Memos; nil: each
	// reshard its own).
	Memos *planner.Memos
	// Cores lends the planning of distinct reshards cores beyond the caller's one: it
	// takes up to want more without waiting and returns how many it took (0..want) and
	// a func giving them back (called once). Nil: the reshards are planned one at a
	// time, on the caller's core. A server charges what it lends against its compute
	// slots, so a graph computes on as many cores as the slots it holds.
	Cores func(want int) (int, func())
}

// Workers is how many reshards Plan plans at once: one, plus what cores lends of the
// want more that would help (nil cores: none). Give the cores back with the func.
func Workers(cores func(want int) (int, func()), jobs int) (int, func()) {
	want := min(jobs, runtime.GOMAXPROCS(0)) - 1
	if cores == nil || want <= 0 {
		return 1, func() {}
	}
	n, release := cores(want)
	return 1 + min(max(n, 0), want), release
}

// Kind says why a collective is there.
type Kind string

// The kinds of collective.
const (
	KindReshard   Kind = "reshard"   // an operand or result moves to the sharding its op needs
	KindReduction Kind = "reduction" // a sharded contracting factor leaves partial sums
)

// Collective is one planned collective of the graph.
type Collective struct {
	Op, Tensor string
	Kind       Kind
	// Reduction, Axes and Dim describe a reduction (Dim for a reduce_scatter, else -1).
	Reduction string
	Axes      []sharding.AxisRef
	Dim       int
	Shape     []int64
	ElemBits  int
	From, To  sharding.Sharding
	Plan      *planner.Plan
	XLA       *planner.XLAInfo // strategy xla, reshards only
}

// Summary totals the graph's collectives (no overlap assumed).
type Summary struct {
	TimeUS                float64
	Collectives           int // communicating steps
	BytesPerDevice        int64
	Reshards, Reductions  int
	UniquePlans           int // distinct problems planned
	FullRematerialization bool
	XLAFallback           bool
}

// Result is the propagation and the collectives in the order the ops need them: per op,
// operand reductions, operand reshards, result reductions, result reshards.
type Result struct {
	Propagation *propagation.Result
	Collectives []Collective
	Summary     Summary
}

// problem identifies one reshard (or reduction) to plan; equal problems in a graph
// (every layer of a transformer) are planned once.
type problem struct {
	shape    []int64
	bits     int
	from, to sharding.Sharding
	strategy planner.Strategy
	// op and tensor name the first collective that needs this plan (for errors).
	op, tensor string
}

// key is "[8 128 512]|16|<from body>|<to body>|optimal".
func (p problem) key() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, n := range p.shape {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(n, 10))
	}
	b.WriteString("]|")
	b.WriteString(strconv.Itoa(p.bits))
	b.WriteByte('|')
	b.WriteString(p.from.Body())
	b.WriteByte('|')
	b.WriteString(p.to.Body())
	b.WriteByte('|')
	b.WriteString(string(p.strategy))
	return b.String()
}

type planned struct {
	plan *planner.Plan
	info *planner.XLAInfo
}

// Plan propagates, then plans every reshard and reduction. Errors are propagation's, the
// context's, or a *sharding.FieldError naming tensors.<id>.sharding for a reshard the
// planner cannot express.
func Plan(ctx context.Context, r *Request) (*Result, error) {
	res, err := propagation.Propagate(ctx, r.Graph, r.Mesh, r.Options)
	if err != nil {
		return nil, err
	}
	m := r.Mesh
	type item struct {
		order   int
		coll    Collective
		problem string
	}
	opOrder := make(map[string]int, len(res.Ops))
	for i, o := range res.Ops {
		opOrder[o.Op] = i
	}
	results := resultTensors(r.Graph.Ops, make(map[string][]string, len(res.Ops)))
	phase := func(op, tensor string, reduction bool) int {
		p := 1
		if reduction {
			p = 0
		}
		if slices.Contains(results[op], tensor) {
			p += 2
		}
		return opOrder[op]*4 + p
	}
	strategy := planner.Optimal
	if r.Strategy == planner.XLA {
		strategy = planner.XLA
	}
	problems := map[string]problem{}
	var items []item
	add := func(pr problem, order int, c Collective) {
		k := pr.key()
		if _, ok := problems[k]; !ok {
			problems[k] = pr
		}
		c.Shape, c.ElemBits, c.From, c.To = pr.shape, pr.bits, pr.from, pr.to
		items = append(items, item{order: order, problem: k, coll: c})
	}
	for _, rs := range res.Reshards {
		t := r.Graph.Tensors[rs.Tensor]
		if slices.Contains(t.Shape, 0) {
			continue
		}
		pr := problem{shape: t.Shape, bits: t.ElemBits, from: canonical(rs.From, m), to: canonical(rs.To, m), strategy: strategy, op: rs.Op, tensor: rs.Tensor}
		add(pr, phase(rs.Op, rs.Tensor, false), Collective{Op: rs.Op, Tensor: rs.Tensor, Kind: KindReshard, Dim: -1})
	}
	for _, rd := range res.Reductions {
		t := r.Graph.Tensors[rd.Tensor]
		if slices.Contains(t.Shape, 0) {
			continue
		}
		// Reductions are emitted by the partitioner with the op, not by XLA's reshard
		// dispatch: they are always planned the optimal way.
		pr := problem{shape: t.Shape, bits: t.ElemBits, from: canonical(rd.From, m), to: canonical(rd.To, m), strategy: planner.Optimal, op: rd.Op, tensor: rd.Tensor}
		c := Collective{Op: rd.Op, Tensor: rd.Tensor, Kind: KindReduction, Reduction: rd.Kind, Axes: rd.Axes, Dim: -1}
		if rd.Kind == propagation.ReduceScatter {
			c.Dim = rd.Dim
		}
		add(pr, phase(rd.Op, rd.Tensor, true), c)
	}
	plans, err := planAll(ctx, r, problems)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].order < items[b].order })
	out := &Result{Propagation: res, Collectives: make([]Collective, 0, len(items))}
	out.Summary.UniquePlans = len(problems)
	for _, it := range items {
		c := it.coll
		pp := plans[it.problem]
		c.Plan, c.XLA = pp.plan, pp.info
		s := &out.Summary
		sum := pp.plan.Summary
		s.TimeUS += sum.TimeUS
		s.Collectives += sum.Collectives
		s.BytesPerDevice += sum.BytesPerDevice
		s.FullRematerialization = s.FullRematerialization || sum.FullRematerialization
		if c.Kind == KindReshard {
			s.Reshards++
			s.XLAFallback = s.XLAFallback || (pp.info != nil && pp.info.Fallback)
		} else {
			s.Reductions++
		}
		out.Collectives = append(out.Collectives, c)
	}
	return out, nil
}

// planAll plans every distinct problem, on as many goroutines as Workers gives. Once ctx
// is done it starts no more and returns ctx's error.
func planAll(ctx context.Context, r *Request, problems map[string]problem) (map[string]planned, error) {
	keys := make([]string, 0, len(problems))
	for k := range problems {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]planned, len(keys))
	workers, release := Workers(r.Cores, len(keys))
	defer release()
	end, hasEnd := planningEnd(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i, k := range keys {
		if gctx.Err() != nil {
			break // the error is g.Wait's or ctx's
		}
		g.Go(func() error {
			pr := problems[k]
			req := &planner.Request{Mesh: r.Mesh, Shape: pr.shape, ElemBits: pr.bits, Source: pr.from, Target: pr.to, Model: r.Model, AllowFullRemat: r.AllowFullRemat, Effort: r.Effort, Memos: r.Memos}
			if pr.strategy == planner.Optimal {
				req.PlanningBudget = shareBudget(r.budget(), time.Until(end), hasEnd, len(keys)-i, workers)
			}
			var err error
			out[i].plan, out[i].info, err = planner.ReshardWith(gctx, pr.strategy, req)
			if _, ok := sharding.AsFieldErrors(err); ok {
				// The planner names request fields ("target"); here the request is the graph.
				return sharding.Fieldf("tensors."+pr.tensor+".sharding", "op %q needs %q moved from %s to %s, which cannot be planned: %v", pr.op, pr.tensor, pr.from.Body(), pr.to.Body(), err)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := make(map[string]planned, len(keys))
	for i, k := range keys {
		m[k] = out[i]
	}
	return m, nil
}

// graphShare is the part of the time left before a graph's deadline its reshards'
// planning budgets share; the rest is for the steps a budget does not bound and for
// rendering the answer.
const graphShare = 0.8

// budget is each reshard's planning budget before sharing: the request's, or
// EffortExhaustive's default (0: none).
func (r *Request) budget() time.Duration {
	if r.PlanningBudget <= 0 && r.Effort == planner.EffortExhaustive {
		return planner.DefaultExhaustiveBudget
	}
	return r.PlanningBudget
}

// planningEnd is when a graph's reshards' planning budgets end: graphShare of the time
// left before ctx's deadline from now; false when ctx has no deadline.
func planningEnd(ctx context.Context) (time.Time, bool) {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, false
	}
	now := time.Now()
	return now.Add(time.Duration(float64(d.Sub(now)) * graphShare)), true
}

// shareBudget is the planning budget of a reshard started with pending reshards (itself
// included) not yet started on workers workers, left before the graph's planning end:
// budget, at most left over the rounds the pending reshards take (at least 1ns, so a
// budget stays a budget). Reshards that each spend their whole share end together at
// the planning end. Without a budget, or without an end, it is budget.
func shareBudget(budget, left time.Duration, hasEnd bool, pending, workers int) time.Duration {
	if budget <= 0 || !hasEnd {
		return budget
	}
	workers = max(workers, 1)
	rounds := (max(pending, 1) + workers - 1) / workers
	return max(min(budget, left/time.Duration(rounds)), 1)
}

// resultTensors maps each op name to the tensors it produces, regions included.
func resultTensors(ops []propagation.Op, out map[string][]string) map[string][]string {
	for _, op := range ops {
		out[op.Name] = op.Results
		for _, rg := range []*propagation.Region{op.Cond, op.Body} {
			if rg != nil {
				resultTensors(rg.Ops, out)
			}
		}
	}
	return out
}

func canonical(s sharding.Sharding, m *sharding.Mesh) sharding.Sharding {
	c := s.Clone()
	c.Canonicalize(m)
	return c
}
