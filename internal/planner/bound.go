package planner

import (
	"math"
	"math/bits"
	"slices"

	"github.com/shardplan/shardplan/internal/sharding"
)

// lowerBoundWith is API.md's lower bound for r given lb = LowerBoundBetween(r,
// r.Source, r.Target) (O(devices), which Reshard also needs for the all_to_all_v
// candidate): lb; when the source holds partial sums the target does not, at least the
// larger of the biggest target tile (a device adds up no element alone) and the average
// over devices of what the reductions must move (reductionShare).
func lowerBoundWith(r *Request, lb int64) int64 {
	reduce, _ := reducedRefs(r.Source, r.Target)
	p := int64(1)
	for _, u := range reduce {
		p *= int64(u.Size)
	}
	if p == 1 {
		return lb
	}
	return max(lb, bufferBytes(r, r.Target), reductionShare(r, p))
}

// reductionShare bounds the bytes the busiest device receives when partial sums over p
// devices are reduced: every element of every copy of the partial sums the target keeps
// (q copies) is a sum of p values on p devices, which takes p-1 transfers to bring
// together, and each of the R devices whose target tile holds it receives it or is
// where it was brought together, one more transfer for each of R-1 of them. Over the
// E elements that is q E (p-1) + (the target's tiles summed over devices, N E / C)
// - q E transfers, C being the target's distinct tiles; the busiest device receives at
// least the average over the N devices.
func reductionShare(r *Request, p int64) int64 {
	n := int64(r.Mesh.NumDevices())
	e, c := int64(1), int64(1)
	for d, k := range r.Target.ShardCounts() {
		e *= r.Shape[d]
		c *= int64(k)
	}
	q := int64(1)
	for _, u := range r.Target.Unreduced {
		q *= int64(u.Size)
	}
	elems := e/c + q*e*(p-2)/n
	return elems * int64(r.ElemBits) / 8
}

// LowerBoundBetween is the most bytes of its tile in `to` that any device's tile in
// `from` lacks (exact box arithmetic, padding excluded). It enumerates the coordinates
// of the mesh axes either sharding uses; axes both replicate do not change the answer.
func LowerBoundBetween(r *Request, from, to sharding.Sharding) int64 {
	if b, ok := disjointBetween(r, from, to); ok {
		return b
	}
	return enumerateBetween(r, from, to)
}

// disjointBetween is LowerBoundBetween in O(rank x refs) when some device lacks all of
// its tile: every dim tiled evenly in both shardings, and one dim split at least two
// ways in each over axis refs that do not overlap. ok is false otherwise.
//
// Why it is exact. The refs of that dim in from and in to read disjoint digits of the
// device coordinates, so some device is shard 0 of the dim in from and shard ct - 1 in
// to; with even tiles those ranges, [0, D/cs) and [D - D/ct, D), do not meet when cs,
// ct >= 2, so that device's tiles do not meet either, and every target tile has the
// same size: the most any device lacks is a whole target tile.
func disjointBetween(r *Request, from, to sharding.Sharding) (int64, bool) {
	tile, found := int64(1), false
	fc, tc := from.ShardCounts(), to.ShardCounts()
	for d, D := range r.Shape {
		cs, ct := fc[d], tc[d]
		if D%int64(cs) != 0 || D%int64(ct) != 0 {
			return 0, false
		}
		tile *= D / int64(ct)
		if cs < 2 || ct < 2 || found {
			continue
		}
		found = true
		for _, a := range from.Dims[d].Axes {
			for _, b := range to.Dims[d].Axes {
				if a.Overlaps(b) {
					found = false
				}
			}
		}
	}
	if !found {
		return 0, false
	}
	return sharding.BufferBytes(tile, r.ElemBits), true
}

// enumerateBetween is LowerBoundBetween by enumerating the coordinates of the mesh axes
// either sharding uses.
func enumerateBetween(r *Request, from, to sharding.Sharding) int64 {
	m := r.Mesh
	lf := sharding.NewLayout(m, r.Shape, from)
	lt := sharding.NewLayout(m, r.Shape, to)
	var worst int64
	eachUsedCoords(m, usedAxes(m, from, to), func(coords []int) {
		tgt, both := int64(1), int64(1)
		for d := range r.Shape {
			ts, te := lt.Range(d, lt.ShardIndex(d, coords))
			ss, se := lf.Range(d, lf.ShardIndex(d, coords))
			tgt *= te - ts
			both *= max(0, min(te, se)-max(ts, ss))
		}
		worst = max(worst, tgt-both)
	})
	return sharding.BufferBytes(worst, r.ElemBits)
}

// usedAxes marks the mesh axes some sharding's dims use.
func usedAxes(m *sharding.Mesh, ss ...sharding.Sharding) []bool {
	used := make([]bool, len(m.Axes))
	for _, s := range ss {
		for _, d := range s.Dims {
			for _, a := range d.Axes {
				used[m.AxisIndex(a.Name)] = true
			}
		}
	}
	return used
}

// eachUsedCoords calls fn with every combination of coordinates on the used axes (the
// others 0); coords is valid during the call only.
func eachUsedCoords(m *sharding.Mesh, used []bool, fn func(coords []int)) {
	coords := make([]int, len(m.Axes))
	var rec func(i int)
	rec = func(i int) {
		if i == len(m.Axes) {
			fn(coords)
			return
		}
		if !used[i] {
			coords[i] = 0
			rec(i + 1)
			return
		}
		for c := range m.Axes[i].Size {
			coords[i] = c
			rec(i + 1)
		}
	}
	rec(0)
}

// timeBounder is implemented by cost models that know their links (cost.Fabric).
type timeBounder interface {
	PeakDeviceIngress(*sharding.Mesh) float64
	NodeIngress(*sharding.Mesh) (gpusPerNode int, nicBW float64, ok bool)
	HalfCut(*sharding.Mesh, int) (float64, bool)
	MinLatency(*sharding.Mesh) float64
	Combine(lat, bw float64) float64
	Additive() bool
}

func timeLowerBound(r *Request, between, total int64) (float64, bool) {
	return timeLowerBoundIn(r, nil, between, total)
}

// timeLowerBoundIn is timeLowerBound given r's space (sp: the atoms of r.Source and
// r.Target, as Reshard builds them; nil: built here).
func timeLowerBoundIn(r *Request, sp *space, between, total int64) (float64, bool) {
	tb, ok := r.Model.(timeBounder)
	if !ok {
		return 0, false
	}
	m := r.Mesh
	peak := tb.PeakDeviceIngress(m)
	if peak <= 0 {
		return 0, false
	}
	bw := float64(between) / peak
	spOK := sp != nil
	if !spOK {
		sp, spOK = reqSpace(r, false, maxPrimeAtoms)
	}
	var start, goal state
	if spOK {
		start, goal = sp.stateOf(r.Source), sp.stateOf(r.Target)
	}
	if between > 0 {
		enumerate := true // cutNeeds' enumeration stays within cutBoundDevices
		for i := range m.Axes {
			cut, ok := tb.HalfCut(m, i)
			if !ok || cut <= 0 {
				continue
			}
			need, ok := int64(0), false
			if spOK {
				need, ok = cutNeedsClosed(r, sp, start, goal, i)
			}
			if !ok && enumerate {
				var lo, hi int64
				lo, hi, enumerate = cutNeeds(r, i)
				need, ok = max(lo, hi), enumerate
			}
			if ok {
				bw = max(bw, float64(need)/cut)
			}
		}
		// On a GPU model, what a node lacks comes in through its NICs only.
		if g, nic, ok := tb.NodeIngress(m); ok {
			if need, ok := nodeNeeds(r, g); ok {
				for k, b := range need {
					nics := float64(min(g, m.NumDevices()-k*g))
					bw = max(bw, float64(b)/(nics*nic))
				}
			}
		}
	}
	bw += float64(total-between) / peak
	if bw <= 0 {
		return 0, true
	}
	hops := 0.0
	if spOK {
		hops = hopLowerBound(r, sp, start, goal)
	}
	return tb.Combine(max(tb.MinLatency(m), hops), bw), true
}

// hopLowerBound is the hop bound (hopBound) of r's source (start in sp) against its
// target (goal): the hop latency some byte a device lacks must travel, on models that
// count hops (0 otherwise, and when the source holds partial sums).
func hopLowerBound(r *Request, sp *space, start, goal state) float64 {
	if len(r.Source.Unreduced) > 0 {
		return 0
	}
	hb := newHopBound(sp, r, goal)
	if hb == nil {
		return 0
	}
	return hb.dist(start)
}

// cutNeedsClosed is the larger of cutNeeds' two figures in closed form, from the atoms
// (sp; start and goal: the source and target states): the cut bound's fractions
// (heuristic_cut.go) of the tensor's elements that one half of the axis needs and does
// not hold, counted once whatever the devices outside the space (which cutNeeds' tiles
// do not tell apart either). It needs the half to be a digit of the axis' major atom
// (of even size; ok false otherwise, and cutNeeds enumerates), and costs the same on
// any mesh, where the enumeration stops at cutBoundDevices.
func cutNeedsClosed(r *Request, sp *space, start, goal state, axis int) (int64, bool) {
	name := r.Mesh.Axes[axis].Name
	major := -1
	for a, ref := range sp.atoms {
		if ref.Name == name && ref.Pre == 1 {
			major = a
		}
	}
	if major < 0 {
		return 0, true // neither sharding splits the axis: each half holds what it needs
	}
	if sp.atoms[major].Size%2 != 0 {
		return 0, false
	}
	elems := 1.0
	for _, D := range sp.shape {
		elems *= float64(D)
	}
	b := &bound{sp: sp, goal: goal, cross: map[string][2]float64{}, totalBytes: elems}
	c := halfCut{atom: uint8(major), goalDim: -1}
	for d, ids := range goal {
		if i := slices.Index(ids, uint8(major)); i >= 0 {
			c.goalDim, c.goalPos, c.goalLow = d, i, b.lowFraction(d, ids, i)
		}
	}
	x := b.cutBytes(start, &c) // elements: the fractions times the tensor's
	if elems < 1<<50 {
		x = math.Round(x) // the fractions are ratios of the tiles' integer lengths
	} else {
		x = math.Floor(x * (1 - 1e-9)) // never above the true count
	}
	return sharding.BufferBytes(int64(x), r.ElemBits), true
}

// cutNeeds is, for the halves [0, n/2) and [n/2, n) of mesh axis i, the bytes of target
// data the devices of each half need and no device of that half holds in the source
// (each distinct target tile counted once: inside a half it can be forwarded). ok is
// false past cutBoundDevices.
func cutNeeds(r *Request, axis int) (lo, hi int64, ok bool) {
	m := r.Mesh
	used := usedAxes(m, r.Source, r.Target)
	if !used[axis] {
		return 0, 0, true // both shardings replicate along it: each half holds everything it needs
	}
	half := m.Axes[axis].Size / 2
	need, ok := sideNeeds(r, used, 2, func(coords []int) int {
		if coords[axis] >= half {
			return 1
		}
		return 0
	})
	if !ok {
		return 0, 0, false
	}
	return need[0], need[1], true
}

// nodeNeeds is, per node of gpusPerNode consecutive mesh positions, the bytes of target
// data its devices need and none of them holds (ok false past cutBoundDevices devices).
func nodeNeeds(r *Request, gpusPerNode int) ([]int64, bool) {
	m := r.Mesh
	all := make([]bool, len(m.Axes))
	for i := range all {
		all[i] = true
	}
	nodes := (m.NumDevices() + gpusPerNode - 1) / gpusPerNode
	return sideNeeds(r, all, nodes, func(coords []int) int { return m.PositionOfCoords(coords) / gpusPerNode })
}

// sideNeeds enumerates the coordinates of the used axes (at most cutBoundDevices
// combinations, else ok is false), puts each device on a side, and returns per side the
// bytes of the distinct target tiles its devices need that no device of the side holds.
// Tiles are named by their number in row-major order of the shard indices (at most
// cutBoundDevices of each sharding), not by strings: the time bound runs once per plan
// and was a sixth of the suggestion search .
func sideNeeds(r *Request, used []bool, sides int, sideOf func(coords []int) int) (need []int64, ok bool) {
	m := r.Mesh
	combos := 1
	for i, u := range used {
		if u {
			combos *= m.Axes[i].Size
			if combos > cutBoundDevices {
				return nil, false
			}
		}
	}
	lf := sharding.NewLayout(m, r.Shape, r.Source)
	lt := sharding.NewLayout(m, r.Shape, r.Target)
	rank := len(r.Shape)
	// A tile is its shard indices as one mixed-radix number (the counts' product is at
	// most the devices enumerated), and side k's tiles are offset by k times that
	// product: bits of a bit set, no allocation per device.
	pf, pt := 1, 1
	for d := range rank {
		pf *= lf.Counts[d]
		pt *= lt.Counts[d]
	}
	held, needed := newTileSet(sides*pf), newTileSet(sides*pt)
	eachUsedCoords(m, used, func(coords []int) {
		si, ti := 0, 0
		for d := range rank {
			si = si*lf.Counts[d] + lf.ShardIndex(d, coords)
			ti = ti*lt.Counts[d] + lt.ShardIndex(d, coords)
		}
		k := sideOf(coords)
		held.add(k*pf + si)
		needed.add(k*pt + ti)
	})
	need = make([]int64, sides)
	sIdx, ti := make([]int, rank), make([]int, rank)
	l, h := make([]int, rank), make([]int, rank)
	for key := range needed.all {
		k := key / pt
		for d, x := rank-1, key%pt; d >= 0; d-- {
			ti[d], x = x%lt.Counts[d], x/lt.Counts[d]
		}
		size := int64(1)
		for d := range rank {
			s, e := lt.Range(d, ti[d])
			size *= max(0, e-s)
			if e > s {
				l[d], h[d] = int(s/lf.Tile[d]), int((e-1)/lf.Tile[d])
			} else {
				l[d], h[d] = 0, -1
			}
		}
		if size == 0 {
			continue
		}
		have := int64(0)
		copy(sIdx, l)
		for {
			si := 0
			for d := range rank {
				si = si*lf.Counts[d] + sIdx[d]
			}
			if held.has(k*pf + si) {
				ov := int64(1)
				for d := range rank {
					ts, te := lt.Range(d, ti[d])
					ss, se := lf.Range(d, sIdx[d])
					ov *= max(0, min(te, se)-max(ts, ss))
				}
				have += ov
			}
			d := rank - 1
			for ; d >= 0; d-- {
				sIdx[d]++
				if sIdx[d] <= h[d] {
					break
				}
				sIdx[d] = l[d]
			}
			if d < 0 {
				break
			}
		}
		need[k] += size - have
	}
	for k := range need {
		need[k] = sharding.BufferBytes(need[k], r.ElemBits)
	}
	return need, true
}

// tileSet is a set of small non-negative integers (sideNeeds' tiles), as bits.
type tileSet []uint64

func newTileSet(n int) tileSet { return make(tileSet, (n+63)/64) }

func (t tileSet) add(i int)      { t[i/64] |= 1 << (i % 64) }
func (t tileSet) has(i int) bool { return t[i/64]&(1<<(i%64)) != 0 }

// all yields the set's members in increasing order.
func (t tileSet) all(yield func(int) bool) {
	for w, word := range t {
		for word != 0 {
			if !yield(w*64 + bits.TrailingZeros64(word)) {
				return
			}
			word &= word - 1
		}
	}
}
