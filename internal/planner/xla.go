package planner

import (
	"context"
	"fmt"
	"slices"

	"github.com/shardplan/shardplan/internal/sharding"
)

// This file emulates XLA GSPMD's PartitionedHlo::ReshardNoCache (RESHARDING.md §6): the
// "xla" strategy predicts the collectives XLA emits for a reshard, including its
// involuntary full rematerialization, and suggests sharding constraints that avoid it.
//
// XLA sees a sharding as an HloSharding: per-dim tile counts, a replication count
// (last_tile_dim_replicate) and a device order. The emulation works on atoms (every mesh
// axis of size > 1, split at every sub-axis boundary the shardings use and into prime
// factors), so every tile assignment XLA derives by reshape/transpose of the mesh's iota
// is a list of atoms per dim; the atoms in no dim form the replication dim, in mesh order.
// Decisions follow XLA's count-based rules; each emitted step is expressed in mesh axes
// and priced with r.Model like the optimal plans.
//
// Uneven dims: XLA pads each dim to a multiple of its shard count. Where a slice from a
// partially replicated tiling or an all-gather to one moves a tile boundary, XLA fills
// windows of the padded dim by exchanging halos with collective-permutes first; those
// are emitted as they are (xla_halo.go).
//
// Deviations, kept deliberately small:
//   - an all-to-all whose padded tiles do not line up with the flat-ceil tiles (XLA
//     pads the split dim and slices the concatenated one with windowed reshards, which
//     may exchange halos too), and an all-gather to a partially replicated tiling that
//     needs halos on two or more dims (XLA gathers their windows in one all-gather),
//     are emitted as all_to_all_v between the same shardings;
//   - the order of replicated devices inside a replication group is always mesh order,
//     so a collective-permute that only reorders replicas is not predicted;
//   - tiny dims (full size <= partitions/2), which XLA replicates with
//     dynamic-update-slice + all-reduce, are gathered with all_gather;
//   - the merge/split rule's variant without a dim j (split any dim whose source count
//     exceeds the target's) is not emulated, and dims are grouped (rule 7) only when both
//     shardings use the same axes on them;
//   - partial sums the target does not keep are all-reduced first (XLA's Reshard never
//     sees them; its dot and reduce handlers do this).

// XLAInfo is what the xla strategy reports beside its plan.
type XLAInfo struct {
	// SourceHlo and TargetHlo are the endpoints in XLA's HloSharding text.
	SourceHlo, TargetHlo string
	// Fallback is true when XLA's last resort runs (it logs Warning): at the top level it
	// replicates the whole tensor; inside device groups (rule 7) it replicates per group.
	Fallback bool
	// Warning is XLA's log line for the fallback ("" without one).
	Warning string
	// Suggested are intermediate shardings (from the optimal plan's states) that, inserted
	// as sharding constraints, let XLA do each hop without the fallback.
	Suggested []Suggestion
	// SuggestionNote says why Suggested is empty after a fallback ("" otherwise).
	SuggestionNote string
	// Chain is XLA's plan through the suggested constraints (nil without suggestions).
	Chain *Plan
	// Path names the ReshardNoCache branches taken, outermost first: replicated_source,
	// replicate, collective_permute, all_to_all, partial_dynamic_slice,
	// partial_all_gather, partial_all_to_all, merge_split, replicate_dim (rule b),
	// replication_to_dim (rule c), group_equal_dims, full_rematerialization.
	Path []string
}

// Suggestion is one intermediate sharding constraint.
type Suggestion struct {
	Sharding sharding.Sharding
	// PartitionSpec is the JAX form, e.g. P('D', ('X','Y')); "" when a sub-axis makes it
	// inexpressible in a PartitionSpec (use Shardy then).
	PartitionSpec string
	// Shardy is the Shardy text: sharding<@mesh, [{"D"}, {"X", "Y"}]>.
	Shardy string
}

// ReshardXLA predicts XLA's reshard of r.Source to r.Target. r.AllowedOps is ignored:
// the plan is what XLA emits. The error is a *sharding.FieldError for requests the
// planner cannot express, or ctx's error.
func ReshardXLA(ctx context.Context, r *Request) (*Plan, *XLAInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	r = r.withMemos().withDone(ctx)
	p, e, err := xlaPlan(r)
	if err == nil {
		err = ctx.Err() // a router may have stopped: its prices are meaningless
	}
	if err != nil {
		return nil, nil, err
	}
	info := &XLAInfo{
		SourceHlo: r.Source.HLO(r.Mesh),
		TargetHlo: r.Target.HLO(r.Mesh),
		Fallback:  e.fallback,
		Path:      e.path,
	}
	if e.fallback {
		info.Warning = "[SPMD] Involuntary full rematerialization. The compiler cannot go from sharding " + info.SourceHlo + " to " + info.TargetHlo +
			" efficiently for this reshard. As the last resort, SPMD will replicate the tensor and then partition it to obtain the target sharding, which is inefficient. This issue will be fixed by Shardy partitioner in the future, which is tracked in b/433785288."
		info.Suggested, info.Chain, info.SuggestionNote = suggestXLAWith(ctx, r, e.bounds)
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
	}
	return p, info, nil
}

// xlaPlan runs the emulation and builds the priced plan.
func xlaPlan(r *Request) (*Plan, *xlaEmu, error) {
	e, err := xlaEmulate(r)
	if err != nil {
		return nil, nil, err
	}
	p := &Plan{Request: r, sp: e.sp, name: "xla", Steps: e.steps()}
	e.bounds = boundsOf(r)
	p.finishWith(e.bounds)
	p.Summary.Strategy = XLA
	return p, e, nil
}

// xlaEmulate runs the emulation: the moves XLA makes and whether it falls back, not yet
// priced.
func xlaEmulate(r *Request) (*xlaEmu, error) {
	src, tgt := r.Source, r.Target
	reduce, err := reducedRefs(src, tgt)
	if err != nil {
		return nil, err
	}
	sp, ok := xlaSpace(r.Mesh, r.Shape, r.ElemBits, src, tgt)
	if !ok {
		return nil, sharding.Fieldf("target", "the source and target use sub-axes of one mesh axis that fit no common factorisation; XLA's tile assignments cannot express this reshard")
	}
	sp.done = r.done
	e := &xlaEmu{sp: sp, r: r, fixedDims: make([]bool, len(r.Shape)), unr: tgt.Unreduced}
	e.keptUnreduced = maskOf(sp.atomsOf(tgt.Unreduced))
	e.fixed = e.keptUnreduced
	start, goal := sp.stateOf(src), sp.stateOf(tgt)
	if len(reduce) > 0 {
		e.moves = append(e.moves, move{op: OpAllReduce, group: sp.atomsOf(reduce), before: start, after: start.clone(), unrBefore: src.Unreduced, unrAfter: tgt.Unreduced, reduceRefs: reduce})
	}
	if !e.reshard(start, goal, true) {
		return nil, fmt.Errorf("xla emulation found no plan from %s to %s", src, tgt) // unreachable: the fallback always applies
	}
	return e, nil
}

// xlaSpace splits every mesh axis of size > 1 into atoms: the common refinement of the
// sub-axis boundaries the shardings use, split into prime factors.
func xlaSpace(m *sharding.Mesh, shape []int64, elemBits int, shs ...sharding.Sharding) (*space, bool) {
	bounds := map[string][]int{}
	for _, s := range shs {
		for _, r := range s.UsedAxes() {
			bounds[r.Name] = append(bounds[r.Name], r.Pre, r.Next())
		}
	}
	sp := &space{mesh: m, shape: shape, elemBits: elemBits}
	for _, ax := range m.Axes {
		if ax.Size == 1 {
			continue
		}
		b := append(slices.Clone(bounds[ax.Name]), 1, ax.Size)
		slices.Sort(b)
		b = slices.Compact(b)
		for i := 0; i+1 < len(b); i++ {
			if b[i+1]%b[i] != 0 {
				return nil, false
			}
			pre := b[i]
			for _, p := range primeFactors(b[i+1] / b[i]) {
				sp.atoms = append(sp.atoms, sharding.AxisRef{Name: ax.Name, Pre: pre, Size: p, Of: ax.Size})
				pre *= p
			}
		}
	}
	sp.setBinary()
	return sp, len(sp.atoms) <= 60
}

func maskOf(ids []uint8) uint64 {
	var m uint64
	for _, a := range ids {
		m |= 1 << a
	}
	return m
}

// xlaEmu emulates ReshardNoCache on atom states, collecting moves.
type xlaEmu struct {
	sp            *space
	r             *Request
	moves         []move
	fixedDims     []bool // dims grouped away (rule 7): count 1 to the rules, never touched
	fixed         uint64 // atoms that are not replication: grouped dims', kept partial sums'
	keptUnreduced uint64
	unr           []sharding.AxisRef
	fallback      bool
	depth         int
	path          []string
	bounds        reshardBounds // r's lower bounds, set by xlaPlan
}

func (e *xlaEmu) took(branch string) { e.path = append(e.path, branch) }

func (e *xlaEmu) counts(st state) []int {
	c := make([]int, len(st))
	for d := range st {
		c[d] = 1
		if !e.fixedDims[d] {
			c[d] = e.sp.count(st[d])
		}
	}
	return c
}

// rep lists the replication dim's atoms in mesh order.
func (e *xlaEmu) rep(st state) []uint8 {
	used := st.used() | e.fixed
	var out []uint8
	for a := range e.sp.atoms {
		if used&(1<<a) == 0 {
			out = append(out, uint8(a))
		}
	}
	return out
}

func (e *xlaEmu) repCount(st state) int { return e.sp.count(e.rep(st)) }

// replicated: every (ungrouped) dim has count 1 (XLA's IsReplicated/IsTileMaximal).
func (e *xlaEmu) replicated(st state) bool {
	for _, c := range e.counts(st) {
		if c > 1 {
			return false
		}
	}
	return true
}

// partial: tiled with a replication dim (ReplicateOnLastTileDim).
func (e *xlaEmu) partial(st state) bool { return !e.replicated(st) && e.repCount(st) > 1 }

func (e *xlaEmu) push(op Op, before, after state, group []uint8, dim, dim2 int) {
	e.moves = append(e.moves, move{op: op, dim: dim, dim2: dim2, group: group, before: before.clone(), after: after.clone(), unrBefore: e.unr, unrAfter: e.unr})
}

// reshard follows ReshardNoCache's dispatch from cur to tgt. It reports whether it
// reached tgt; on false it leaves no moves behind.
func (e *xlaEmu) reshard(cur, tgt state, allowFull bool) bool {
	if cur.equal(tgt) {
		return true
	}
	if e.depth > 16 {
		return false
	}
	e.depth++
	defer func() { e.depth-- }()
	mark, pmark := len(e.moves), len(e.path)
	fb := e.fallback
	restore := func() bool { e.moves, e.path = e.moves[:mark], e.path[:pmark]; e.fallback = fb; return false }
	switch {
	case e.replicated(cur): // partition a replicated tensor: dynamic-slice
		e.took("replicated_source")
		e.push(OpSlice, cur, tgt, nil, -1, -1)
		return true
	case e.replicated(tgt): // Replicate(): all-gather every sharded dim
		e.took("replicate")
		e.gatherAll(cur)
		return true
	}
	if e.tryCollectivePermute(cur, tgt) || e.tryAllToAll(cur, tgt) {
		return true
	}
	if e.partial(cur) && (e.fromPartialWithDynamicSlice(cur, tgt) || e.partialWithAllToAll(cur, tgt)) {
		return true
	}
	if e.partial(tgt) && (e.toPartialWithAllGather(cur, tgt) || e.partialWithAllToAll(cur, tgt)) {
		return true
	}
	if e.tryComplex(cur, tgt) || e.groupEqualDims(cur, tgt, allowFull) {
		return true
	}
	restore()
	if !allowFull {
		return false
	}
	// [SPMD] Involuntary full rematerialization.
	e.fallback = true
	e.took("full_rematerialization")
	after := e.gatherAll(cur)
	if !after.equal(tgt) {
		e.push(OpSlice, after, tgt, nil, -1, -1)
	}
	return true
}

// gatherAll all-gathers every sharded (ungrouped) dim, last dim first (the order of the
// seed 003 case 4 dump), and returns the replicated state.
func (e *xlaEmu) gatherAll(cur state) state {
	for d := len(cur) - 1; d >= 0; d-- {
		if e.fixedDims[d] || len(cur[d]) == 0 {
			continue
		}
		nx := cur.clone()
		nx[d] = nil
		e.push(OpAllGather, cur, nx, slices.Clone(cur[d]), d, -1)
		cur = nx
	}
	return cur
}

// tryCollectivePermute: CanReshardWithCollectivePermute (identical tile dims, different
// device assignment).
func (e *xlaEmu) tryCollectivePermute(cur, tgt state) bool {
	if !slices.Equal(e.counts(cur), e.counts(tgt)) || !e.sameFixed(cur, tgt) {
		return false
	}
	e.took("collective_permute")
	e.push(OpCollectivePermute, cur, tgt, changedAtoms(cur, tgt), -1, -1)
	return true
}

func (e *xlaEmu) sameFixed(a, b state) bool {
	for d := range a {
		if e.fixedDims[d] && !slices.Equal(a[d], b[d]) {
			return false
		}
	}
	return true
}

// allToAllPairs is GetReshardAllToAllSourceTargetDims on tile counts: (source_dim,
// target_dim) pairs, each swapping the counts of two dims.
func allToAllPairs(sc, tc []int) ([][2]int, bool) {
	srcBy, tgtBy := map[int][]int{}, map[int][]int{}
	for i := range sc {
		if sc[i] != tc[i] {
			srcBy[sc[i]] = append(srcBy[sc[i]], i)
			tgtBy[tc[i]] = append(tgtBy[tc[i]], i)
		}
	}
	if len(srcBy) == 0 || len(srcBy) != len(tgtBy) {
		return nil, false
	}
	for k, v := range srcBy {
		if len(tgtBy[k]) != len(v) {
			return nil, false
		}
	}
	remove := func(m map[int][]int, size, dim int) {
		m[size] = slices.DeleteFunc(m[size], func(a int) bool { return a == dim })
		if len(m[size]) == 0 {
			delete(m, size)
		}
	}
	var out [][2]int
	for len(srcBy) > 0 {
		ss := -1
		for k := range srcBy {
			if ss < 0 || k < ss {
				ss = k
			}
		}
		lst := srcBy[ss]
		i := lst[len(lst)-1]
		ti := tc[i]
		if ti == ss {
			remove(srcBy, ss, i)
			remove(tgtBy, ss, i)
			continue
		}
		cands := srcBy[ti]
		if len(cands) == 0 {
			return nil, false
		}
		k, j := 0, cands[0]
		switch {
		case ss == 1:
			for tc[j] == 1 {
				if k++; k == len(cands) {
					break
				}
				j = cands[k]
			}
		case ti%ss == 0:
			for tc[j] != ss {
				if k++; k == len(cands) {
					break
				}
				j = cands[k]
			}
		default:
			return nil, false
		}
		out = append(out, [2]int{j, i})
		remove(tgtBy, ti, i)
		srcBy[ss][len(lst)-1] = j
		remove(srcBy, ti, j)
		if len(out) > 64 {
			return nil, false
		}
	}
	return out, true
}

// tryAllToAll: ReshardWithAllToAll over the pairs, then a collective-permute when the
// device order still differs.
func (e *xlaEmu) tryAllToAll(cur, tgt state) bool {
	if e.partial(cur) != e.partial(tgt) || e.repCount(cur) != e.repCount(tgt) || !e.sameFixed(cur, tgt) {
		return false
	}
	pairs, ok := allToAllPairs(e.counts(cur), e.counts(tgt))
	if !ok {
		return false
	}
	mark := len(e.moves)
	for _, pr := range pairs {
		c := e.counts(cur)
		from, to := pr[0], pr[1]
		if c[from]%c[to] != 0 {
			e.moves = e.moves[:mark]
			return false
		}
		nx, group, ok := moveSuffix(e.sp, cur, from, to, c[from]/c[to])
		if !ok {
			e.moves = e.moves[:mark]
			return false
		}
		e.push(OpAllToAll, cur, nx, group, from, to)
		cur = nx
	}
	if !cur.equal(tgt) {
		if !slices.Equal(e.counts(cur), e.counts(tgt)) {
			e.moves = e.moves[:mark]
			return false
		}
		e.push(OpCollectivePermute, cur, tgt, changedAtoms(cur, tgt), -1, -1)
	}
	e.took("all_to_all")
	return true
}

// moveSuffix moves the minor-most atoms of dim from whose sizes multiply to g to the
// minor end of dim to.
func moveSuffix(sp *space, st state, from, to, g int) (state, []uint8, bool) {
	if g <= 1 {
		return nil, nil, false
	}
	p, k := 1, len(st[from])
	for k > 0 && p < g {
		k--
		p *= sp.atoms[st[from][k]].Size
	}
	if p != g {
		return nil, nil, false
	}
	nx := st.clone()
	group := slices.Clone(st[from][k:])
	nx[from] = nx[from][:k]
	nx[to] = append(nx[to], group...)
	return nx, group, true
}

// takePrefix splits the major atoms of ids whose sizes multiply to n off ids.
func takePrefix(sp *space, ids []uint8, n int) ([]uint8, []uint8, bool) {
	p, k := 1, 0
	for k < len(ids) && p < n {
		p *= sp.atoms[ids[k]].Size
		k++
	}
	if p != n {
		return nil, nil, false
	}
	return ids[:k], ids[k:], true
}

// refines reports whether every (ungrouped) dim of fine starts with coarse's atoms: each
// device's fine tile lies in its coarse tile (IsSubTilingOrEqualSharding).
func (e *xlaEmu) refines(fine, coarse state) bool {
	for d := range fine {
		if e.fixedDims[d] {
			continue
		}
		if len(fine[d]) < len(coarse[d]) || !slices.Equal(fine[d][:len(coarse[d])], coarse[d]) {
			return false
		}
	}
	return true
}

// compatible is PartialReplicateReshardCompatibleSharding(partial, other): every count
// of other is a multiple of partial's; the expansions come, in dim order, from the major
// end of partial's replication dim.
func (e *xlaEmu) compatible(partial, other state) (state, []int, bool) {
	pc, oc := e.counts(partial), e.counts(other)
	out := partial.clone()
	rep := e.rep(partial)
	var expanded []int
	for d := range pc {
		if oc[d]%pc[d] != 0 {
			return nil, nil, false
		}
		if x := oc[d] / pc[d]; x > 1 {
			var take []uint8
			var ok bool
			take, rep, ok = takePrefix(e.sp, rep, x)
			if !ok {
				return nil, nil, false
			}
			out[d] = append(out[d], take...)
			expanded = append(expanded, d)
		}
	}
	return out, expanded, true
}

// fromPartialWithDynamicSlice: ReshardFromPartialReplicateWithDynamicSlice.
func (e *xlaEmu) fromPartialWithDynamicSlice(cur, tgt state) bool {
	if !e.sameFixed(cur, tgt) {
		return false
	}
	if e.refines(tgt, cur) {
		e.took("partial_dynamic_slice")
		e.padFromPartial(cur, tgt)
		e.push(OpSlice, cur, tgt, nil, -1, -1)
		return true
	}
	comp, _, ok := e.compatible(cur, tgt)
	if !ok {
		return false
	}
	e.took("partial_dynamic_slice")
	e.padFromPartial(cur, comp)
	e.push(OpSlice, cur, comp, nil, -1, -1)
	if !comp.equal(tgt) {
		e.push(OpCollectivePermute, comp, tgt, changedAtoms(comp, tgt), -1, -1)
	}
	return true
}

// toPartialWithAllGather: ReshardToPartialReplicateWithAllGather.
func (e *xlaEmu) toPartialWithAllGather(cur, tgt state) bool {
	if !e.sameFixed(cur, tgt) {
		return false
	}
	comp, expanded, ok := e.compatible(tgt, cur)
	if !ok {
		return false
	}
	e.took("partial_all_gather")
	if e.refines(cur, tgt) {
		comp = cur
	} else if !comp.equal(cur) {
		e.push(OpCollectivePermute, cur, comp, changedAtoms(cur, comp), -1, -1)
	}
	// Halo exchanges on the gathered dims. XLA then gathers them all in one all-gather;
	// with windows on two or more dims, per-dim all-gathers would pass through tiles
	// nobody holds, so those stay all_to_all_v (the deviation above).
	var halo []int
	for d := range comp {
		if e.counts(comp)[d] > e.counts(tgt)[d] && newHaloWindows(e.sp, d, haloGather, comp, tgt).needed() {
			halo = append(halo, d)
		}
	}
	if len(halo) == 1 {
		e.pushHalo(halo[0], haloGather, comp, tgt)
	}
	at := comp
	for i := len(expanded) - 1; i >= 0; i-- {
		d := expanded[i]
		nx := at.clone()
		nx[d] = slices.Clone(tgt[d])
		e.push(OpAllGather, at, nx, slices.Clone(at[d][len(tgt[d]):]), d, -1)
		at = nx
	}
	return true // at equals tgt: comp extends tgt on the expanded dims only
}

// partialWithAllToAll: ReshardPartialReplicateWithAllToAll, the narrow case
// [1, t0..t_{r-2}] + replication t_{r-1} <-> [t0..t_{r-1}] with the same device order.
func (e *xlaEmu) partialWithAllToAll(cur, tgt state) bool {
	for _, f := range e.fixedDims {
		if f {
			return false
		}
	}
	fromPartial := e.partial(cur)
	pst, tst := cur, tgt
	if !fromPartial {
		pst, tst = tgt, cur
	}
	if e.partial(tst) || e.replicated(tst) {
		return false
	}
	pc, tc := e.counts(pst), e.counts(tst)
	R := e.repCount(pst)
	r := len(pc)
	if pc[0] != 1 {
		return false
	}
	for i := range r {
		want := R
		if i+1 < r {
			want = pc[i+1]
		}
		if tc[i] != want {
			return false
		}
	}
	var seqP, seqT []uint8
	for d := range r {
		seqP = append(seqP, pst[d]...)
		seqT = append(seqT, tst[d]...)
	}
	seqP = append(seqP, e.rep(pst)...)
	if !slices.Equal(seqP, seqT) {
		return false
	}
	e.took("partial_all_to_all")
	at := cur
	if fromPartial {
		for k := 0; k+1 < r; k++ {
			nx := at.clone()
			nx[k], nx[k+1] = append(nx[k], at[k+1]...), nil
			e.push(OpAllToAll, at, nx, slices.Clone(at[k+1]), k+1, k)
			at = nx
		}
		e.padFromPartial(at, tgt)
		e.push(OpSlice, at, tgt, nil, -1, -1)
		return true
	}
	nx := at.clone()
	nx[r-1] = nil
	e.push(OpAllGather, at, nx, slices.Clone(at[r-1]), r-1, -1)
	at = nx
	for k := r - 2; k >= 0; k-- {
		nx := at.clone()
		nx[k+1], nx[k] = append(nx[k+1], at[k]...), nil
		e.push(OpAllToAll, at, nx, slices.Clone(at[k]), k, k+1)
		at = nx
	}
	return true
}

// tryComplex: TryComplexReshardHandling (merge/split, then the partial-replication rules
// (b) and (c) of RESHARDING.md §6); its recursive reshards may not fall back.
func (e *xlaEmu) tryComplex(cur, tgt state) bool {
	if !e.sameFixed(cur, tgt) {
		return false
	}
	mark, pmark := len(e.moves), len(e.path)
	fail := func() bool { e.moves, e.path = e.moves[:mark], e.path[:pmark]; return false }
	sc, tc := e.counts(cur), e.counts(tgt)
	Rs, Rt := e.repCount(cur), e.repCount(tgt)
	// Merge/split: equal partial status and replication; dim i with both counts > 1, one
	// dividing the other, and a dim j with a count of 1 on one side and equal products.
	if e.partial(cur) == e.partial(tgt) && Rs == Rt {
		var diff []int
		for d := range sc {
			if sc[d] != tc[d] {
				diff = append(diff, d)
			}
		}
		for x := 0; x < len(diff); x++ {
			for y := x + 1; y < len(diff); y++ {
				for _, ij := range [2][2]int{{diff[x], diff[y]}, {diff[y], diff[x]}} {
					i, j := ij[0], ij[1]
					if sc[i] == 1 || tc[i] == 1 || (sc[j] != 1 && tc[j] != 1) || sc[i]*sc[j] != tc[i]*tc[j] {
						continue
					}
					lo, hi := min(sc[i], tc[i]), max(sc[i], tc[i])
					if hi%lo != 0 || (sharding.CeilDiv(e.sp.shape[i], int64(sc[i]))*int64(sc[i]))%int64(hi) != 0 {
						continue
					}
					// Matched: split dim i, all-to-all the piece with dim j, merge.
					var nx state
					var group []uint8
					var ok bool
					from, to := j, i
					if sc[i] > tc[i] {
						from, to = i, j
					}
					nx, group, ok = moveSuffix(e.sp, cur, from, to, hi/lo)
					if !ok {
						return fail()
					}
					e.took("merge_split")
					e.push(OpAllToAll, cur, nx, group, from, to)
					if !e.reshard(nx, tgt, false) {
						return fail()
					}
					return true
				}
			}
		}
	}
	// (b) Target partially replicated: replicate a source dim whose count times the
	// source replication is the target replication.
	if e.partial(tgt) {
		for i := range sc {
			if sc[i] == 1 || sc[i]*Rs != Rt {
				continue
			}
			nx := cur.clone()
			nx[i] = nil
			e.took("replicate_dim")
			e.push(OpAllGather, cur, nx, slices.Clone(cur[i]), i, -1)
			if !e.reshard(nx, tgt, false) {
				return fail()
			}
			return true
		}
	}
	// (c) Source partially replicated, target not: move the replication into the first
	// dim of count 1 whose target count it divides (a local slice).
	if e.partial(cur) && !e.partial(tgt) {
		for i := range sc {
			if tc[i] == sc[i] || sc[i] != 1 || tc[i]%Rs != 0 {
				continue
			}
			nx := cur.clone()
			nx[i] = append(nx[i], e.rep(cur)...)
			e.took("replication_to_dim")
			e.push(OpSlice, cur, nx, nil, -1, -1)
			if !e.reshard(nx, tgt, false) {
				return fail()
			}
			return true
		}
	}
	return false
}

// groupEqualDims: dims with equal counts > 1 on both sides (and, here, the same axes)
// are grouped away and the rest is resharded inside each device group.
func (e *xlaEmu) groupEqualDims(cur, tgt state, allowFull bool) bool {
	sc, tc := e.counts(cur), e.counts(tgt)
	var grouped []int
	for d := range sc {
		if sc[d] == tc[d] && sc[d] > 1 && slices.Equal(cur[d], tgt[d]) {
			grouped = append(grouped, d)
		}
	}
	if len(grouped) == 0 {
		return false
	}
	savedFixed := e.fixed
	for _, d := range grouped {
		e.fixedDims[d] = true
		e.fixed |= maskOf(cur[d])
	}
	pmark := len(e.path)
	e.took("group_equal_dims")
	ok := e.reshard(cur, tgt, allowFull)
	if !ok {
		e.path = e.path[:pmark]
	}
	for _, d := range grouped {
		e.fixedDims[d] = false
	}
	e.fixed = savedFixed
	return ok
}

// padFromPartial records PadFromPartialReplicateShape's halo exchanges before the
// dynamic-slice from the partially replicated cur to its refinement comp: one per dim
// the slice expands, in dim order.
func (e *xlaEmu) padFromPartial(cur, comp state) {
	c, t := e.counts(cur), e.counts(comp)
	for d := range cur {
		if t[d] > c[d] {
			e.pushHalo(d, haloPad, cur, comp)
		}
	}
}

// pushHalo records a halo exchange along dim on st ahead of the step to other
// (steps() decides whether XLA needs one).
func (e *xlaEmu) pushHalo(dim, kind int, st, other state) {
	e.moves = append(e.moves, move{op: opHalo, dim: dim, dim2: kind, group: slices.Clone(st[dim]), before: st.clone(), after: other.clone(), unrBefore: e.unr, unrAfter: e.unr})
}

// steps prices the moves. Halo exchanges become their collective-permutes, and the step
// after them reads the windows they filled; any other move whose new tiles are not made
// of the group's old tiles (an all-to-all on uneven dims) becomes all_to_all_v.
func (e *xlaEmu) steps() []Step {
	out := make([]Step, 0, len(e.moves))
	var run []haloWindows // halo exchanges since the last other step
	for _, m := range e.moves {
		if m.op == opHalo {
			w := newHaloWindows(e.sp, m.dim, m.dim2, m.before, m.after)
			if !w.needed() {
				continue
			}
			out = append(out, e.haloSteps(m, w, run)...)
			run = append(run, w)
			continue
		}
		// The windows stay until the step that reads them: an all-gather reads its dim's
		// (and gathers the rest along), any other step all of them.
		haloed := len(run) > 0
		if m.op == OpAllGather {
			run = slices.DeleteFunc(run, func(w haloWindows) bool { return w.dim == m.dim })
		} else {
			run = nil
		}
		if !haloed && m.op != OpCollectivePermute && m.op != OpAllReduce && !e.sp.feasible(m.before, m.after, maskOf(m.group)) {
			out = append(out, e.sp.directStep(e.r, m.before, m.after, m.unrAfter))
			continue
		}
		out = append(out, e.sp.steps(e.r, []move{m})...)
	}
	return out
}
