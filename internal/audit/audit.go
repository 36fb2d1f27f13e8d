// Package audit audits a whole program before the compiler sees it: it plans the graph
// (graphplan: propagation, every reshard and reduction), ranks every collective site by
// time, predicts which reshards XLA's SPMD partitioner would fully rematerialize (with
// the sharding constraints that avoid each), and computes a per-device memory timeline
// over the program's op order. It knows nothing of HTTP.
//
//	Request ──graphplan.Plan──▶ collectives ──rank──▶ Sites
//	                    │                  └─ReshardXLA (strategy optimal)─▶ XLA verdicts
//	                    └── shardings ──tiles, liveness──▶ Memory timeline
package audit

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Location is where an op comes from in the user's program.
type Location struct {
	File   string
	Line   int
	OpName string
}

// Request is one program to audit.
type Request struct {
	Graph    *propagation.Graph
	Mesh     *sharding.Mesh
	Options  propagation.Options
	Strategy planner.Strategy
	Model    cost.Model
	// AllowFullRemat, Effort, PlanningBudget and Memos are the reshard planner's
	// (graphplan.Request).
	AllowFullRemat bool
	Effort         planner.Effort
	PlanningBudget time.Duration
	Memos          *planner.Memos
	// Locate gives an op's source location (nil: none known).
	Locate func(op string) Location
	// BudgetBytes is the per-device memory budget (0: none).
	BudgetBytes int64
	// Cores lends the planning of distinct reshards more cores (graphplan.Request.Cores;
	// nil: one at a time).
	Cores func(want int) (int, func())
}

// Site is one collective of the program: a reshard or a reduction, with its plan.
type Site struct {
	*graphplan.Collective
	// Order is the collective's place in the schedule (op order); OpIndex the place of
	// its op in the program's top-level order.
	Order, OpIndex int
	Location       Location
	// XLA is XLA's predicted plan of a reshard (nil for reductions): under strategy xla
	// the site's own, else planned beside it.
	XLA     *planner.Plan
	XLAInfo *planner.XLAInfo
}

// XLARemat reports whether XLA's partitioner would fully rematerialize the site (its
// last-resort path, at the top level or within device groups).
func (s *Site) XLARemat() bool {
	if s.XLAInfo != nil && s.XLAInfo.Fallback {
		return true
	}
	return s.XLA != nil && s.XLA.Summary.FullRematerialization
}

// MemoryPoint is the per-device memory at one op of the program.
type MemoryPoint struct {
	Op    string
	Index int
	// LiveBytes are the tiles of the tensors live at the op (defined at or before it,
	// used at or after it; arguments and results held throughout: the graph's inputs
	// and outputs, or without them the tensors no op defines and those no op uses);
	// TransientBytes the
	// largest buffer its reshards and reductions make while they run (each plan's
	// peak_bytes_per_device; they run one at a time).
	LiveBytes      int64
	TransientBytes int64
}

// Total is the point's bytes.
func (p MemoryPoint) Total() int64 { return p.LiveBytes + p.TransientBytes }

// Memory is the program's per-device memory timeline and its peak.
type Memory struct {
	Timeline           []MemoryPoint
	PeakBytesPerDevice int64
	PeakOp             string
	PeakIndex          int
	// HeldBytes are the arguments' and results' tiles, live throughout.
	HeldBytes int64
	// BudgetBytes (0: none); OverBudget lists the ops whose total exceeds it.
	BudgetBytes int64
	OverBudget  []string
}

// Totals sum the sites.
type Totals struct {
	TimeUS         float64
	BytesPerDevice int64
	Sites          int
	// Top10TimeUS is the time of the ten dearest sites; Top10Share its share of TimeUS
	// (0 when nothing communicates).
	Top10TimeUS float64
	Top10Share  float64
	// FullRematerializations counts the sites whose plan goes through one;
	// XLARemats the reshards XLA would fully rematerialize (their indexes in Sites).
	FullRematerializations int
	XLARemats              []int
}

// Result is the audit of one program.
type Result struct {
	Plan   *graphplan.Result
	Sites  []Site // ranked: dearest first, then schedule order
	Memory Memory
	Totals Totals
}

// Run audits r. Errors are graphplan.Plan's and the reshard planner's.
func Run(ctx context.Context, r *Request) (*Result, error) {
	gp, err := graphplan.Plan(ctx, &graphplan.Request{Graph: r.Graph, Mesh: r.Mesh, Options: r.Options, Strategy: r.Strategy, Model: r.Model, AllowFullRemat: r.AllowFullRemat, Effort: r.Effort, PlanningBudget: r.PlanningBudget, Memos: r.Memos, Cores: r.Cores})
	if err != nil {
		return nil, err
	}
	order, opIndex := programOrder(r.Graph)
	res := &Result{Plan: gp, Sites: make([]Site, len(gp.Collectives))}
	for i := range gp.Collectives {
		c := &gp.Collectives[i]
		s := Site{Collective: c, Order: i, OpIndex: opIndex[c.Op]}
		if r.Locate != nil {
			s.Location = r.Locate(c.Op)
		}
		if c.Kind == graphplan.KindReshard && c.XLA != nil {
			s.XLA, s.XLAInfo = c.Plan, c.XLA
		}
		res.Sites[i] = s
	}
	if r.Strategy != planner.XLA {
		if err := planXLA(ctx, r, res.Sites); err != nil {
			return nil, err
		}
	}
	res.Memory = memory(r, gp, order, opIndex)
	slices.SortStableFunc(res.Sites, func(a, b Site) int {
		if c := cmp.Compare(b.Plan.Summary.TimeUS, a.Plan.Summary.TimeUS); c != 0 {
			return c
		}
		return cmp.Compare(a.Order, b.Order)
	})
	t := &res.Totals
	t.Sites = len(res.Sites)
	for i := range res.Sites {
		s := &res.Sites[i]
		t.TimeUS += s.Plan.Summary.TimeUS
		t.BytesPerDevice += s.Plan.Summary.BytesPerDevice
		if i < 10 {
			t.Top10TimeUS += s.Plan.Summary.TimeUS
		}
		if s.Plan.Summary.FullRematerialization {
			t.FullRematerializations++
		}
		if s.XLARemat() {
			t.XLARemats = append(t.XLARemats, i)
		}
	}
	if t.TimeUS > 0 {
		t.Top10Share = t.Top10TimeUS / t.TimeUS
	}
	return res, nil
}

// xlaKey identifies one reshard problem for XLA's prediction.
func xlaKey(c *graphplan.Collective) string {
	var b strings.Builder
	for _, n := range c.Shape {
		b.WriteString(strconv.FormatInt(n, 10))
		b.WriteByte(',')
	}
	b.WriteString("|" + strconv.Itoa(c.ElemBits) + "|" + c.From.Body() + "|" + c.To.Body())
	return b.String()
}

// planXLA predicts XLA's plan of every distinct reshard (on graphplan.Workers
// goroutines), so that a site planned the optimal way still says whether XLA would
// rematerialize it.
func planXLA(ctx context.Context, r *Request, sites []Site) error {
	type job struct {
		c    *graphplan.Collective
		plan *planner.Plan
		info *planner.XLAInfo
	}
	jobs := map[string]*job{}
	var keys []string
	for i := range sites {
		c := sites[i].Collective
		if c.Kind != graphplan.KindReshard {
			continue
		}
		k := xlaKey(c)
		if _, ok := jobs[k]; !ok {
			jobs[k] = &job{c: c}
			keys = append(keys, k)
		}
	}
	workers, release := graphplan.Workers(r.Cores, len(keys))
	defer release()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, k := range keys {
		if gctx.Err() != nil {
			break
		}
		j := jobs[k]
		g.Go(func() error {
			var err error
			j.plan, j.info, err = planner.ReshardXLA(gctx, &planner.Request{Mesh: r.Mesh, Shape: j.c.Shape, ElemBits: j.c.ElemBits, Source: j.c.From, Target: j.c.To, Model: r.Model, Memos: r.Memos})
			if err != nil {
				// XLA's emulation may not express every reshard the optimal planner can; the
				// site then has no XLA verdict rather than failing the audit.
				j.plan, j.info = nil, nil
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range sites {
		if sites[i].Kind == graphplan.KindReshard {
			j := jobs[xlaKey(sites[i].Collective)]
			sites[i].XLA, sites[i].XLAInfo = j.plan, j.info
		}
	}
	return nil
}

// programOrder orders the graph's top-level ops so that every op comes after the ops
// defining its operands, keeping the given order where it already does (the order of a
// module's text). opIndex maps every op name, those inside while regions included, to
// the place of its top-level op.
func programOrder(g *propagation.Graph) (order []int, opIndex map[string]int) {
	ops := g.Ops
	producer := make(map[string]int, len(ops))
	for i, op := range ops {
		for _, t := range op.Results {
			producer[t] = i
		}
	}
	indeg := make([]int, len(ops))
	users := make([][]int, len(ops))
	for i, op := range ops {
		for _, t := range op.Operands {
			if p, ok := producer[t]; ok && p != i {
				indeg[i]++
				users[p] = append(users[p], i)
			}
		}
	}
	h := &intHeap{}
	for i := range ops {
		if indeg[i] == 0 {
			heap.Push(h, i)
		}
	}
	order = make([]int, 0, len(ops))
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		order = append(order, i)
		for _, u := range users[i] {
			if indeg[u]--; indeg[u] == 0 {
				heap.Push(h, u)
			}
		}
	}
	if len(order) < len(ops) { // a cycle (propagation refuses these): keep the given order
		order = order[:0]
		for i := range ops {
			order = append(order, i)
		}
	}
	opIndex = make(map[string]int, len(ops))
	for k, i := range order {
		markOps(ops[i:i+1], k, opIndex)
	}
	return order, opIndex
}

func markOps(ops []propagation.Op, k int, into map[string]int) {
	for _, op := range ops {
		into[op.Name] = k
		for _, rg := range []*propagation.Region{op.Cond, op.Body} {
			if rg != nil {
				markOps(rg.Ops, k, into)
			}
		}
	}
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TileBytes is one device's buffer of a tensor of shape and elemBits under s (padded:
// ceildiv per dim).
func TileBytes(shape []int64, elemBits int, s sharding.Sharding) int64 {
	n := int64(1)
	counts := s.ShardCounts()
	for d, size := range shape {
		c := int64(1)
		if d < len(counts) {
			c = int64(counts[d])
		}
		n *= sharding.CeilDiv(size, c)
	}
	return sharding.BufferBytes(n, elemBits)
}

// memory computes the timeline over the top-level ops in order.
func memory(r *Request, gp *graphplan.Result, order []int, opIndex map[string]int) Memory {
	g := r.Graph
	n := len(order)
	mem := Memory{BudgetBytes: r.BudgetBytes, Timeline: make([]MemoryPoint, n)}
	if n == 0 {
		return mem
	}
	def := map[string]int{}
	last := map[string]int{}
	for k, i := range order {
		op := &g.Ops[i]
		for _, t := range op.Results {
			if _, ok := def[t]; !ok {
				def[t] = k
			}
			last[t] = max(last[t], k)
		}
		for _, t := range op.Operands {
			last[t] = max(last[t], k)
		}
	}
	// Arguments are the graph's inputs, else the tensors no top-level op defines; results
	// its outputs, else the tensors no top-level op uses.
	inputs, outputs := g.Inputs, g.Outputs
	if len(inputs) == 0 {
		for id := range last {
			if _, ok := def[id]; !ok {
				inputs = append(inputs, id)
			}
		}
	}
	if len(outputs) == 0 {
		used := map[string]bool{}
		for _, i := range order {
			for _, t := range g.Ops[i].Operands {
				used[t] = true
			}
		}
		for id := range def {
			if !used[id] {
				outputs = append(outputs, id)
			}
		}
	}
	held, input := map[string]bool{}, map[string]bool{}
	for _, t := range inputs {
		held[t], input[t] = true, true
	}
	for _, t := range outputs {
		held[t] = true
	}
	diff := make([]int64, n+1)
	shardings := gp.Propagation.Shardings
	tile := func(id string) int64 {
		t := g.Tensors[id]
		if t == nil {
			return 0
		}
		s, ok := shardings[id]
		if !ok {
			s = sharding.Replicated(len(t.Shape))
		}
		return TileBytes(t.Shape, t.ElemBits, s)
	}
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	for _, id := range inputs {
		if _, ok := last[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range slices.Compact(ids) {
		b := tile(id)
		from, to := 0, n-1
		if d, ok := def[id]; ok && !input[id] {
			from = d
		}
		if !held[id] {
			if l, ok := last[id]; ok {
				to = l
			}
		}
		if held[id] {
			mem.HeldBytes += b
		}
		diff[from] += b
		diff[to+1] -= b
	}
	for i := range gp.Collectives {
		c := &gp.Collectives[i]
		k, ok := opIndex[c.Op]
		if !ok {
			continue
		}
		mem.Timeline[k].TransientBytes = max(mem.Timeline[k].TransientBytes, c.Plan.Summary.PeakBytesPerDevice)
	}
	var live int64
	for k, i := range order {
		live += diff[k]
		p := &mem.Timeline[k]
		p.Op, p.Index, p.LiveBytes = g.Ops[i].Name, k, live
		if t := p.Total(); t > mem.PeakBytesPerDevice || k == 0 {
			mem.PeakBytesPerDevice, mem.PeakOp, mem.PeakIndex = t, p.Op, k
		}
		if r.BudgetBytes > 0 && p.Total() > r.BudgetBytes {
			mem.OverBudget = append(mem.OverBudget, p.Op)
		}
	}
	return mem
}
