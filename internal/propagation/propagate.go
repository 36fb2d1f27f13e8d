package propagation

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strconv"

	"github.com/shardplan/shardplan/internal/sharding"
)

// direction is the way a factor may propagate through an op at a stage: operands to
// results (forward), results to operands (backward), both or none. Union is |,
// intersection &.
type direction uint8

const (
	dirNone     direction = 0
	dirForward  direction = 1
	dirBackward direction = 2
	dirBoth     direction = 3
)

// strategy is one conflict-resolution pass.
type strategy uint8

const (
	stratBasic strategy = iota
	stratAggressive
)

// factorSharding is one factor's sharding in one tensor of an op (step 1 projection).
type factorSharding struct {
	axes     []axisRef
	overflow []axisRef
	closed   bool
	minor    bool // minor-most factor of its dim
	present  bool
	dim      int
}

// key orders factors in the aggressive strategy.
type key struct {
	srcSize  int64
	candSize int64
	srcIdx   int
}

// propagator runs the fixpoint over a prepared graph. It is single-use and not safe for
// concurrent use.
type propagator struct {
	gs   *graphState
	opts Options

	// scratch reused across visits
	proj  []factorSharding // tensor position * factors
	base  [][]axisRef      // pre-visit factor axes, same layout
	cands [][]axisRef
	dirty []bool
	order []int
	keys  []key
	dirs  []direction // per factor, at the current stage
	// changed is writeBack's result, reused across visits
	changed []int
	// finals holds each tensor's layout once finalize has computed it
	settledAt []settledAt // per node
	finals    []sharding.Sharding
	haveFinal []bool
	slab      slab // the Result's shardings
	ruleTexts map[*Rule]string
	// cdims and caxes are computedDims' scratch (caxes also writeBack's), wbAxes
	// writeBack's.
	cdims  []sharding.DimSharding
	caxes  []axisRef
	wbAxes []axisRef
	srcBuf []byte // source's
	// factorChunk and shardingChunk hold the OpShardings' lists (cut).
	factorChunk   []FactorAxes
	shardingChunk []sharding.Sharding

	visits, updates, passes int
}

// Stats counts the work of one propagation.
type Stats struct {
	// Visits is the number of op visits over every pass.
	Visits int `json:"visits"`
	// Updates is the number of tensor dims that gained axes.
	Updates int `json:"updates"`
	// Passes is the number of fixpoint runs (user priorities x op-priority stages x
	// strategies).
	Passes int `json:"passes"`
}

// Propagate shards every tensor of g on mesh m with Shardy's algorithm (see the package
// documentation) and derives the sharding each op computes in, the reshards and
// reductions that needs, and where every axis came from. g is not modified. Errors:
// a *sharding.FieldError or sharding.Errors for an invalid graph (400-class), ctx's
// error when it is cancelled (setup included); nothing else on any input.
func Propagate(ctx context.Context, g *Graph, m *sharding.Mesh, opts Options) (*Result, error) {
	switch opts.ConflictResolution {
	case "":
		opts.ConflictResolution = Aggressive
	case Aggressive, Basic, BasicThenAggressive:
	default:
		return nil, sharding.Fieldf("options.conflict_resolution", "must be %q or %q, not %q", Aggressive, Basic, opts.ConflictResolution)
	}
	gs, err := prepare(ctx, g, m)
	if err != nil {
		return nil, err
	}
	p := &propagator{gs: gs, opts: opts}
	if err := p.run(ctx); err != nil {
		return nil, err
	}
	return p.finalize(ctx)
}

// run is the user-priority layer (step 7) around the op-priority layer (step 6).
func (p *propagator) run(ctx context.Context) error {
	gs := p.gs
	prios := map[int]bool{}
	for _, ts := range gs.tensors {
		if ts.ann == nil {
			ts.sh = p.openSharding(len(ts.shape))
			continue
		}
		ts.sh = p.slab.clone(*ts.ann)
		for d := range ts.sh.Dims {
			ds := &ts.sh.Dims[d]
			if len(ds.Axes) > 0 {
				ts.origins = append(ts.origins, Origin{Dim: d, Axes: slices.Clone(ds.Axes), From: "annotation"})
			}
			if ds.Priority > 0 {
				prios[ds.Priority] = true
				ts.deferred = append(ts.deferred, ds.Axes...)
				ts.origins = ts.origins[:len(ts.origins)-min(len(ts.origins), boolInt(len(ds.Axes) > 0))]
				ds.Axes, ds.Open = nil, false
				continue
			}
			ds.Priority = sharding.NoPriority
		}
	}
	p.applyConstraints()
	if err := p.opPriorityPasses(ctx); err != nil {
		return err
	}
	levels := make([]int, 0, len(prios))
	for pr := range prios {
		levels = append(levels, pr)
	}
	sort.Ints(levels)
	for _, level := range levels {
		for _, ts := range gs.tensors {
			if ts.ann == nil {
				continue
			}
			for d, ads := range ts.ann.Dims {
				if ads.Priority != level {
					continue
				}
				ts.sh.Dims[d] = sharding.DimSharding{Axes: slices.Clone(ads.Axes), Open: ads.Open, Priority: sharding.NoPriority}
				ts.deferred = slices.DeleteFunc(ts.deferred, func(r axisRef) bool { return slices.Contains(ads.Axes, r) })
				if len(ads.Axes) > 0 {
					ts.origins = append(ts.origins, Origin{Dim: d, Axes: slices.Clone(ads.Axes), From: fmt.Sprintf("annotation (priority p%d)", level)})
				}
			}
		}
		if err := p.opPriorityPasses(ctx); err != nil {
			return err
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// openSharding is a rank-dim sharding with every dim open and empty. The dims come
// from p's slab: writeBack clones a tensor's dims before it changes one.
func (p *propagator) openSharding(rank int) sharding.Sharding {
	s := sharding.Sharding{Dims: p.slab.dimsOf(rank)}
	for i := range s.Dims {
		s.Dims[i] = sharding.DimSharding{Open: true, Priority: sharding.NoPriority}
	}
	return s
}

// applyConstraints copies a fully closed sharding_constraint onto its operand when the
// operand has no annotation and no other constraint uses it (closedness does not
// propagate, so the operand would otherwise be free to differ).
func (p *propagator) applyConstraints() {
	gs := p.gs
	constraintUses := map[int]int{}
	for _, n := range gs.nodes {
		if n.kind == "sharding_constraint" {
			constraintUses[n.tensors[0]]++
		}
	}
	for _, n := range gs.nodes {
		if n.kind != "sharding_constraint" {
			continue
		}
		in, out := gs.tensors[n.tensors[0]], gs.tensors[n.tensors[1]]
		if in.ann != nil || out.ann == nil || constraintUses[n.tensors[0]] != 1 {
			continue
		}
		closed := true
		for _, d := range out.sh.Dims {
			closed = closed && !d.Open
		}
		if !closed || len(out.deferred) > 0 {
			continue
		}
		in.sh = out.sh.Clone()
		for d, ds := range in.sh.Dims {
			if len(ds.Axes) > 0 {
				in.origins = append(in.origins, Origin{Dim: d, Axes: slices.Clone(ds.Axes), From: fmt.Sprintf("sharding_constraint %s (copied from %s)", n.name, out.name)})
			}
		}
	}
}

// opPriorityPasses is step 6: five fixpoint runs with growing direction sets, or one run
// with every factor in both directions when op priorities are off.
func (p *propagator) opPriorityPasses(ctx context.Context) error {
	// Shardings may have changed outside a fixpoint (user priorities): nothing is settled.
	if len(p.settledAt) != len(p.gs.nodes) {
		p.settledAt = make([]settledAt, len(p.gs.nodes))
	}
	clear(p.settledAt)
	var strategies []strategy
	switch p.opts.ConflictResolution {
	case Basic:
		strategies = []strategy{stratBasic}
	case BasicThenAggressive:
		strategies = []strategy{stratBasic, stratAggressive}
	default:
		strategies = []strategy{stratAggressive}
	}
	stages := []int{-1}
	if p.opts.OpPriority {
		stages = []int{0, 1, 2, 3, 4}
	}
	for _, stage := range stages {
		for _, s := range strategies {
			if err := p.fixpoint(ctx, stage, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// direction returns how factor f of node n may propagate at stage (-1: no op
// priorities, everything both ways). It is the union of the schedule entries 0..stage.
func (p *propagator) direction(n *node, f, stage int) direction {
	if n.rule.Blocked[f] {
		return dirNone
	}
	if stage < 0 {
		return dirBoth
	}
	d := dirNone
	for s := 0; s <= stage && d != dirBoth; s++ {
		d |= scheduleEntry(n, f, s)
	}
	return d
}

// scheduleEntry is Shardy's op-priority schedule:
//
//	0: pass-through ops (elementwise, reshape, transpose, edges) both ways unless a
//	   non-scalar operand has several uses; dynamic_slice forward
//	1: the same ignoring multiple uses
//	2: every op, pass-through factors only; broadcast_in_dim backward only
//	3: every factor; broadcast_in_dim backward only
//	4: everything both ways
func scheduleEntry(n *node, f, s int) direction {
	switch s {
	case 0, 1:
		switch n.class {
		case classElementwise, classPassThrough:
			if s == 0 && n.multiUse {
				return dirNone
			}
			return dirBoth
		case classDynSlice:
			return dirForward
		}
		return dirNone
	case 2:
		if n.rule.Types[f] != FactorPassThrough {
			return dirNone
		}
		if n.class == classBroadcast {
			return dirBackward
		}
		return dirBoth
	case 3:
		if n.class == classBroadcast {
			return dirBackward
		}
		return dirBoth
	}
	return dirBoth
}

// fixpoint is step 5: a worklist over the nodes, seeded in topological order; a node is
// re-queued whenever a tensor it touches changes.
//
// Termination. A visit only ever replaces an open dim's axes by a list that strictly
// extends it (the guard in writeBack enforces it whatever the rule computes); closed
// dims, replicated, unreduced and deferred axes never change. A strict extension either
// multiplies the dim's shard count by at least 2 or appends a size-1 axis, and a dim's
// axes are disjoint pieces of the mesh, so one dim changes at most
// log2(devices) + len(mesh axes) times. The queue therefore receives at most
// nodes + updates*max(users) entries, which bounds the loop; maxPops is that bound, and
// exceeding it is reported as an internal error rather than looping.
func (p *propagator) fixpoint(ctx context.Context, stage int, s strategy) error {
	gs := p.gs
	p.passes++
	n := len(gs.nodes)
	inQueue := make([]bool, n)
	queue := make([]int, 0, n)
	for i := range gs.nodes {
		queue = append(queue, i)
		inQueue[i] = true
	}
	perDim := int64(bits.Len(uint(gs.mesh.NumDevices())) + len(gs.mesh.Axes) + 1)
	var dims, maxUsers int64
	for t, ts := range gs.tensors {
		dims += int64(len(ts.shape))
		maxUsers = max(maxUsers, int64(len(gs.users[t])))
	}
	maxPops := int64(n) + dims*perDim*maxUsers + 1
	var pops int64
	for head := 0; head < len(queue); head++ {
		pops++
		if pops > maxPops {
			return fmt.Errorf("internal error: propagation exceeded its proven bound of %d visits", maxPops)
		}
		if pops&255 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		i := queue[head]
		inQueue[i] = false
		if head > 4*n && head > 1024 { // compact the consumed prefix
			queue = append(queue[:0], queue[head+1:]...)
			head = -1
		}
		n := gs.nodes[i]
		if p.settled(i, n, stage, s) {
			p.visits++ // the visit would change nothing
			continue
		}
		changed := p.visit(n, stage, s)
		if len(changed) == 0 {
			p.settledAt[i] = settledAt{ok: true, stage: stage, strat: s}
		}
		for _, t := range changed {
			for _, u := range gs.users[t] {
				p.settledAt[u].ok = false
				if !inQueue[u] {
					inQueue[u] = true
					queue = append(queue, u)
				}
			}
		}
	}
	return nil
}

// settledAt records that a node's last visit changed nothing, at which stage and with
// which strategy; any change to one of its tensors clears it.
type settledAt struct {
	ok    bool
	stage int
	strat strategy
}

// settled reports whether visiting node i (n) at stage with strategy s is known to
// change nothing: its last visit changed nothing, none of its tensors changed since, and
// the strategy and every factor's direction are the same now. A visit depends only on
// those, so it would change nothing again. This skips most of the seeding visits of the
// later op-priority stages, where a node's directions no longer grow.
func (p *propagator) settled(i int, n *node, stage int, s strategy) bool {
	st := p.settledAt[i]
	if !st.ok || st.strat != s || p.opts.revisitSettled {
		return false
	}
	if st.stage == stage {
		return true
	}
	for f := range n.rule.FactorSizes {
		if p.direction(n, f, st.stage) != p.direction(n, f, stage) {
			return false
		}
	}
	return true
}

// project fills p.proj (and p.base) with the factor shardings of every tensor of n
// (step 1).
func (p *propagator) project(n *node) int {
	r := n.rule
	nf := len(r.FactorSizes)
	nt := len(n.tensors)
	size := nt * nf
	if cap(p.proj) < size {
		p.proj = make([]factorSharding, size)
		p.base = make([][]axisRef, size)
	}
	p.proj = p.proj[:size]
	p.base = p.base[:size]
	clear(p.proj)
	for t, id := range n.tensors {
		row := p.proj[t*nf : (t+1)*nf]
		projectTensor(p.gs.tensors[id].sh, r, r.Dims(t), row)
		for f := range nf {
			p.base[t*nf+f] = row[f].axes
		}
	}
	return nf
}

// projectTensor projects a tensor sharding onto the factors of its dims: non-minor
// factors take whole axes or split sub-axes (gcd) up to their size, a factor that cannot
// take the next axis gets the rest as overflow axes (and later factors of the dim become
// closed and empty), and the minor-most factor takes whatever remains, divisible or not.
func projectTensor(sh sharding.Sharding, r *Rule, dims [][]int, row []factorSharding) {
	for d, fs := range dims {
		ds := sh.Dims[d]
		axes := ds.Axes
		ai := 0
		var cur axisRef
		haveCur := false
		overflowed := false
		for k, f := range fs {
			fsh := &row[f]
			fsh.present, fsh.dim, fsh.closed, fsh.minor = true, d, !ds.Open, k == len(fs)-1
			if overflowed {
				fsh.closed = true
				continue
			}
			if fsh.minor {
				if haveCur {
					fsh.axes = append(append(make([]axisRef, 0, 1+len(axes)-ai), cur), axes[ai:]...)
				} else if ai < len(axes) {
					fsh.axes = axes[ai:len(axes):len(axes)]
				}
				break
			}
			rem := r.FactorSizes[f]
			for rem > 1 {
				if !haveCur {
					if ai == len(axes) {
						break
					}
					cur, haveCur = axes[ai], true
					ai++
				}
				s := int64(cur.Size)
				g := gcd(rem, s)
				switch {
				case g == s:
					fsh.axes = append(fsh.axes, cur)
					haveCur = false
					rem /= s
				case g > 1:
					fsh.axes = append(fsh.axes, cur.Sub(cur.Pre, int(g)))
					cur = cur.Sub(cur.Pre*int(g), cur.Size/int(g))
					rem /= g
				default:
					fsh.overflow = append([]axisRef{cur}, axes[ai:]...)
					haveCur, ai, overflowed = false, len(axes), true
				}
				if overflowed {
					break
				}
			}
		}
	}
}

// visit runs steps 1-4 on one node and returns the tensors whose sharding changed (a
// slice reused by the next visit).
//
// A visit where no factor may propagate at this stage, or where no tensor of the node
// has an axis on any dim, finds no compatible axes for any factor: it returns before
// projecting.
func (p *propagator) visit(n *node, stage int, s strategy) []int {
	p.visits++
	nf := len(n.rule.FactorSizes)
	p.dirs = p.dirs[:0]
	open := false
	for f := range nf {
		d := p.direction(n, f, stage)
		p.dirs = append(p.dirs, d)
		open = open || d != dirNone
	}
	if !open || !p.anyAxes(n) {
		return nil
	}
	p.project(n)
	nt := len(n.tensors)
	if cap(p.cands) < nf {
		p.cands = make([][]axisRef, nf)
	}
	p.cands = p.cands[:nf]
	any := false
	for f := range nf {
		p.cands[f] = p.compatible(n, nf, f, p.dirs[f])
		any = any || len(p.cands[f]) > 0
	}
	if !any {
		return nil
	}
	if cap(p.dirty) < nt {
		p.dirty = make([]bool, nt)
	}
	p.dirty = p.dirty[:nt]
	clear(p.dirty)
	if s == stratBasic {
		p.basic(n, nf)
	} else {
		p.aggressive(n, nf)
	}
	return p.writeBack(n, nf)
}

// anyAxes reports whether some dim of some tensor of n has axes: without any, every
// factor projection is empty and no factor has compatible axes.
func (p *propagator) anyAxes(n *node) bool {
	for _, id := range n.tensors {
		for _, d := range p.gs.tensors[id].sh.Dims {
			if len(d.Axes) > 0 {
				return true
			}
		}
	}
	return false
}

// compatible is step 2: the compatible major axes of factor f folded over the tensors
// in direction dir.
func (p *propagator) compatible(n *node, nf, f int, dir direction) []axisRef {
	if dir == dirNone {
		return nil
	}
	var cur []axisRef
	canExpand := true
	fold := func(from, to int) {
		for t := from; t < to; t++ {
			if fs := &p.proj[t*nf+f]; fs.present {
				cur, canExpand = foldCompatible(cur, fs.axes, canExpand)
			}
		}
	}
	nt := len(n.tensors)
	if dir == dirBackward {
		fold(n.nOperands, nt)
		canExpand = false
		fold(0, n.nOperands)
		return cur
	}
	fold(0, n.nOperands)
	if dir == dirForward {
		canExpand = false
	}
	fold(n.nOperands, nt)
	return cur
}

// within is the within-factor check for tensor t and factor f: no replicated, unreduced
// or deferred axis, and expansion only where the factor is open, has no overflow, and the
// axis divides what is left of the factor (the minor-most factor takes anything).
func (p *propagator) within(n *node, nf, t, f int, a axisRef, prev int64) (axisRef, bool) {
	ts := p.gs.tensors[n.tensors[t]]
	var ok bool
	for k := range 3 {
		list := ts.sh.Replicated
		switch k {
		case 1:
			list = ts.sh.Unreduced
		case 2:
			list = ts.deferred
		}
		for _, r := range list {
			if a, ok = prefixWithoutOverlap(a, r); !ok {
				return a, false
			}
		}
	}
	fs := &p.proj[t*nf+f]
	for _, x := range fs.axes {
		if x.Contains(a) {
			return a, true
		}
	}
	fallback := func() (axisRef, bool) {
		if k := len(fs.axes); k > 0 && isAxisPrefix(fs.axes[k-1], a) {
			return fs.axes[k-1], true
		}
		return a, false
	}
	if fs.closed || len(fs.overflow) > 0 {
		return fallback()
	}
	if fs.minor {
		return a, true
	}
	size := n.rule.FactorSizes[f]
	if size%prev != 0 {
		return fallback()
	}
	g := gcd(size/prev, int64(a.Size))
	switch {
	case g == int64(a.Size):
		return a, true
	case g > 1:
		return a.Sub(a.Pre, int(g)), true
	}
	return fallback()
}

// across is the across-factor check for tensor t: no overlap with the axes (or overflow
// axes) of any other factor of t.
func (p *propagator) across(nf, t, f int, a axisRef) (axisRef, bool) {
	row := p.proj[t*nf : (t+1)*nf]
	var ok bool
	for g := range row {
		if g == f || !row[g].present {
			continue
		}
		for _, x := range row[g].axes {
			if a, ok = prefixWithoutOverlap(a, x); !ok {
				return a, false
			}
		}
		for _, x := range row[g].overflow {
			if a, ok = prefixWithoutOverlap(a, x); !ok {
				return a, false
			}
		}
	}
	return a, true
}

// basic is the basic strategy: per factor in index order, truncate the candidate
// against every tensor and expand every tensor it strictly extends; the expansion is
// visible to the across-factor checks of later factors.
func (p *propagator) basic(n *node, nf int) {
	nt := len(n.tensors)
	for f := range nf {
		c := p.cands[f]
		for t := 0; t < nt && len(c) > 0; t++ {
			present := p.proj[t*nf+f].present
			c = truncate(c, func(a axisRef, prev int64) (axisRef, bool) {
				b, ok := a, true
				if present {
					if b, ok = p.within(n, nf, t, f, a, prev); !ok {
						return b, false
					}
				}
				return p.across(nf, t, f, b)
			})
		}
		if len(c) == 0 {
			continue
		}
		for t := range nt {
			fs := &p.proj[t*nf+f]
			if fs.present && isStrictPrefix(fs.axes, c) {
				fs.axes = c
				p.dirty[t] = true
			}
		}
	}
}

// aggressive is the aggressive strategy: factors ordered by the size of the tensor
// their candidate comes from; each tensor (results first) takes as much of each
// candidate as it can on its own, earlier factors claiming shared axes first.
func (p *propagator) aggressive(n *node, nf int) {
	nt := len(n.tensors)
	keys := p.keys[:0]
	for range nf {
		keys = append(keys, key{})
	}
	p.keys = keys
	p.order = p.order[:0]
	elementwise := n.class == classElementwise
	for f := range nf {
		p.order = append(p.order, f)
		c := p.cands[f]
		if len(c) == 0 {
			keys[f] = key{srcSize: -1, srcIdx: nt}
			continue
		}
		k := key{srcSize: 0, srcIdx: nt}
		for t := range nt {
			fs := &p.proj[t*nf+f]
			if fs.present && isPrefixOrEqual(c, fs.axes) && n.elems[t] > k.srcSize {
				k.srcSize, k.srcIdx = n.elems[t], t
			}
		}
		if elementwise {
			k.candSize = product(c)
		}
		keys[f] = k
	}
	slices.SortFunc(p.order, func(i, j int) int {
		a, b := keys[i], keys[j]
		switch {
		case a.srcSize != b.srcSize:
			return cmp.Compare(b.srcSize, a.srcSize)
		case a.candSize != b.candSize:
			return cmp.Compare(b.candSize, a.candSize)
		case a.srcIdx != b.srcIdx:
			return cmp.Compare(a.srcIdx, b.srcIdx)
		}
		return cmp.Compare(i, j)
	})
	visitTensor := func(t int) {
		for _, f := range p.order {
			fs := &p.proj[t*nf+f]
			if !fs.present || len(p.cands[f]) == 0 {
				continue
			}
			c := truncate(p.cands[f], func(a axisRef, prev int64) (axisRef, bool) { return p.within(n, nf, t, f, a, prev) })
			if !isStrictPrefix(fs.axes, c) {
				continue
			}
			c = truncate(c, func(a axisRef, _ int64) (axisRef, bool) { return p.across(nf, t, f, a) })
			if elementwise && t < n.nOperands {
				for r := n.nOperands; r < nt; r++ {
					if rs := &p.proj[r*nf+f]; rs.present && isStrictPrefix(rs.axes, c) {
						c = rs.axes
					}
				}
			}
			if isStrictPrefix(fs.axes, c) {
				fs.axes = c
				p.dirty[t] = true
			}
		}
	}
	for t := n.nOperands; t < nt; t++ {
		visitTensor(t)
	}
	for t := range n.nOperands {
		visitTensor(t)
	}
}

// writeBack is step 4: per dirty tensor, concatenate each dim's factor axes (stopping
// after the first factor that is not fully sharded, re-appending overflow axes) and
// store the dims that strictly grew. It returns the changed tensor ids.
func (p *propagator) writeBack(n *node, nf int) []int {
	changed := p.changed[:0]
	r := n.rule
	for t, id := range n.tensors {
		if !p.dirty[t] {
			continue
		}
		ts := p.gs.tensors[id]
		row := p.proj[t*nf : (t+1)*nf]
		grew := false
		for d, fs := range r.Dims(t) {
			old := ts.sh.Dims[d]
			if !old.Open {
				continue
			}
			touched := false
			for _, f := range fs {
				touched = touched || !slices.Equal(row[f].axes, p.base[t*nf+f])
			}
			if !touched {
				continue
			}
			// The dim's new axes are built in scratch and kept (in p's slab) only if stored.
			axes := p.wbAxes[:0]
			for _, f := range fs {
				axes = append(axes, row[f].axes...)
				if len(row[f].overflow) > 0 {
					axes = append(axes, row[f].overflow...)
					break
				}
				if product(row[f].axes) < r.FactorSizes[f] {
					break
				}
			}
			axes = sharding.MergeAdjacent(axes)
			p.wbAxes = axes
			if !isStrictPrefix(old.Axes, axes) || !p.fits(ts, d, axes) {
				continue
			}
			if !grew {
				ts.sh = p.cloneDims(ts.sh)
				grew = true
			}
			axes = p.slab.copyOf(axes)
			ts.sh.Dims[d] = sharding.DimSharding{Axes: axes, Open: true, Priority: old.Priority}
			p.updates++
			p.caxes = appendSuffixAfter(p.caxes[:0], old.Axes, axes)
			ts.origins = append(ts.origins, Origin{Dim: d, Axes: p.slab.copyOf(p.caxes), From: p.source(n, nf, t, fs, row)})
		}
		if grew && !slices.Contains(changed, id) {
			changed = append(changed, id)
		}
	}
	p.changed = changed
	return changed
}

// fits reports whether axes can shard dim d of ts without overlapping its other dims
// or its replicated, unreduced or deferred axes (a safety net; the checks of step 3
// already ensure it).
func (p *propagator) fits(ts *tensorState, d int, axes []axisRef) bool {
	for _, a := range axes {
		for e, ds := range ts.sh.Dims {
			if e == d {
				continue
			}
			for _, b := range ds.Axes {
				if a.Overlaps(b) || !a.CanCoexist(b) {
					return false
				}
			}
		}
		for _, list := range [][]axisRef{ts.sh.Replicated, ts.sh.Unreduced, ts.deferred} {
			for _, b := range list {
				if a.Overlaps(b) || !a.CanCoexist(b) {
					return false
				}
			}
		}
	}
	return true
}

// cloneDims is s with its dims copied (into p's slab), before writeBack changes one.
func (p *propagator) cloneDims(s sharding.Sharding) sharding.Sharding {
	out := s
	if s.Dims != nil {
		out.Dims = p.slab.dimsOf(len(s.Dims))
		copy(out.Dims, s.Dims)
	}
	return out
}

// source describes where the new axes of a dim came from: the first other tensor of
// the node that already had them on the factor that grew. The text is built in one
// buffer: every update of a large graph records one.
func (p *propagator) source(n *node, nf, t int, fs []int, row []factorSharding) string {
	b := p.srcBuf[:0]
	for _, f := range fs {
		if slices.Equal(row[f].axes, p.base[t*nf+f]) {
			continue
		}
		from := -1 // the tensor position it came from
		for q := range n.tensors {
			if q == t || !p.proj[q*nf+f].present {
				continue
			}
			if isPrefixOrEqual(row[f].axes, p.base[q*nf+f]) || (from < 0 && len(p.base[q*nf+f]) > 0) {
				from = q
				if isPrefixOrEqual(row[f].axes, p.base[q*nf+f]) {
					break
				}
			}
		}
		if len(b) > 0 {
			b = append(b, "; "...)
		}
		if from < 0 {
			b = append(b, "op"...)
		} else {
			b = append(b, p.gs.tensors[n.tensors[from]].name...)
			b = append(b, " dim "...)
			b = strconv.AppendInt(b, int64(p.proj[from*nf+f].dim), 10)
		}
		b = append(b, " through "...)
		b = append(b, n.name...)
		b = append(b, " (factor "...)
		b = append(b, FactorName(f)...)
		b = append(b, ')')
	}
	p.srcBuf = b
	return string(b)
}
