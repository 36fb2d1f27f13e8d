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
	// Excluded are the strategies not among the candidates, with why.
	Excluded []Excluded
	// Fastest is the candidate of the least time; Strategy may be a simpler one within
	// simplerSlack of it.
	Fastest     string
	Phases      []Phase
	Classes     []ClassResult
	TensorCount int
	TensorBytes int64
	MoveCount   int
	Order       []int // replicas in relay order (chain, tree)
}

// Candidate is one strategy priced over the whole request.
type Candidate struct {
	Name   string
	TimeUS float64
	// FastestUS is its time at its fastest bucket count (TimeUS takes the most buckets
	// within 1% of it, for less memory); strategies are compared by it.
	FastestUS    float64
	NetworkBytes int64
	Buckets      int
	// Messages are the sends the plan makes: its moves over every tensor times its
	// buckets.
	Messages int64
	Chosen   bool
}

// Excluded is a strategy left out of the candidates: it cannot run on this request
// (chain and tree with one replica), was not priced (a limit), or does not fit the
// memory budget.
type Excluded struct {
	Name   string
	Reason string
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
	// MoveBits and TargetBits are the bits per element moved and held by a target
	// (scales included when the tensor is cast to a quantized target).
	MoveBits, TargetBits float64
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
	cp := p.compact()
	res, err := plan(ctx, cp)
	if err != nil || cp.nodeMap == nil {
		return res, err
	}
	res.PeakDevice = cp.globalDevice(res.PeakDevice)
	for i := range res.Classes {
		for k := range res.Classes[i].Moves {
			m := &res.Classes[i].Moves[k]
			m.From, m.To = cp.globalDevice(m.From), cp.globalDevice(m.To)
		}
	}
	return res, nil
}

// compact is p on the nodes its placements use only, renumbered in order (nodeMap maps
// them back), so that the work per device does not grow with the fabric's idle nodes;
// p itself when every node is used.
func (p *Problem) compact() *Problem {
	g := p.Fabric.GPUsPerNode
	nodes := (p.Devices + g - 1) / g
	used := make([]bool, nodes)
	mark := func(ds []int) {
		for _, d := range ds {
			used[d/g] = true
		}
	}
	mark(p.Source.Devices)
	for _, t := range p.Targets {
		mark(t.Devices)
	}
	newNode := make([]int, nodes)
	var nodeMap []int
	for n, u := range used {
		if u {
			newNode[n] = len(nodeMap)
			nodeMap = append(nodeMap, n)
		}
	}
	if len(nodeMap) == nodes {
		return p
	}
	cp := *p
	cp.nodeMap = nodeMap
	cp.Devices = len(nodeMap) * g
	if last := nodeMap[len(nodeMap)-1]; last == nodes-1 && p.Devices%g != 0 {
		cp.Devices -= g - p.Devices%g // the fabric's partial last node stays partial
	}
	remap := func(pl Placement) Placement {
		ds := make([]int, len(pl.Devices))
		for i, d := range pl.Devices {
			ds[i] = newNode[d/g]*g + d%g
		}
		pl.Devices = ds
		return pl
	}
	cp.Source = remap(p.Source)
	cp.Targets = make([]Placement, len(p.Targets))
	for r, t := range p.Targets {
		cp.Targets[r] = remap(t)
	}
	return &cp
}

// globalDevice and globalNode are a compacted problem's device and node ids on the
// fabric.
func (p *Problem) globalDevice(d int) int {
	if p.nodeMap == nil {
		return d
	}
	g := p.Fabric.GPUsPerNode
	return p.nodeMap[d/g]*g + d%g
}

func (p *Problem) globalNode(n int) int {
	if p.nodeMap == nil {
		return n
	}
	return p.nodeMap[n]
}

// plan is Plan on a compacted problem.
func plan(ctx context.Context, p *Problem) (*Result, error) {
	classes := p.classes()
	cellBudget := p.maxCells()
	for _, c := range classes {
		if err := c.build(ctx, p, p.Tensors[c.tensors[0]].Field, &cellBudget); err != nil {
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
	// A budget below the tiles is planned on: every candidate then fails to fit, and the
	// error names the least peak any of them reaches (tiles and staging buckets), a
	// budget that admits a plan.
	// The bound.
	bl := newBoundLoads(p)
	for _, c := range classes {
		if err := bl.add(ctx, p.Fabric, c, float64(c.count)); err != nil {
			return nil, err
		}
	}
	res.Bound = bl.bound(p)

	maxB := p.MaxBuckets
	if maxB <= 0 {
		maxB = DefaultMaxBuckets
	}
	pl := &planner{p: p, classes: classes, resident: resident, total: total, maxBuckets: maxB, moveBudget: p.MaxMoves}
	if pl.moveBudget <= 0 {
		pl.moveBudget = DefaultMaxMoves
	}
	strategies := Strategies
	if p.Strategy != "" && p.Strategy != "auto" && p.Strategy != "mixed" {
		strategies = []string{p.Strategy}
	}
	// Each strategy's moves for every class; chain and tree in their best relay order.
	perClass := make([]map[string][]move, len(classes))
	for i := range classes {
		perClass[i] = map[string][]move{}
	}
	orders := map[string][]int{}
	for _, s := range strategies {
		if s == "mixed" || (s == "chain" || s == "tree") && len(p.Targets) < 2 {
			continue
		}
		if s == "chain" && (len(p.Targets)+1)*p.Devices > maxChainLoads {
			continue // its phases' loads would not fit: noted below
		}
		var order []int
		if s == "chain" || s == "tree" {
			var err error
			if order, err = pl.bestOrder(ctx, s); err != nil {
				return nil, err
			}
			orders[s] = order
		}
		for i, c := range classes {
			mv, err := pl.movesIn(ctx, c, s, order)
			if err != nil {
				return nil, err
			}
			perClass[i][s] = mv
		}
	}
	// Candidates over the whole request: each strategy for every class, then mixed. A
	// strategy that cannot run here, or does not fit the budget, is excluded with its
	// reason, not listed at time 0.
	type fit struct {
		name    string
		pr      priced
		picks   []string
		message float64 // messages sent: moves times buckets
	}
	var fits []fit
	var fastest *fit
	minPeak := math.Inf(1)
	consider := func(name string, picks []string) error {
		pr, ok, _, err := pl.priceAssign(ctx, perClass, picks)
		if err != nil {
			return err
		}
		minPeak = min(minPeak, pr.minPeak)
		if !ok {
			res.Excluded = append(res.Excluded, Excluded{Name: name, Reason: fmt.Sprintf("needs %d bytes per device at its smallest bucket, over the budget", int64(pr.minPeak+0.5))})
			return nil
		}
		moves := 0.0
		for i, c := range pl.classes {
			moves += float64(len(perClass[i][picks[i]]) * c.count)
		}
		res.Candidates = append(res.Candidates, Candidate{Name: name, TimeUS: pr.timeUS, FastestUS: pr.bestUS, NetworkBytes: int64(pr.netBytes + 0.5), Buckets: pr.buckets,
			Messages: int64(moves*float64(pr.buckets) + 0.5)})
		fits = append(fits, fit{name: name, pr: pr, picks: slices.Clone(picks), message: moves * float64(pr.buckets)})
		if fastest == nil || pr.bestUS < fastest.pr.bestUS-1e-9 {
			fastest = &fits[len(fits)-1]
			f := *fastest
			fastest = &f
		}
		return nil
	}
	for _, s := range Strategies {
		if s == "mixed" || !slices.Contains(strategies, s) {
			continue
		}
		if _, ok := perClass[0][s]; !ok {
			reason := "needs two or more target replicas (one replica has no replica to relay from)"
			if len(p.Targets) >= 2 {
				reason = fmt.Sprintf("not priced: a chain of %d replicas on %d devices has more than %d phase loads (use tree)", len(p.Targets), p.Devices, maxChainLoads)
			}
			res.Excluded = append(res.Excluded, Excluded{Name: s, Reason: reason})
			continue
		}
		if err := consider(s, slices.Repeat([]string{s}, len(classes))); err != nil {
			return nil, err
		}
	}
	if slices.Contains(strategies, "mixed") && len(classes) > maxMixClasses {
		res.Excluded = append(res.Excluded, Excluded{Name: "mixed", Reason: fmt.Sprintf("not priced: more than %d tensor groups", maxMixClasses)})
	} else if slices.Contains(strategies, "mixed") && len(classes) > 1 && fastest != nil {
		picks, err := pl.mix(ctx, perClass, fastest.picks)
		if err != nil {
			return nil, err
		}
		if err := consider("mixed", picks); err != nil {
			return nil, err
		}
	}
	if fastest == nil {
		if p.MemoryBudget > 0 {
			return nil, &BudgetError{Budget: p.MemoryBudget, MinBudget: int64(math.Ceil(minPeak)), Resident: res.ResidentBytes}
		}
		return nil, fielderr.New("strategy", "strategy %q needs two or more target replicas", p.Strategy)
	}
	// The simplest plan near the fastest: the fewest messages among the candidates
	// within simplerSlack of the fastest time (a plan of many more buckets or moves must
	// gain more than that to be chosen).
	chosen := *fastest
	for _, f := range fits {
		if f.pr.bestUS <= fastest.pr.bestUS*(1+simplerSlack) && f.message < chosen.message*(1-1e-9) {
			chosen = f
		}
	}
	res.Fastest = fastest.name
	best, bestName := &chosen.pr, chosen.name
	choice := chosen.picks
	_, _, bestLoads, err := pl.priceAssign(ctx, perClass, choice)
	if err != nil {
		return nil, err
	}
	for _, c := range choice {
		if o, ok := orders[c]; ok {
			res.Order = o
		}
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
		cr := ClassResult{Tensors: c.tensors, Count: c.count, Bytes: int64(c.bytesOf(elements(c.shape)) + 0.5), Strategy: choice[i], Cells: len(c.cells), MoveBits: c.moveBits, TargetBits: c.dstBits}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pr := priceOne(p.Fabric, summarize(p.Fabric, c, mv, opOf(choice[i])), 1, c.bytesOf(elements(c.shape)), maxB)
		cr.TimeUS = pr.timeUS
		b1 := newBoundLoads(p)
		if err := b1.add(ctx, p.Fabric, c, 1); err != nil {
			return nil, err
		}
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
	moveBudget int
	sums       map[sumKey]*summary
	peers      map[uint64]int // loads.maxPeers' memo
}

// maxChainLoads bounds a chain's phases times the fabric's devices (the loads it
// prices: 32 bytes each).
const maxChainLoads = 1 << 22

// maxOrderSearch is the most replicas whose relay orders are all priced (5! = 120);
// above it the order is relayOrder's. maxOrderMoves bounds the moves one order may
// take for the search to run.
const (
	maxOrderSearch = 5
	maxOrderMoves  = 1 << 13
)

// bestOrder is the relay order of the replicas for strategy s (chain or tree): every
// order priced when there are few replicas and moves, else relayOrder's.
func (pl *planner) bestOrder(ctx context.Context, s string) ([]int, error) {
	greedy := pl.relayOrder()
	r := len(pl.p.Targets)
	if r > maxOrderSearch {
		return greedy, nil
	}
	perClass := make([]map[string][]move, len(pl.classes))
	picks := slices.Repeat([]string{s}, len(pl.classes))
	var best []int
	bestT := math.Inf(1)
	for _, o := range append([][]int{greedy}, orderings(r)...) {
		n := 0
		pl.order = o
		for i, c := range pl.classes {
			mv, err := pl.moves(ctx, c, s)
			if err != nil {
				return nil, err
			}
			perClass[i] = map[string][]move{s: mv}
			n += len(mv)
		}
		if n > maxOrderMoves {
			return greedy, nil
		}
		pr, fits, _, err := pl.priceAssign(ctx, perClass, picks)
		if err != nil {
			return nil, err
		}
		if fits && pr.bestUS < bestT-1e-9 {
			best, bestT = o, pr.bestUS
		}
	}
	if best == nil {
		return greedy, nil // no order fits the budget: the candidate says so
	}
	return best, nil
}

// orderings lists every permutation of 0..n-1.
func orderings(n int) [][]int {
	if n <= 1 {
		return [][]int{make([]int, n)}
	}
	var out [][]int
	for _, q := range orderings(n - 1) {
		for i := 0; i <= len(q); i++ {
			o := append(append(append(make([]int, 0, n), q[:i]...), n-1), q[i:]...)
			out = append(out, o)
		}
	}
	return out
}

// priceAssign prices every class with its picked strategy's moves, together.
func (pl *planner) priceAssign(ctx context.Context, perClass []map[string][]move, picks []string) (priced, bool, *loads, error) {
	if err := ctx.Err(); err != nil {
		return priced{}, false, nil, err
	}
	l := newLoads(pl.p.Devices)
	if pl.peers == nil {
		pl.peers = map[uint64]int{}
	}
	l.peers = pl.peers
	for i, c := range pl.classes {
		if i&15 == 15 && ctx.Err() != nil {
			return priced{}, false, nil, ctx.Err()
		}
		l.addSummary(pl.summary(perClass, i, picks[i]), float64(c.count))
	}
	pr, fits := price(pl.p.Fabric, l, pl.resident, pl.total, pl.p.MemoryBudget, pl.maxBuckets)
	return pr, fits, l, nil
}

// summary is class i's moves under strategy s totalled, computed once per moves list.
func (pl *planner) summary(perClass []map[string][]move, i int, s string) *summary {
	mv := perClass[i][s]
	key := sumKey{class: i, strategy: s, n: len(mv)}
	if len(mv) > 0 {
		key.first = &mv[0]
	}
	if sm, ok := pl.sums[key]; ok {
		return sm
	}
	sm := summarize(pl.p.Fabric, pl.classes[i], mv, opOf(s))
	if pl.sums == nil {
		pl.sums = map[sumKey]*summary{}
	}
	pl.sums[key] = sm
	return sm
}

// sumKey names a moves list: its class, strategy, length and first element's address
// (bestOrder prices other lists under the same class and strategy).
type sumKey struct {
	class    int
	strategy string
	n        int
	first    *move
}

// maxMixPasses bounds mix's passes over the classes; above maxMixClasses groups the
// local search (each pass prices every group's every strategy with all the groups) is
// not run.
const (
	maxMixPasses  = 4
	maxMixClasses = 64
)

// simplerSlack is the share of time a plan with more messages (moves times buckets)
// must gain over a simpler candidate to be chosen.
const simplerSlack = 0.01

// mix improves the assignment from by moving one class at a time to another
// strategy while the whole plan gets faster (a local search).
func (pl *planner) mix(ctx context.Context, perClass []map[string][]move, from []string) ([]string, error) {
	picks := slices.Clone(from)
	cur, _, _, err := pl.priceAssign(ctx, perClass, picks)
	if err != nil {
		return nil, err
	}
	for range maxMixPasses {
		improved := false
		for i := range pl.classes {
			for _, s := range Strategies {
				if _, ok := perClass[i][s]; !ok || s == picks[i] {
					continue
				}
				old := picks[i]
				picks[i] = s
				pr, fits, _, err := pl.priceAssign(ctx, perClass, picks)
				if err != nil {
					return nil, err
				}
				if fits && pr.bestUS < cur.bestUS-1e-9 {
					cur, improved = pr, true
					continue
				}
				picks[i] = old
			}
		}
		if !improved {
			break
		}
	}
	return picks, nil
}

// movesIn builds c's moves under strategy s (order: the relay order of chain and tree),
// charging them to the plan's move budget.
func (pl *planner) movesIn(ctx context.Context, c *class, s string, order []int) ([]move, error) {
	pl.order = order
	mv, err := pl.moves(ctx, c, s)
	if err != nil {
		return nil, err
	}
	if pl.moveBudget -= len(mv); pl.moveBudget < 0 {
		return nil, pl.movesOver()
	}
	return mv, nil
}

// movesOver is the error of a plan over its move budget.
func (pl *planner) movesOver() error {
	most := pl.p.MaxMoves
	if most <= 0 {
		most = DefaultMaxMoves
	}
	return limitErrorf("tensors", "the plan needs more than %d moves (the boxes each target device pulls, over every distinct tensor and strategy); move fewer distinct tensors or devices per request", most)
}

func (pl *planner) moves(ctx context.Context, c *class, s string) ([]move, error) {
	b := newBuilder(pl.p, c)
	// A list past the moves left in the budget is cut there: the builder stops.
	b.limit = max(pl.moveBudget, 0)
	var err error
	switch s {
	case "direct":
		err = b.direct(ctx)
	case "fanout":
		err = b.fanout(ctx)
	case "spread":
		err = b.spread(ctx)
	case "chain", "tree":
		b.order = pl.order
		b.rank = make([]int, len(pl.p.Targets))
		for i, r := range pl.order {
			b.rank[r] = i
		}
		err = b.relay(ctx, s == "tree")
	}
	if err == nil && b.over {
		err = pl.movesOver()
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
	var chosen, fastest, next *Candidate
	for i := range r.Candidates {
		c := &r.Candidates[i]
		switch {
		case c.Chosen:
			chosen = c
		case c.Name == "mixed":
		case next == nil || c.FastestUS < next.FastestUS:
			next = c
		}
		if c.Name == r.Fastest {
			fastest = c
		}
	}
	var s string
	if r.Fastest == r.Strategy {
		s = fmt.Sprintf("%s is the fastest priced strategy: %.1f us at its fastest bucket count", r.Strategy, chosen.FastestUS)
	} else {
		s = fmt.Sprintf("%s is the simplest plan within %.0f%% of the fastest: %.1f us at its fastest bucket count and %d messages, against %s's %.1f us and %d messages (a plan with more messages must gain more than %.0f%%)",
			r.Strategy, 100*simplerSlack, chosen.FastestUS, chosen.Messages, fastest.Name, fastest.FastestUS, fastest.Messages, 100*simplerSlack)
	}
	s += fmt.Sprintf("; %.1f us in %d buckets, the most within %.0f%% of that", r.TimeUS, r.Buckets, 100*bucketSlack)
	if next != nil && next.Name != r.Strategy && next.Name != r.Fastest {
		s += fmt.Sprintf("; next %s at %.1f us", next.Name, next.FastestUS)
	}
	for _, e := range r.Excluded {
		s += fmt.Sprintf("; %s left out: %s", e.Name, e.Reason)
	}
	if r.Bound.TimeUS > 0 {
		s += fmt.Sprintf("; the fabric's bound is %.1f us, set by %s", r.Bound.TimeUS, r.Bound.Binding)
	}
	return s
}
