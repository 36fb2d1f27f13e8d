package transfer

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/shardplan/shardplan/internal/fielderr"
)

// Result is a planned transfer.
type Result struct {
	Strategy string
	Why      string
	TimeUS   float64
	Bound    Bound
	Buckets  int
	// BucketBytes is one bucket's share of the tensors' bytes.
	BucketBytes  int64
	NetworkBytes int64
	NVLinkBytes  int64
	// PeakBytesPerDevice is the most any device holds: its source and target tiles
	// plus two buckets of what it sends and receives; PeakDevice is that device.
	PeakBytesPerDevice int64
	PeakDevice         int
	ResidentBytes      int64 // the most any device holds of source and target tiles
	Candidates         []Candidate
	Phases             []Phase
	Classes            []ClassResult
	TensorCount        int
	TensorBytes        int64
	MoveCount          int
	Order              []int // replicas in relay order (chain, tree)
}

// Candidate is one strategy priced over the whole request.
type Candidate struct {
	Name         string
	TimeUS       float64
	NetworkBytes int64
	Buckets      int
	Chosen       bool
	Note         string // why it was not priced, when it was not
}

// Phase is one pipeline stage of the chosen plan, over every tensor.
type Phase struct {
	Ops          []string
	Link         string // "ib" when some move crosses the network, else "nvlink"
	NetworkBytes int64
	NVLinkBytes  int64
	BandwidthUS  float64 // all buckets
	LatencyUS    float64 // per bucket
	MaxPeers     int
	Binding      string
}

// ClassResult is the tensors of one shape, dtype and sharding pair.
type ClassResult struct {
	Tensors  []int // indices into Problem.Tensors
	Count    int
	Bytes    int64 // one tensor's bytes
	Strategy string
	// TimeUS and Bound are one tensor of the class moved alone.
	TimeUS float64
	Bound  Bound
	Moves  []Move // the chosen strategy's moves for one tensor
	Cells  int
}

// Error of a memory budget no plan fits.
type BudgetError struct {
	Budget    int64
	MinBudget int64
	Resident  int64
}

func (e *BudgetError) Error() string {
	if e.Resident > e.Budget {
		return fmt.Sprintf("the source and target tiles alone take %d bytes on some device, over the budget of %d", e.Resident, e.Budget)
	}
	return fmt.Sprintf("no bucket size fits %d bytes per device; the least budget that admits a plan is %d", e.Budget, e.MinBudget)
}

// Plan plans p. It stops when ctx ends. Errors: field errors (a limit), *BudgetError,
// ctx's error.
func Plan(ctx context.Context, p *Problem) (*Result, error) {
	classes := p.classes()
	for _, c := range classes {
		if err := c.build(ctx, p, p.Tensors[c.tensors[0]].Field); err != nil {
			return nil, err
		}
	}
	res := &Result{}
	resident := make([]float64, p.Devices)
	total := 0.0
	for _, c := range classes {
		w := float64(c.count)
		b := c.bytesOf(elements(c.shape))
		total += b * w
		res.TensorCount += c.count
		for _, d := range p.Source.Devices {
			resident[d] += float64(c.srcTile) * w
		}
		for _, t := range p.Targets {
			for _, d := range t.Devices {
				resident[d] += float64(c.dstTile) * w
			}
		}
	}
	res.TensorBytes = int64(total + 0.5)
	for _, v := range resident {
		res.ResidentBytes = max(res.ResidentBytes, int64(v+0.5))
	}
	if p.MemoryBudget > 0 && res.ResidentBytes > p.MemoryBudget {
		return nil, &BudgetError{Budget: p.MemoryBudget, MinBudget: res.ResidentBytes, Resident: res.ResidentBytes}
	}
	// The bound.
	bl := newBoundLoads(p)
	for _, c := range classes {
		bl.add(p.Fabric, c, float64(c.count))
	}
	res.Bound = bl.bound(p)

	pl := &planner{p: p, classes: classes, resident: resident, total: total}
	pl.order = pl.relayOrder()
	res.Order = pl.order
	maxB := p.MaxBuckets
	if maxB <= 0 {
		maxB = DefaultMaxBuckets
	}
	pl.maxBuckets = maxB
	// Each strategy for every class.
	perClass := make([]map[string][]move, len(classes))
	for i := range classes {
		perClass[i] = map[string][]move{}
	}
	moveBudget := p.MaxMoves
	if moveBudget <= 0 {
		moveBudget = DefaultMaxMoves
	}
	strategies := Strategies
	if p.Strategy != "" && p.Strategy != "auto" {
		strategies = []string{p.Strategy}
		if p.Strategy == "mixed" {
			strategies = Strategies
		}
	}
	for _, s := range strategies {
		if s == "mixed" {
			continue
		}
		if (s == "chain" || s == "tree") && len(p.Targets) < 2 {
			continue
		}
		for i, c := range classes {
			mv, err := pl.moves(ctx, c, s)
			if err != nil {
				return nil, err
			}
			if moveBudget -= len(mv); moveBudget < 0 {
				return nil, fielderr.New("tensors", "the plan needs more than %d moves (%s); move fewer tensors or devices per request", max(p.MaxMoves, DefaultMaxMoves), s)
			}
			perClass[i][s] = mv
		}
	}
	// Standalone prices per class (one tensor), for per-tensor figures and mixed.
	alone := make([]map[string]priced, len(classes))
	for i, c := range classes {
		alone[i] = map[string]priced{}
		for s, mv := range perClass[i] {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			l := newLoads(p.Devices)
			l.add(p.Fabric, c, mv, float64(c.count), opOf(s))
			pr, _ := price(p.Fabric, l, resident, c.bytesOf(elements(c.shape))*float64(c.count), 0, maxB)
			alone[i][s] = pr
		}
	}
	// Candidates over the whole request.
	var best *priced
	bestName := ""
	var bestLoads *loads
	choice := make([]string, len(classes))
	minPeak := math.Inf(1)
	for _, s := range Strategies {
		if !slices.Contains(strategies, s) {
			continue
		}
		l := newLoads(p.Devices)
		picks := make([]string, len(classes))
		ok := true
		for i, c := range classes {
			name := s
			if s == "mixed" {
				name = cheapest(alone[i])
			}
			mv, have := perClass[i][name]
			if !have {
				ok = false
				break
			}
			picks[i] = name
			l.add(p.Fabric, c, mv, float64(c.count), opOf(name))
		}
		if !ok {
			res.Candidates = append(res.Candidates, Candidate{Name: s, Note: "needs two or more target replicas"})
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pr, fits := price(p.Fabric, l, resident, total, p.MemoryBudget, maxB)
		minPeak = min(minPeak, pr.minPeak)
		cand := Candidate{Name: s, TimeUS: pr.timeUS, NetworkBytes: int64(pr.netBytes + 0.5), Buckets: pr.buckets}
		if !fits {
			cand.Note = fmt.Sprintf("needs %d bytes per device at its smallest bucket", int64(pr.minPeak+0.5))
			cand.TimeUS = 0
			res.Candidates = append(res.Candidates, cand)
			continue
		}
		res.Candidates = append(res.Candidates, cand)
		if best == nil || pr.timeUS < best.timeUS-1e-9 {
			prc := pr
			best, bestName, bestLoads = &prc, s, l
			copy(choice, picks)
		}
	}
	if best == nil {
		if p.MemoryBudget > 0 {
			return nil, &BudgetError{Budget: p.MemoryBudget, MinBudget: int64(math.Ceil(minPeak)), Resident: res.ResidentBytes}
		}
		return nil, fielderr.New("strategy", "strategy %q needs two or more target replicas", p.Strategy)
	}
	for i := range res.Candidates {
		res.Candidates[i].Chosen = res.Candidates[i].Name == bestName
	}
	res.Strategy = bestName
	res.TimeUS = best.timeUS
	res.Buckets = best.buckets
	res.BucketBytes = int64(math.Ceil(total / float64(best.buckets)))
	res.NetworkBytes = int64(best.netBytes + 0.5)
	res.NVLinkBytes = int64(best.nvBytes + 0.5)
	res.PeakBytesPerDevice = int64(math.Ceil(best.peak))
	res.PeakDevice = best.peakDev
	for j, pc := range best.phases {
		ph := Phase{Link: "nvlink", NetworkBytes: int64(pc.netBytes + 0.5), NVLinkBytes: int64(pc.nvBytes + 0.5),
			BandwidthUS: pc.bw, LatencyUS: pc.lat, MaxPeers: pc.peers, Binding: pc.bound}
		if pc.network {
			ph.Link = "ib"
		}
		for op := range bestLoads.phases[j].ops {
			ph.Ops = append(ph.Ops, op)
		}
		slices.Sort(ph.Ops)
		res.Phases = append(res.Phases, ph)
	}
	for i, c := range classes {
		mv := perClass[i][choice[i]]
		res.MoveCount += len(mv) * c.count
		cr := ClassResult{Tensors: c.tensors, Count: c.count, Bytes: int64(c.bytesOf(elements(c.shape)) + 0.5), Strategy: choice[i], Cells: len(c.cells)}
		one := newLoads(p.Devices)
		one.add(p.Fabric, c, mv, 1, opOf(choice[i]))
		pr, _ := price(p.Fabric, one, resident, c.bytesOf(elements(c.shape)), 0, maxB)
		cr.TimeUS = pr.timeUS
		b1 := newBoundLoads(p)
		b1.add(p.Fabric, c, 1)
		cr.Bound = b1.bound(p)
		cr.Moves = make([]Move, len(mv))
		for k, m := range mv {
			cr.Moves[k] = c.written(m)
		}
		res.Classes = append(res.Classes, cr)
	}
	res.Why = pl.why(res)
	return res, nil
}

// planner holds what every strategy shares.
type planner struct {
	p          *Problem
	classes    []*class
	resident   []float64
	total      float64
	order      []int
	maxBuckets int
}

func (pl *planner) moves(ctx context.Context, c *class, s string) ([]move, error) {
	b := newBuilder(pl.p, c)
	var err error
	switch s {
	case "direct":
		err = b.direct(ctx)
	case "fanout":
		err = b.fanout(ctx)
	case "chain", "tree":
		b.order = pl.order
		b.rank = make([]int, len(pl.p.Targets))
		for i, r := range pl.order {
			b.rank[r] = i
		}
		err = b.relay(ctx, s == "tree")
	}
	return b.moves, err
}

// relayOrder orders the replicas for chain and tree: first the replica that shares
// the most nodes with the source, then each time the replica sharing the most nodes
// with the last one (ties: the lowest index).
func (pl *planner) relayOrder() []int {
	p := pl.p
	nodes := func(devs []int) map[int]bool {
		m := map[int]bool{}
		for _, d := range devs {
			m[p.Fabric.Node(d)] = true
		}
		return m
	}
	shared := func(a, b map[int]bool) int {
		n := 0
		for k := range a {
			if b[k] {
				n++
			}
		}
		return n
	}
	left := make([]bool, len(p.Targets))
	tn := make([]map[int]bool, len(p.Targets))
	for r, t := range p.Targets {
		tn[r] = nodes(t.Devices)
	}
	last := nodes(p.Source.Devices)
	var order []int
	for range p.Targets {
		best, bestS := -1, -1
		for r := range p.Targets {
			if left[r] {
				continue
			}
			if s := shared(last, tn[r]); s > bestS {
				best, bestS = r, s
			}
		}
		left[best] = true
		order = append(order, best)
		last = tn[best]
	}
	return order
}

func cheapest(m map[string]priced) string {
	best := ""
	for _, s := range Strategies {
		pr, ok := m[s]
		if !ok {
			continue
		}
		if best == "" || pr.timeUS < m[best].timeUS-1e-9 {
			best = s
		}
	}
	return best
}

// opOf names a strategy's moves in /v1/reshard's step vocabulary.
func opOf(s string) func(move) string {
	return func(m move) string {
		switch {
		case s == "fanout" && m.phase == 1:
			return "all_gather"
		case (s == "chain" || s == "tree") && m.phase > 0:
			return "collective_permute"
		}
		return "all_to_all_v"
	}
}

func elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// why says why the chosen strategy won.
func (pl *planner) why(r *Result) string {
	var next *Candidate
	for i := range r.Candidates {
		c := &r.Candidates[i]
		if c.Chosen || c.TimeUS == 0 {
			continue
		}
		if next == nil || c.TimeUS < next.TimeUS {
			next = c
		}
	}
	s := fmt.Sprintf("%s is the fastest priced strategy: %.1f us in %d buckets", r.Strategy, r.TimeUS, r.Buckets)
	if next != nil {
		s += fmt.Sprintf(", %.1f us ahead of %s (%.1f us)", next.TimeUS-r.TimeUS, next.Name, next.TimeUS)
	}
	if r.Bound.TimeUS > 0 {
		s += fmt.Sprintf("; the fabric's bound is %.1f us, set by %s", r.Bound.TimeUS, r.Bound.Binding)
	}
	return s
}
