package sharding

import (
	"slices"
	"strconv"
	"sync/atomic"
)

// This file expresses a parsed HloSharding on a mesh: it finds the mesh pieces whose
// device order reproduces the tile assignment (hlo.go describes the format).

// express maps sp onto mesh m for a tensor of the given shape.
func (sp *hloSpec) express(p *textParser, m *Mesh, shape []int64) (Sharding, error) {
	switch sp.kind {
	case hloReplicated, hloMaximal, hloUnreduced:
		return sp.expressUniform(p, m, shape)
	case hloNamed:
		return finish(sp.named.Clone(), m, shape, sp.namedPt)
	case hloManual:
		return Sharding{}, p.failAt(sp.start, "{manual} (a shard_map body's sharding) is not modelled: shardplan plans data placement across the mesh; give the sharding outside the shard_map")
	case hloUnknown:
		return Sharding{}, p.failAt(sp.start, "{unknown} says nothing about placement; give a concrete sharding")
	}
	return sp.expressTiled(p, m, shape)
}

// expressUniform expresses {replicated}, {unreduced} and {maximal device=N} (the latter
// only on a 1-device mesh).
func (sp *hloSpec) expressUniform(p *textParser, m *Mesh, shape []int64) (Sharding, error) {
	n := m.NumDevices()
	if sp.kind == hloMaximal {
		if sp.device >= n {
			return Sharding{}, p.failAt(sp.deviceOff, "device %d is not on the mesh (ids 0..%d)", sp.device, n-1)
		}
		if n > 1 {
			return Sharding{}, p.failAt(sp.start, "{maximal device=%d} keeps the whole tensor on one device, but a mesh sharding places data on all %d devices of the mesh; use {replicated}, a tiled sharding, or a 1-device mesh", sp.device, n)
		}
	}
	if shape == nil {
		return Sharding{}, p.failAt(sp.start, "the tensor's rank is unknown here; give its shape, or write the sharding as {devices=[...]...}")
	}
	s := Replicated(len(shape))
	if sp.kind == hloUnreduced { // every device holds a partial sum of the whole tensor
		for _, a := range m.Axes {
			if a.Size > 1 {
				s.Unreduced = append(s.Unreduced, FullAxis(a))
			}
		}
	}
	return s, nil
}

// expressTiled expresses a tile assignment: it finds the mesh pieces whose device order
// reproduces it, hands them to the data dims and subgroups, and checks the result.
func (sp *hloSpec) expressTiled(p *textParser, m *Mesh, shape []int64) (Sharding, error) {
	n := m.NumDevices()
	types, err := sp.subgroupKinds(p)
	if err != nil {
		return Sharding{}, err
	}
	rank, err := sp.dataRank(p, n, shape, len(types))
	if err != nil {
		return Sharding{}, err
	}
	// An iota on a mesh without device_ids maps onto the mesh symbolically, in time linear
	// in its dims; otherwise every device is checked (an explicit list pays for that with
	// its own length; iotas on a mesh with device_ids draw on a budget per mesh).
	symbolic := sp.iota != nil && m.DeviceIDs == nil
	if sp.iota != nil && !symbolic && !m.spendHLOWork(n) {
		return Sharding{}, p.failAt(sp.iotaOff, "the HLO iota shardings of this request need more than %d device-by-device checks on a mesh with device_ids; write them as explicit device lists, Shardy text or PartitionSpecs", hloWorkLimit)
	}
	var ids []int
	if !symbolic {
		if ids, err = sp.deviceIDs(p, n); err != nil {
			return Sharding{}, err
		}
	}
	if rank > len(sp.tile) {
		rank = len(sp.tile)
	}
	// rep is the number of devices per data tile; sortRep the size of the trailing
	// replicated subgroups, whose devices may come in any order.
	rep := n / max(1, productInts(sp.tile[:rank]))
	sortRep := 1
	for k := len(types) - 1; k >= 0 && types[k] == "replicated"; k-- {
		sortRep *= sp.tile[rank+k]
	}
	pieces, err := sp.meshPieces(p, m, ids, symbolic, sortRep)
	if err != nil {
		return Sharding{}, err
	}
	s, err := sp.assignPieces(p, m, pieces, types, rank)
	if err != nil {
		return Sharding{}, err
	}
	pt := &hloPather{field: p.field, off: sp.start}
	if err := validate(&s, shape, pt); err != nil {
		return Sharding{}, err
	}
	s.Canonicalize(m)
	// Verify by tiles: every device holds the tile the HLO assigns it (the symbolic
	// reading is exact by construction).
	if !symbolic {
		if k := tileMismatch(m, s, sp.tile[:rank], ids, rep); k >= 0 {
			return Sharding{}, p.failAt(sp.offAt(k), "device %d would hold a different tile under %s; no mesh axes reproduce this tile assignment", ids[k], s.Body())
		}
	}
	return s, nil
}

// subgroupKinds lists the subgroup dims after the data dims: replicated or unreduced.
func (sp *hloSpec) subgroupKinds(p *textParser) ([]string, error) {
	var types []string
	if sp.lastRep {
		types = []string{"replicated"}
	}
	if len(sp.subgroups) == 0 {
		return types, nil
	}
	if sp.lastRep {
		return nil, p.failAt(sp.subOffs[0], "use either last_tile_dim_replicate or last_tile_dims={...}, not both")
	}
	for k, g := range sp.subgroups {
		switch g {
		case "replicated", "unreduced":
		case "manual":
			return nil, p.failAt(sp.subOffs[k], "manual subgroups (shard_map over some axes) are not modelled; give the sharding outside the shard_map")
		default:
			return nil, p.failAt(sp.subOffs[k], "unknown subgroup type %q; expected replicated, unreduced or manual", g)
		}
	}
	return sp.subgroups, nil
}

// dataRank is the number of data dims of the tile assignment; it checks them against
// shape and the assignment's device count against the mesh's n.
func (sp *hloSpec) dataRank(p *textParser, n int, shape []int64, subgroups int) (int, error) {
	rank := len(sp.tile) - subgroups
	if rank < 0 {
		return 0, p.failAt(sp.tileOffs[0], "devices=[...] has %d dims but %d replication dims are declared", len(sp.tile), subgroups)
	}
	if shape != nil && rank != len(shape) {
		return 0, p.failAt(sp.tileOffs[0], "devices=[...] gives %d tensor dims (plus %d replication dims) but the tensor has rank %d; give one tile count per tensor dim", rank, subgroups, len(shape))
	}
	total := 1
	for _, t := range sp.tile {
		total *= t
	}
	if total != n {
		return 0, p.failAt(sp.tileOffs[0], "the tile assignment has %d devices but the mesh has %d; the sharding must use every device of the mesh", total, n)
	}
	return rank, nil
}

// offAt is the offset to blame for tile-assignment entry k.
func (sp *hloSpec) offAt(k int) int {
	if sp.iota != nil {
		return sp.iotaOff
	}
	return sp.idOffs[k]
}

// meshPieces finds the mesh pieces, major to minor, whose device order is the tile
// assignment's: symbolically from the iota, else from the device ids with each group
// of sortRep replicas in any order.
func (sp *hloSpec) meshPieces(p *textParser, m *Mesh, ids []int, symbolic bool, sortRep int) ([]hloPiece, error) {
	if symbolic {
		pieces, ok := iotaPieces(m, sp.iota, sp.perm)
		if !ok {
			return nil, p.failAt(sp.iotaOff, "the iota's reshape dims do not split mesh %s at (sub-)axis boundaries; no mesh axes or sub-axes reproduce this device order", m.String())
		}
		return pieces, nil
	}
	n := m.NumDevices()
	pos := make([]int, n)
	for k, id := range ids {
		pos[k] = m.PositionOf(id)
	}
	// Replicas of a tile may come in any order: sort each group.
	sorted := slices.Clone(pos)
	for g := 0; g < n; g += sortRep {
		slices.Sort(sorted[g : g+sortRep])
	}
	pieces, bad, why := findPieces(m, sorted)
	if bad >= 0 {
		return nil, p.failAt(sp.offAt(bad), "%s; no mesh axes or sub-axes reproduce this device order on mesh %s%s", why, m.String(), deviceIDsNote(m))
	}
	return pieces, nil
}

// assignPieces hands the pieces, major to minor, to the data dims, then to the
// subgroups (an unreduced subgroup's pieces are the unreduced axes; replicated ones are
// dropped).
func (sp *hloSpec) assignPieces(p *textParser, m *Mesh, pieces []hloPiece, types []string, rank int) (Sharding, error) {
	s := Replicated(rank)
	for t, count := range sp.tile {
		var dst *[]AxisRef
		switch {
		case t < rank:
			dst = &s.Dims[t].Axes
		case types[t-rank] == "unreduced":
			dst = &s.Unreduced
		}
		for need := count; need > 1; {
			pc := pieces[0]
			switch {
			case pc.size <= need && need%pc.size == 0:
				need /= pc.size
				pieces = pieces[1:]
			case pc.size > need && pc.size%need == 0:
				pieces[0].size /= need
				pc = hloPiece{axis: pc.axis, minor: pc.minor * pieces[0].size, size: need}
				need = 1
			default:
				return Sharding{}, p.failAt(sp.tileOffs[t], "tile count %d of tile dim %d does not fit the mesh: its devices follow %s, and %d and %d have no common split", count, t, pc.ref(m), pc.size, need)
			}
			if dst != nil {
				*dst = append(*dst, pc.ref(m))
			}
		}
	}
	return s, nil
}

func productInts(v []int) int {
	p := 1
	for _, x := range v {
		p *= x
	}
	return p
}

func deviceIDsNote(m *Mesh) string {
	if m.DeviceIDs == nil {
		return ""
	}
	return " (with its device_ids)"
}

// deviceIDs returns the tile assignment's ids in row-major tile order, checked to be a
// permutation of 0..n-1.
func (sp *hloSpec) deviceIDs(p *textParser, n int) ([]int, error) {
	if sp.iota == nil {
		seen := make([]int, n)
		for k, id := range sp.ids {
			if id >= n {
				return nil, p.failAt(sp.idOffs[k], "device %d is not on the mesh (ids 0..%d)", id, n-1)
			}
			if seen[id] > 0 {
				return nil, p.failAt(sp.idOffs[k], "device %d appears twice in the tile assignment (also entry %d)", id, seen[id]-1)
			}
			seen[id] = k + 1
		}
		return sp.ids, nil
	}
	dims, perm := sp.iota, sp.perm
	if perm == nil {
		perm = make([]int, len(dims))
		for i := range perm {
			perm[i] = i
		}
	}
	stride := make([]int, len(dims))
	s := 1
	for i := len(dims) - 1; i >= 0; i-- {
		stride[i] = s
		s *= dims[i]
	}
	out := make([]int, 0, n)
	digits := make([]int, len(perm))
	for range n {
		v := 0
		for i, j := range perm {
			v += digits[i] * stride[j]
		}
		out = append(out, v)
		for i := len(digits) - 1; i >= 0; i-- {
			digits[i]++
			if digits[i] < dims[perm[i]] {
				break
			}
			digits[i] = 0
		}
	}
	return out, nil
}

// hloWorkLimit bounds the device-by-device checks ParseHLO spends on iota tile
// assignments on one mesh with device_ids (about a second of CPU): a request of many
// such shardings on a big mesh would otherwise cost tensors x devices.
var hloWorkLimit int64 = 1 << 26

// spendHLOWork takes n checks from m's budget; false when it is spent.
func (m *Mesh) spendHLOWork(n int) bool {
	if m.hloWork == nil {
		return int64(n) <= hloWorkLimit // a mesh not built through Validate: no shared budget
	}
	return atomic.AddInt64(m.hloWork, int64(n)) <= hloWorkLimit
}

// iotaPieces reads an iota tile assignment (reshape dims, transposed by perm; nil perm:
// identity) on a mesh without device_ids, where ids are positions: each reshape dim is a
// run of position strides, cut where mesh axes start. It returns the pieces major to
// minor in tile order, or false when a reshape dim splits an axis at no sub-axis
// boundary.
func iotaPieces(m *Mesh, dims, perm []int) ([]hloPiece, bool) {
	if perm == nil {
		perm = make([]int, len(dims))
		for i := range perm {
			perm[i] = i
		}
	}
	// Merge reshape dims that stay adjacent after the transpose (XLA's canonical form):
	// only the remaining boundaries must fall on sub-axis boundaries.
	type run struct{ lo, hi int } // position strides [lo, hi)
	stride := make([]int, len(dims))
	s := 1
	for j := len(dims) - 1; j >= 0; j-- {
		stride[j] = s
		s *= dims[j]
	}
	var runs []run
	for k, j := range perm {
		r := run{stride[j], stride[j] * dims[j]}
		if n := len(runs); n > 0 && k > 0 && perm[k-1] == j-1 {
			runs[n-1].lo = r.lo
			continue
		}
		runs = append(runs, r)
	}
	ast := axisStrides(m)
	var out []hloPiece
	for _, r := range runs {
		for a, ax := range m.Axes {
			if ax.Size == 1 {
				continue
			}
			alo, ahi := ast[a], ast[a]*ax.Size
			l, h := max(r.lo, alo), min(r.hi, ahi)
			if l >= h {
				continue
			}
			if l%alo != 0 || h%alo != 0 {
				return nil, false
			}
			minor, upper := l/alo, h/alo
			if ax.Size%upper != 0 || upper%minor != 0 {
				return nil, false
			}
			out = append(out, hloPiece{axis: a, minor: minor, size: upper / minor})
		}
	}
	return out, true
}

// findPieces reads the mesh pieces, major to minor, whose row-major digits give the
// mesh position pos[k] of every tile-assignment entry k. It returns the first entry no
// such reading explains (or -1) and why.
func findPieces(m *Mesh, pos []int) (pieces []hloPiece, bad int, why string) {
	n := len(pos)
	if pos[0] != 0 {
		return nil, 0, "the first tile is held by device " + strconv.Itoa(m.DeviceAt(pos[0])) + ", not by the mesh's first device " + strconv.Itoa(m.DeviceAt(0))
	}
	st := axisStrides(m)
	coords := make([]int, len(m.Axes))
	var refs []AxisRef
	idx := 1
	for idx < n {
		v := pos[idx]
		m.Coords(v, coords)
		axis := -1
		for i, c := range coords {
			if c != 0 {
				if axis >= 0 {
					return nil, idx, "entry " + strconv.Itoa(idx) + " steps along two mesh axes at once"
				}
				axis = i
			}
		}
		size := m.Axes[axis].Size
		q := coords[axis]
		if size%q != 0 {
			return nil, idx, "entry " + strconv.Itoa(idx) + " steps " + strconv.Itoa(q) + " along axis " + m.Axes[axis].Name + ", which splits no sub-axis"
		}
		k := 2
		for k < size/q && idx*k < n && pos[idx*k] == k*v {
			k++
		}
		if (size/q)%k != 0 {
			return nil, idx, "entry " + strconv.Itoa(idx) + " starts a run of " + strconv.Itoa(k) + " along axis " + m.Axes[axis].Name + ", which is no sub-axis"
		}
		pc := hloPiece{axis: axis, minor: q, size: k}
		r := pc.ref(m)
		for _, o := range refs {
			if o.Overlaps(r) || !o.CanCoexist(r) {
				return nil, idx, "entry " + strconv.Itoa(idx) + " reuses part of axis " + m.Axes[axis].Name
			}
		}
		refs = append(refs, r)
		pieces = append(pieces, pc)
		idx *= k
	}
	if idx != n {
		return nil, n - 1, "the device order does not factor into mesh axes"
	}
	slices.Reverse(pieces)
	// Check every entry against the reading.
	digits := make([]int, len(pieces))
	for k := range n {
		want := 0
		for i, pc := range pieces {
			want += digits[i] * pc.minor * st[pc.axis]
		}
		if pos[k] != want {
			return nil, k, "entry " + strconv.Itoa(k) + " holds device " + strconv.Itoa(m.DeviceAt(pos[k])) + " where the axes read from the first entries put device " + strconv.Itoa(m.DeviceAt(want))
		}
		for i := len(digits) - 1; i >= 0; i-- {
			digits[i]++
			if digits[i] < pieces[i].size {
				break
			}
			digits[i] = 0
		}
	}
	return pieces, -1, ""
}

// tileMismatch returns the first tile-assignment entry whose device holds another tile
// under s, or -1.
func tileMismatch(m *Mesh, s Sharding, tile []int, ids []int, rep int) int {
	l := NewLayout(m, make([]int64, len(tile)), s)
	coords := make([]int, len(m.Axes))
	want := make([]int, len(tile))
	for k, id := range ids {
		t := k / rep
		for d := len(tile) - 1; d >= 0; d-- {
			want[d] = t % tile[d]
			t /= tile[d]
		}
		m.Coords(m.PositionOf(id), coords)
		for d := range tile {
			if l.ShardIndex(d, coords) != want[d] {
				return k
			}
		}
	}
	return -1
}

// hloPather blames every invariant violation on the sharding's '{'.
type hloPather struct {
	field string
	off   int
}

func (p *hloPather) whole() string { return p.field }
func (p *hloPather) dim(d int) (string, string) {
	return p.field, "at offset " + strconv.Itoa(p.off) + " (dim " + strconv.Itoa(d) + "): "
}
func (p *hloPather) ref(place) (string, string) {
	return p.field, "at offset " + strconv.Itoa(p.off) + ": "
}
