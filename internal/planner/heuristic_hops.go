package planner

import (
	"sync"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// hopBound is the heuristic's latency bound on torus meshes: the hop latency that some
// byte a device still lacks must travel, whatever the path (cost.Fabric.AxisHops).
//
// # Why it bounds every path
//
// Let device q lack element e of its goal tile in state s. Every path to the goal ends
// with e at q, brought by a chain of steps from some device p that holds e in s; each
// step of the chain moves it from one device to another, and AxisHops' contract says
// the step's latency is at least the hop latency between them. The hop latency is a
// sum of per-axis distances, each obeying the triangle inequality, so the chain's
// latency, and with it the path's, is at least hops(p, q) >= min over holders p of
// hops(p, q). Any (q, e) gives a bound; dist takes the largest.
//
// # Computing it from the atoms
//
// Devices are digit assignments to the atoms. On an even dim d (both st[d] and the
// goal's list tile it evenly) whose two lists agree in atom sizes position by position
// up to position k, the top k digits of an element's shard index are the same number in
// both index systems (the prefix products agree), so the holder's atom at position j < k
// of st[d] has q's digit of the goal's atom at position j (label Q(v)); when the lists
// agree over the whole goal list, the holder's atoms past it read the digits of e's
// position inside q's goal tile, which e may choose (label E, for the maximum). Atoms
// st does not use, and atoms of an uneven or misaligned tail, are free: some holder has
// any digit (label F, for the minimum; for the tail this is a relaxation, which only
// lowers the bound). So
//
//	dist = max over q's digits, E digits of sum over axes A of min over F digits of
//	       lat_A x distance_A(holder's A coordinate, q's A coordinate),
//
// where the holder's digit of an atom labelled Q(v) is q's digit of v. An axis' term
// depends on its own atoms' q digits and on the q digits of the atoms its Q labels name
// on other axes; those (coupling) digits join axes into components whose terms add.
// Each component's coupling digits are enumerated, each axis' term is maximised over
// its other digits by a table memoized per axis signature, and any assignment is a
// valid bound, so enumerating only the first maxHopConfigs of them stays admissible.
type hopBound struct {
	sp       *space
	goal     state
	axes     []hopAxis
	atomAxis []int8               // per atom: index in axes, -1 when its axis counts no hops
	atomPos  []uint8              // per atom: position in its axis' atoms
	tables   map[uint64][]float64 // per axis signature (prepare)
	memo     map[uint64]float64   // dist by the packed labels
	family   *hopFamilyMemo       // the Memos' family of these atoms, mesh and model (nil: none)
	most     float64              // µs: no state's bound exceeds it (every axis' diameter)
	// per-state scratch
	label  []uint8 // per atom: labelF, labelE, or labelQ + v
	extRef []int8  // per atom: the atom whose label names it from another axis (-1: none)
	vals   []uint8 // coupling digits of the configuration being summed
	couple []uint8 // coupling atoms
	live   []int   // axes of the component being summed
	vars   []uint8 // its coupling atoms
}

// hopAxis is one mesh axis that counts hops, with the atoms it is split into.
type hopAxis struct {
	hop   cost.AxisHop
	atoms []uint8 // atom ids, in the space's order
	// per-state scratch (prepare)
	in  []uint8
	tab []float64
}

// Atom labels: free (F), chosen for the maximum (E), or q's digit of atom v (labelQ + v).
const (
	labelF uint8 = iota
	labelE
	labelQ
)

// hopMetric is implemented by cost models whose latencies count hops (cost.Fabric).
type hopMetric interface {
	AxisHops(m *sharding.Mesh) []cost.AxisHop
}

// newHopBound builds the hop bound for r, or returns nil when the model counts no hops
// on r's mesh (no torus axis among the space's atoms) or an axis has too many atoms for
// a signature.
func newHopBound(sp *space, r *Request, goal state) *hopBound {
	hm, ok := r.Model.(hopMetric)
	if !ok || len(sp.atoms) > maxBoundAtoms {
		return nil
	}
	hops := hm.AxisHops(r.Mesh)
	hb := &hopBound{sp: sp, goal: goal, tables: hopTablePool.get(), memo: hopMemoPool.get(),
		atomAxis: make([]int8, len(sp.atoms)), atomPos: make([]uint8, len(sp.atoms)),
		label: make([]uint8, len(sp.atoms)), extRef: make([]int8, len(sp.atoms)), vals: make([]uint8, len(sp.atoms))}
	hb.axes = make([]hopAxis, 0, len(hops))
	slot := map[int]int{}
	for a, ref := range sp.atoms {
		hb.atomAxis[a] = -1
		i := r.Mesh.AxisIndex(ref.Name)
		if i < 0 || hops[i].LatencyUS <= 0 {
			continue
		}
		k, ok := slot[i]
		if !ok {
			k = len(hb.axes)
			slot[i] = k
			hb.axes = append(hb.axes, hopAxis{hop: hops[i]})
		}
		ax := &hb.axes[k]
		hb.atomAxis[a], hb.atomPos[a] = int8(k), uint8(len(ax.atoms))
		ax.atoms = append(ax.atoms, uint8(a))
		if len(ax.atoms) > 12 {
			return nil
		}
	}
	if len(hb.axes) == 0 || len(hb.axes) > 15 {
		return nil
	}
	hb.family = hopFamily(sp, r)
	for _, ax := range hb.axes {
		far := 0
		for c := range ax.hop.Size {
			far = max(far, ax.hop.Distance(0, c))
		}
		hb.most += float64(far) * ax.hop.LatencyUS
	}
	return hb
}

// dist is the hop bound of st in µs, memoized by the atoms' labels (states that label
// them alike have the same bound): per search, then across requests (Memos).
func (hb *hopBound) dist(st state) float64 {
	key := hb.labelAtoms(st)
	if v, ok := hb.memo[key]; ok {
		return v
	}
	f := hb.family
	if f != nil {
		f.mu.Lock()
		v, ok := f.m[key]
		f.mu.Unlock()
		f.set.count(ok)
		if ok {
			hb.memo[key] = v
			return v
		}
	}
	v := hb.compute()
	hb.memo[key] = v
	if f != nil {
		f.mu.Lock()
		if f.set.total.Load() >= int64(f.most) {
			f.set.total.Add(-int64(len(f.m)))
			clear(f.m) // start this family over rather than grow
		}
		if _, ok := f.m[key]; !ok {
			f.m[key] = v
			f.set.total.Add(1)
		}
		f.mu.Unlock()
	}
	return v
}

// The hop bound of a labelling depends on the labels, the atoms (their axes, sizes and
// weights) and the model's hop latencies on the mesh, not on the tensor: requests on
// one mesh and model whose spaces split the axes alike share one family of bounds.
// Memos keeps them across requests (a tenth of a median request of testgen.RandomSet's
// set went to computing them again): a map of packed labels per family, each under its
// own lock (one map keyed by family and labels spent 4% of a median request's search
// hashing its two-word keys under one lock).

// hopFamilyMemo is one family's memoized hop bounds, by packed labels; set is the
// hopMemo it belongs to (its bound and counts), most the bound on bounds over every
// family.
type hopFamilyMemo struct {
	mu   sync.Mutex
	m    map[uint64]float64
	set  *hopMemo
	most int
}

// count records a lookup.
func (h *hopMemo) count(hit bool) {
	if hit {
		h.hits.Add(1)
	} else {
		h.misses.Add(1)
	}
}

// hopFamily is the memo of the family of sp's atoms on r's mesh and model (nil: the
// request has no memos, or the model does not name what its prices depend on, and
// nothing is shared).
func hopFamily(sp *space, r *Request) *hopFamilyMemo {
	name, ok := atomsKey(sp, r)
	if !ok || r.Memos == nil {
		return nil
	}
	l := &r.Memos.limits
	h := &r.Memos.hops
	h.Lock()
	defer h.Unlock()
	if f, ok := h.families[name]; ok {
		return f
	}
	if len(h.families) >= orDefault(l.HopFamilies, DefaultMemoLimits.HopFamilies) {
		// Searches in flight keep theirs; the others go with their bounds.
		clear(h.families)
		h.total.Store(0)
	}
	if h.families == nil {
		h.families = map[string]*hopFamilyMemo{}
	}
	f := &hopFamilyMemo{m: map[uint64]float64{}, set: h, most: orDefault(l.HopBounds, DefaultMemoLimits.HopBounds)}
	h.families[name] = f
	return f
}

// compute is dist from the labels labelAtoms set.
func (hb *hopBound) compute() float64 {
	sp := hb.sp
	// Coupling digits: the atoms a Q label names from another axis. Each joins its own
	// axis (when it counts hops) and the naming atom's into one component.
	var comp [16]int8
	for k := range hb.axes {
		comp[k] = int8(k)
	}
	find := func(k int8) int8 {
		for comp[k] != k {
			k = comp[k]
		}
		return k
	}
	hb.couple = hb.couple[:0]
	for a, l := range hb.label {
		if l < labelQ || hb.atomAxis[a] < 0 {
			continue
		}
		v := l - labelQ
		if hb.atomAxis[v] == hb.atomAxis[a] {
			continue
		}
		hb.extRef[v] = int8(a)
		hb.couple = append(hb.couple, v)
		if kv := hb.atomAxis[v]; kv >= 0 {
			if x, y := find(kv), find(hb.atomAxis[a]); x != y {
				comp[x] = y
			}
		}
	}
	for k := range hb.axes {
		hb.prepare(k)
	}
	// The components' terms add: each is the largest over the assignments of its
	// coupling digits (any assignment gives a bound: past maxHopConfigs, the first ones
	// only) of the sum of its axes' tables.
	total := 0.0
	for root := range hb.axes {
		if find(int8(root)) != int8(root) {
			continue
		}
		hb.live, hb.vars = hb.live[:0], hb.vars[:0]
		configs := 1
		for k := range hb.axes {
			if find(int8(k)) == int8(root) {
				hb.live = append(hb.live, k)
			}
		}
		for _, v := range hb.couple {
			if find(hb.atomAxis[hb.extRef[v]]) == int8(root) {
				hb.vars = append(hb.vars, v)
				configs *= sp.atoms[v].Size
			}
		}
		configs = min(configs, maxHopConfigs)
		best := 0.0
		for c := range configs {
			x := c
			for _, v := range hb.vars {
				n := sp.atoms[v].Size
				hb.vals[v] = uint8(x % n)
				x /= n
			}
			sum := 0.0
			for _, k := range hb.live {
				ax := &hb.axes[k]
				if ax.tab == nil {
					continue // not enumerated: its term is bounded by 0
				}
				i := 0
				for _, v := range ax.in {
					i = i*sp.atoms[v].Size + int(hb.vals[v])
				}
				sum += ax.tab[i]
			}
			best = max(best, sum)
		}
		total += best
	}
	return total
}

// labelAtoms sets label (and clears extRef) for st and returns the labels packed, six
// bits an atom (newHopBound admits at most ten atoms).
func (hb *hopBound) labelAtoms(st state) uint64 {
	sp := hb.sp
	for a := range hb.label {
		hb.label[a], hb.extRef[a] = labelF, -1
	}
	for d, ids := range st {
		g := hb.goal[d]
		D := sp.shape[d]
		if D%int64(sp.count(ids)) != 0 || D%int64(sp.count(g)) != 0 {
			continue // uneven: every holder digit free
		}
		for k, a := range ids {
			if k >= len(g) {
				hb.label[a] = labelE
				continue
			}
			if sp.atoms[a].Size != sp.atoms[g[k]].Size {
				break // misaligned from here: free
			}
			hb.label[a] = labelQ + g[k]
		}
	}
	var key uint64
	for a, l := range hb.label {
		key |= uint64(l) << (6 * a)
	}
	return key
}

// prepare sets axis k's table inputs (in) and its table (tab) for the current labels.
// The inputs, in order, are the atoms of other axes its Q labels name, then its own
// atoms that another axis' Q label names; the table, memoized by the axis' signature
// (per atom its label's kind: F, E, itself, another atom of the axis by position, an
// atom of another axis; and whether another axis names it), holds its term for every
// assignment of the inputs' q digits, the first input most significant.
func (hb *hopBound) prepare(k int) {
	ax := &hb.axes[k]
	ax.in = ax.in[:0]
	key := uint64(k) << 60
	for j, a := range ax.atoms {
		var code uint64
		switch l := hb.label[a]; {
		case l == labelF:
			code = 0
		case l == labelE:
			code = 1
		case l-labelQ == a:
			code = 2
		case hb.atomAxis[l-labelQ] == int8(k):
			code = 3 + uint64(hb.atomPos[l-labelQ])
		default:
			code = 15
			ax.in = append(ax.in, l-labelQ)
		}
		if hb.extRef[a] >= 0 {
			code |= 16
		}
		key |= code << (5 * j)
	}
	for _, a := range ax.atoms {
		if hb.extRef[a] >= 0 {
			ax.in = append(ax.in, a)
		}
	}
	t, ok := hb.tables[key]
	if !ok {
		t = hb.buildTable(k)
		hb.tables[key] = t
	}
	ax.tab = t
}

// buildTable computes axis k's table (see prepare): for each assignment of the inputs, the
// largest over its other q digits and its E holder digits of the smallest over its F
// holder digits of the axis' hop latency between holder and q. It is nil when that is
// more than maxHopTableWork distances: the axis' term is then 0, which bounds every path.
func (hb *hopBound) buildTable(k int) []float64 {
	ax := &hb.axes[k]
	sp := hb.sp
	in := ax.in
	size := 1
	for _, v := range in {
		if size > maxHopTableWork/sp.atoms[v].Size {
			return nil // too large to enumerate (see maxHopTableWork)
		}
		size *= sp.atoms[v].Size
	}
	isInput := make([]bool, len(sp.atoms))
	for _, v := range in {
		isInput[v] = true
	}
	// maxed: q digits of the axis' other atoms, then holder digits of its E atoms;
	// minned: holder digits of its F atoms.
	var maxed, minned []uint8
	var maxedHolder []bool
	for _, a := range ax.atoms {
		if !isInput[a] {
			maxed, maxedHolder = append(maxed, a), append(maxedHolder, false)
		}
	}
	for _, a := range ax.atoms {
		switch hb.label[a] {
		case labelE:
			maxed, maxedHolder = append(maxed, a), append(maxedHolder, true)
		case labelF:
			minned = append(minned, a)
		}
	}
	if hopTableWork(sp, size, maxed, minned) > maxHopTableWork {
		return nil
	}
	// The holder's coordinate (ch) and q's (cq) on the axis are sums of the atoms'
	// digits times weights: per input, what its q digit adds to each; per assignment of
	// the maxed digits, what they add; per assignment of the minned ones, what they add
	// to ch. The table's entries are the same integers the nested enumeration gives.
	w := func(a uint8) int { return sp.atoms[a].Minor() }
	qCoef := func(x uint8) (cq, ch int) {
		for _, a := range ax.atoms {
			if a == x {
				cq += w(a)
			}
			if l := hb.label[a]; l >= labelQ && l-labelQ == x {
				ch += w(a)
			}
		}
		return cq, ch
	}
	inQ, inH := make([]int, len(in)), make([]int, len(in))
	for i, v := range in {
		inQ[i], inH[i] = qCoef(v)
	}
	var maxedQ, maxedH []int
	{
		dq, dh := make([]int, len(maxed)), make([]int, len(maxed))
		for i, a := range maxed {
			if maxedHolder[i] {
				dh[i] = w(a)
			} else {
				dq[i], dh[i] = qCoef(a)
			}
		}
		eachDigits(sp, maxed, func(d []int) {
			cq, ch := 0, 0
			for i, v := range d {
				cq += v * dq[i]
				ch += v * dh[i]
			}
			maxedQ, maxedH = append(maxedQ, cq), append(maxedH, ch)
		})
	}
	var minnedH []int
	eachDigits(sp, minned, func(d []int) {
		c := 0
		for i, a := range minned {
			c += d[i] * w(a)
		}
		minnedH = append(minnedH, c)
	})
	t := make([]float64, size)
	for idx := range t {
		x := idx
		cq0, ch0 := 0, 0
		for i := len(in) - 1; i >= 0; i-- {
			n := sp.atoms[in[i]].Size
			cq0 += x % n * inQ[i]
			ch0 += x % n * inH[i]
			x /= n
		}
		best := 0
		for j, dq := range maxedQ {
			cq, ch := cq0+dq, ch0+maxedH[j]
			least := -1
			for _, c := range minnedH {
				if x := ax.hop.Distance(ch+c, cq); least < 0 || x < least {
					least = x
				}
			}
			best = max(best, least)
		}
		t[idx] = float64(best) * ax.hop.LatencyUS
	}
	return t
}

// hopTableWork is the number of hop distances buildTable enumerates for a table of size
// entries over the maxed and minned atoms, saturating at maxHopTableWork+1.
func hopTableWork(sp *space, size int, maxed, minned []uint8) int {
	work := size
	for _, atoms := range [][]uint8{maxed, minned} {
		for _, a := range atoms {
			if work > maxHopTableWork/sp.atoms[a].Size {
				return maxHopTableWork + 1
			}
			work *= sp.atoms[a].Size
		}
	}
	return work
}

// eachDigits calls f with every assignment of digits to atoms (f's slice is reused).
func eachDigits(sp *space, atoms []uint8, f func(d []int)) {
	d := make([]int, len(atoms))
	for {
		f(d)
		i := 0
		for ; i < len(atoms); i++ {
			if d[i]++; d[i] < sp.atoms[atoms[i]].Size {
				break
			}
			d[i] = 0
		}
		if i == len(atoms) {
			return
		}
	}
}
