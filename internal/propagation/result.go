package propagation

import (
	"context"
	"slices"
	"strings"

	"github.com/shardplan/shardplan/internal/collective"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Result is the outcome of Propagate.
type Result struct {
	// Shardings is the propagated sharding of every tensor. Open flags are kept as the
	// annotations (or their absence) left them, explicit replication is kept and
	// priorities are dropped, so feeding Shardings back as annotations is a fixpoint. Use
	// Closed for the final, closed form.
	Shardings map[string]sharding.Sharding `json:"-"`
	// Ops lists, per op in graph order (regions flattened), the sharding it computes in.
	Ops []OpSharding `json:"ops"`
	// Reshards are the operand and result layout changes the ops need, in op order.
	Reshards []Reshard `json:"reshards"`
	// Reductions are the all-reduces / reduce-scatters sharded reduction factors need.
	Reductions []Reduction `json:"reductions"`
	// Explain gives, per tensor, where the axes of each dim came from.
	Explain map[string][]Origin `json:"explain"`
	// Refined lists the annotated tensors whose open dims gained axes, sorted.
	Refined []string `json:"refined"`
	Stats   Stats    `json:"stats"`
}

// OpSharding is the sharding an op computes in: the common axes of each factor and the
// resulting layout of each operand and result.
type OpSharding struct {
	Op   string `json:"op"`
	Kind string `json:"kind"`
	// Rule is the op's sharding rule in Shardy's notation ("" when it has none).
	Rule     string              `json:"rule,omitempty"`
	Factors  []FactorAxes        `json:"factors,omitempty"`
	Operands []sharding.Sharding `json:"-"`
	Results  []sharding.Sharding `json:"-"`
}

// FactorAxes is one factor of an op's rule and the axes it is computed on.
type FactorAxes struct {
	Factor string             `json:"factor"`
	Size   int64              `json:"size"`
	Type   FactorType         `json:"type"`
	Axes   []sharding.AxisRef `json:"axes"`
}

// Reshard is one tensor layout change an op needs: an operand moved to the layout the
// op computes in before it runs, or a result moved from that layout to its own after.
type Reshard struct {
	Op     string            `json:"op"`
	Tensor string            `json:"tensor"`
	From   sharding.Sharding `json:"-"`
	To     sharding.Sharding `json:"-"`
}

// Reduction kinds (package collective names them).
const (
	AllReduce     = string(collective.AllReduce)
	ReduceScatter = string(collective.ReduceScatter)
)

// Reduction is a collective that sums partial results over Axes: an all_reduce, or a
// reduce_scatter that also leaves Tensor sharded on Axes along Dim.
type Reduction struct {
	Op     string             `json:"op"`
	Tensor string             `json:"tensor"`
	Kind   string             `json:"kind"`
	Axes   []sharding.AxisRef `json:"axes"`
	Dim    int                `json:"dim"`
	// From is Tensor's layout holding the partial sums (Axes among its Unreduced) and To
	// the layout once they are summed: what a planner reshards between to price it.
	From sharding.Sharding `json:"-"`
	To   sharding.Sharding `json:"-"`
}

// Origin says where some axes of a tensor dim came from: "annotation", or e.g.
// "x dim 0 through mm (factor i)".
type Origin struct {
	Dim  int                `json:"dim"`
	Axes []sharding.AxisRef `json:"axes"`
	From string             `json:"from"`
}

var typePrecedence = [...]int{FactorPassThrough: 3, FactorReduction: 2, FactorPermutation: 1, FactorNeedReplication: 0}

// finalize builds the Result from the propagated state (section (d) of PROPAGATION.md).
func (p *propagator) finalize(ctx context.Context) (*Result, error) {
	gs := p.gs
	explained := 0
	for _, ts := range gs.tensors {
		if len(ts.origins) > 0 {
			explained++
		}
	}
	res := &Result{Shardings: make(map[string]sharding.Sharding, len(gs.tensors)), Explain: make(map[string][]Origin, explained)}
	if len(gs.opNames) > 0 {
		res.Ops = make([]OpSharding, 0, len(gs.opNames))
	}
	p.finals = make([]sharding.Sharding, len(gs.tensors))
	p.haveFinal = make([]bool, len(gs.tensors))
	for _, ts := range gs.tensors {
		s := p.slab.clone(ts.sh)
		for d := range s.Dims {
			s.Dims[d].Priority = sharding.NoPriority
		}
		s.Canonicalize(gs.mesh)
		res.Shardings[ts.name] = s
		if len(ts.origins) > 0 {
			res.Explain[ts.name] = ts.origins
		}
		if ts.ann != nil {
			for d, ads := range ts.ann.Dims {
				if ads.Open && !slices.Equal(ads.Axes, s.Dims[d].Axes) {
					res.Refined = append(res.Refined, ts.name)
					break
				}
			}
		}
	}
	slices.Sort(res.Refined)
	// edges of each while, by op index
	edges := map[int][]*node{}
	for _, n := range gs.nodes {
		if n.edge {
			edges[n.opIndex] = append(edges[n.opIndex], n)
		}
	}
	for i, name := range gs.opNames {
		if i&63 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		os := OpSharding{Op: name, Kind: gs.opKinds[i]}
		if ni := gs.opNodes[i]; ni >= 0 {
			p.computeOp(gs.nodes[ni], &os, res)
		}
		for _, e := range edges[i] {
			var tmp OpSharding
			p.computeOp(e, &tmp, res)
		}
		res.Ops = append(res.Ops, os)
	}
	res.Stats = Stats{Visits: p.visits, Updates: p.updates, Passes: p.passes}
	return res, nil
}

// ruleText is r.String(), printed once per rule: nodes share rules (ruleCache).
func (p *propagator) ruleText(r *Rule) string {
	s, ok := p.ruleTexts[r]
	if !ok {
		s = r.String()
		if p.ruleTexts == nil {
			p.ruleTexts = map[*Rule]string{}
		}
		p.ruleTexts[r] = s
	}
	return s
}

// computeOp chooses the common per-factor axes of n (findCommonAxes), the layouts its
// tensors are computed in, and the reshards and reductions that implies.
func (p *propagator) computeOp(n *node, os *OpSharding, res *Result) {
	gs := p.gs
	r := n.rule
	nf := p.project(n)
	nt := len(n.tensors)
	assign := p.commonAxes(n, nf)
	if !n.edge {
		os.Rule = p.ruleText(r)
		if nf > 0 {
			os.Factors = cut(&p.factorChunk, nf)
		}
		if n.nOperands > 0 {
			os.Operands = cut(&p.shardingChunk, n.nOperands)
		}
		if nt > n.nOperands {
			os.Results = cut(&p.shardingChunk, nt-n.nOperands)
		}
		for f := range nf {
			os.Factors = append(os.Factors, FactorAxes{Factor: FactorName(f), Size: r.FactorSizes[f], Type: r.Types[f], Axes: assign[f]})
		}
	}
	var reduced []axisRef
	for f := range nf {
		if r.Types[f] == FactorReduction {
			reduced = append(reduced, assign[f]...)
		}
	}
	sharding.SortAxisRefs(reduced, gs.mesh)
	reduced = sharding.MergeAdjacent(reduced)
	for t, id := range n.tensors {
		ts := gs.tensors[id]
		final := p.final(id)
		computed := sharding.Sharding{Dims: p.computedDims(r, t, assign, final)}
		if t < n.nOperands {
			if len(ts.sh.Unreduced) > 0 && !p.passesUnreduced(n) {
				res.Reductions = append(res.Reductions, Reduction{Op: n.name, Tensor: ts.name, Kind: AllReduce, Axes: slices.Clone(ts.sh.Unreduced),
					From: final, To: withUnreduced(final, nil)})
			} else {
				computed.Unreduced = slices.Clone(ts.sh.Unreduced)
			}
			if !n.edge {
				os.Operands = append(os.Operands, computed)
			}
			if !computed.SameLayout(final) {
				res.Reshards = append(res.Reshards, Reshard{Op: n.name, Tensor: ts.name, From: withUnreduced(final, computed.Unreduced), To: computed})
			}
			continue
		}
		// result: partial over the reduced axes it does not keep unreduced
		var partial []axisRef
		for _, a := range reduced {
			if !slices.Contains(ts.sh.Unreduced, a) {
				partial = append(partial, a)
			}
		}
		computed.Unreduced = slices.Clone(ts.sh.Unreduced)
		if !n.edge {
			os.Results = append(os.Results, computed)
		}
		after := computed
		if len(partial) > 0 {
			red := Reduction{Op: n.name, Tensor: ts.name, Kind: AllReduce, Axes: partial}
			if d := scatterDim(computed, final, partial); d >= 0 {
				red.Kind, red.Dim = ReduceScatter, d
				after = computed.Layout()
				after.Dims[d].Axes = mergeAppend(computed.Dims[d].Axes, orderAs(partial, final.Dims[d].Axes)...)
			}
			red.From = withUnreduced(computed, append(slices.Clone(computed.Unreduced), partial...))
			red.To = after
			res.Reductions = append(res.Reductions, red)
		}
		if !after.SameLayout(final) {
			res.Reshards = append(res.Reshards, Reshard{Op: n.name, Tensor: ts.name, From: after, To: final})
		}
	}
}

// cut returns an empty slice with room for n elements, cut from *chunk (refilled when
// short): an op's factors, operands and results take a few large allocations for the
// whole graph instead of three each.
func cut[T any](chunk *[]T, n int) []T {
	if cap(*chunk)-len(*chunk) < n {
		*chunk = make([]T, 0, max(n, slabChunk))
	}
	start := len(*chunk)
	*chunk = (*chunk)[:start+n]
	return (*chunk)[start : start : start+n]
}

// computedDims is the dims tensor t of rule r is computed in under the factor axes
// assign. They are built in scratch and, when they equal the tensor's final layout
// exactly (nil lists included), are final's dims: most tensors are computed in their
// own layout, and the Result is only read, so the two share one copy. Otherwise they
// are copied into p's slab.
func (p *propagator) computedDims(r *Rule, t int, assign [][]axisRef, final sharding.Sharding) []sharding.DimSharding {
	dims := r.Dims(t)
	p.cdims, p.caxes = p.cdims[:0], p.caxes[:0]
	for _, fs := range dims {
		start := len(p.caxes)
		for _, f := range fs {
			p.caxes = append(p.caxes, assign[f]...)
			if product(assign[f]) < r.FactorSizes[f] {
				break
			}
		}
		var axes []axisRef
		if end := len(p.caxes); end > start {
			axes = sharding.MergeAdjacent(p.caxes[start:end:end])
		}
		p.cdims = append(p.cdims, sharding.DimSharding{Axes: axes, Priority: sharding.NoPriority})
	}
	if sameDims(p.cdims, final.Dims) {
		return final.Dims
	}
	out := p.slab.dimsOf(len(dims))
	for d, ds := range p.cdims {
		out[d] = sharding.DimSharding{Axes: p.slab.copyOf(ds.Axes), Priority: ds.Priority}
	}
	return out
}

// sameDims reports whether a and b are equal field by field, a nil axis list differing
// from an empty one.
func sameDims(a, b []sharding.DimSharding) bool {
	if len(a) != len(b) {
		return false
	}
	for d := range a {
		x, y := a[d], b[d]
		if x.Open != y.Open || x.Priority != y.Priority || (x.Axes == nil) != (y.Axes == nil) || !slices.Equal(x.Axes, y.Axes) {
			return false
		}
	}
	return true
}

// final is tensor id's propagated layout (its sharding's Layout), computed once: every
// op that uses the tensor compares against it, and the reshards and reductions share it.
func (p *propagator) final(id int) sharding.Sharding {
	if !p.haveFinal[id] {
		p.finals[id], p.haveFinal[id] = p.slab.layout(p.gs.tensors[id].sh), true
	}
	return p.finals[id]
}

func withUnreduced(s sharding.Sharding, u []axisRef) sharding.Sharding {
	s.Unreduced = slices.Clone(u)
	return s
}

// passesUnreduced reports whether n may carry unreduced operands through (linear
// elementwise ops whose results are unreduced on the same axes).
func (p *propagator) passesUnreduced(n *node) bool {
	switch n.kind {
	case "add", "subtract", "sub", "negate", "neg", "sharding_constraint", "copy", "while":
	default:
		return false
	}
	u := p.gs.tensors[n.tensors[0]].sh.Unreduced
	for _, id := range n.tensors {
		if !slices.Equal(p.gs.tensors[id].sh.Unreduced, u) {
			return false
		}
	}
	return true
}

// scatterDim returns the dim along which final adds exactly the partial axes to
// computed (the reduce_scatter case), or -1.
func scatterDim(computed, final sharding.Sharding, partial []axisRef) int {
	for d := range final.Dims {
		fa, ca := final.Dims[d].Axes, computed.Dims[d].Axes
		all := true
		for _, a := range partial {
			if !containsAxis(fa, a) || containsAxis(ca, a) {
				all = false
				break
			}
		}
		if all {
			return d
		}
	}
	return -1
}

func containsAxis(list []axisRef, a axisRef) bool {
	for _, b := range list {
		if b.Contains(a) {
			return true
		}
	}
	return false
}

// orderAs returns axes ordered as they appear in ref.
func orderAs(axes, ref []axisRef) []axisRef {
	out := slices.Clone(axes)
	pos := func(a axisRef) int {
		for i, b := range ref {
			if b.Contains(a) {
				return i
			}
		}
		return len(ref)
	}
	slices.SortStableFunc(out, func(a, b axisRef) int { return pos(a) - pos(b) })
	return out
}

// commonAxes picks one list of axes per factor for the op to compute in (PROPAGATION.md
// (d).2): the tensors' own factor shardings when they already agree, otherwise a
// greedy choice among every prefix of every tensor's factor sharding, scored by the
// elements of the tensors that agree, the factor type, the sharding size and the axis
// names. Axes left on need-replication factors move to batching factors when they
// divide them.
func (p *propagator) commonAxes(n *node, nf int) [][]axisRef {
	assign := make([][]axisRef, nf)
	if p.agrees(n, nf, assign) {
		return assign
	}
	clear(assign)
	nt := len(n.tensors)
	blocked := make([][][]axisRef, nt)
	for t := range nt {
		ts := p.gs.tensors[n.tensors[t]]
		blocked[t] = [][]axisRef{ts.sh.Replicated, ts.sh.Unreduced}
	}
	c := &axisPick{p: p, n: n, nf: nf, nt: nt, assign: assign, blocked: blocked}
	for range nf * 64 {
		best, ok := c.best()
		if !ok {
			break
		}
		assign[best.f] = best.axes
	}
	c.rehomeNeedReplication()
	return assign
}

// axisPick is the state of commonAxes on node n: the axes assigned so far per factor
// and, per tensor, the axes it may not be sharded on (replicated, unreduced).
type axisPick struct {
	p       *propagator
	n       *node
	nf, nt  int
	assign  [][]axisRef
	blocked [][][]axisRef
}

// axisCand is a candidate assignment of axes to factor f, with what ranks it: the
// elements of the tensors it fits, the type precedence of f and the sharding gain.
type axisCand struct {
	f     int
	axes  []axisRef
	elems int64
	prec  int
	gain  int64
	text  string
}

// better orders candidates: more elements, higher precedence, more gain, lower factor,
// then text.
func (a axisCand) better(b axisCand) bool {
	if a.elems != b.elems {
		return a.elems > b.elems
	}
	if a.prec != b.prec {
		return a.prec > b.prec
	}
	if a.gain != b.gain {
		return a.gain > b.gain
	}
	if a.f != b.f {
		return a.f < b.f
	}
	return a.text < b.text
}

// eligible reports whether factor f may grow: every factor before it in a compound dim
// is fully assigned.
func (c *axisPick) eligible(f int) bool {
	r := c.n.rule
	for t := range c.nt {
		for _, fs := range r.Dims(t) {
			for k, g := range fs {
				if g == f && k > 0 && product(c.assign[fs[k-1]]) < r.FactorSizes[fs[k-1]] {
					return false
				}
			}
		}
	}
	return true
}

// best is the best candidate over every eligible factor, tensor and prefix length, or
// false when none grows an assignment. A candidate depends only on the factor and the
// axes, so a tensor whose projection equals one already tried adds nothing and is
// skipped: an op of many operands sharded alike (a concatenate of 50,000) costs one
// pass over them per factor, not one per operand.
func (c *axisPick) best() (axisCand, bool) {
	var best axisCand
	found := false
	var tried [][]axisRef
	for f := range c.nf {
		if !c.eligible(f) {
			continue
		}
		tried = tried[:0]
	tensors:
		for t := range c.nt {
			fs := &c.p.proj[t*c.nf+f]
			if !fs.present {
				continue
			}
			for _, axes := range tried {
				if slices.Equal(axes, fs.axes) {
					continue tensors
				}
			}
			tried = append(tried, fs.axes)
			for k := len(c.assign[f]); k <= len(fs.axes); k++ {
				if k == 0 {
					continue
				}
				cd, ok := c.candidate(f, fs.axes[:k:k])
				if ok && (!found || cd.better(best)) {
					best, found = cd, true
				}
			}
		}
	}
	return best, found
}

// candidate is prefix axes of a projection of factor f, truncated where it overlaps
// another factor's assignment or a blocked axis; false when it does not strictly extend
// f's assignment.
func (c *axisPick) candidate(f int, axes []axisRef) (axisCand, bool) {
	r, nf := c.n.rule, c.nf
	ax := truncate(axes, func(a axisRef, _ int64) (axisRef, bool) { return c.free(f, a) })
	if !isStrictPrefix(c.assign[f], ax) {
		return axisCand{}, false
	}
	cd := axisCand{f: f, axes: ax, prec: typePrecedence[r.Types[f]], gain: product(ax) / product(c.assign[f]), text: axesText(ax)}
	for q := range c.nt {
		if qs := &c.p.proj[q*nf+f]; qs.present && isPrefixOrEqual(ax, qs.axes) {
			cd.elems += c.p.gs.tensors[c.n.tensors[q]].elems
		}
	}
	return cd, true
}

// free cuts a to its prefix that overlaps neither another factor's assignment nor an
// axis blocked on a tensor where f is present; false when nothing is left.
func (c *axisPick) free(f int, a axisRef) (axisRef, bool) {
	var ok bool
	for g := range c.nf {
		if g == f {
			continue
		}
		for _, x := range c.assign[g] {
			if a, ok = prefixWithoutOverlap(a, x); !ok {
				return a, false
			}
		}
	}
	for q := range c.nt {
		if !c.p.proj[q*c.nf+f].present {
			continue
		}
		for _, list := range c.blocked[q] {
			for _, x := range list {
				if a, ok = prefixWithoutOverlap(a, x); !ok {
					return a, false
				}
			}
		}
	}
	return a, true
}

// rehomeNeedReplication moves need-replication axes onto batching factors (pass-through,
// in every tensor).
func (c *axisPick) rehomeNeedReplication() {
	r, assign := c.n.rule, c.assign
	for f := range c.nf {
		if r.Types[f] != FactorNeedReplication || len(assign[f]) == 0 {
			continue
		}
		moved := assign[f]
		assign[f] = nil
		for _, a := range moved {
			if b, ok := c.batchingFactor(a); ok {
				assign[b] = mergeAppend(assign[b], a)
			}
		}
	}
}

// batchingFactor is the first pass-through, unblocked factor present in every tensor
// that axis a fits, its size divisible by its axes with a, and free of a on every
// tensor.
func (c *axisPick) batchingFactor(a axisRef) (int, bool) {
	r := c.n.rule
	for b := range c.nf {
		if r.Types[b] != FactorPassThrough || r.Blocked[b] {
			continue
		}
		inAll, free := true, true
		for q := range c.nt {
			if !c.p.proj[q*c.nf+b].present {
				inAll = false
				break
			}
			for _, list := range c.blocked[q] {
				for _, x := range list {
					free = free && !x.Overlaps(a)
				}
			}
		}
		if inAll && free && r.FactorSizes[b]%(product(c.assign[b])*int64(a.Size)) == 0 {
			return b, true
		}
	}
	return 0, false
}

// agrees fills assign and reports true when every factor has the same axes in every
// tensor that maps it, need-replication factors are unsharded, no overflow axes are
// involved and no axis serves two factors.
func (p *propagator) agrees(n *node, nf int, assign [][]axisRef) bool {
	r := n.rule
	for f := range nf {
		seen := false
		for t := range n.tensors {
			fs := &p.proj[t*nf+f]
			if !fs.present {
				continue
			}
			if len(fs.overflow) > 0 {
				return false
			}
			if !seen {
				assign[f], seen = fs.axes, true
			} else if !slices.Equal(assign[f], fs.axes) {
				return false
			}
		}
		if r.Types[f] == FactorNeedReplication && len(assign[f]) > 0 {
			return false
		}
	}
	for f := range nf {
		for g := f + 1; g < nf; g++ {
			for _, a := range assign[f] {
				for _, b := range assign[g] {
					if a.Overlaps(b) {
						return false
					}
				}
			}
		}
	}
	return true
}

func axesText(axes []axisRef) string {
	parts := make([]string, len(axes))
	for i, a := range axes {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}
