package sharding

import (
	"slices"
	"strconv"
	"strings"
)

// This file reads and prints XLA's HloSharding text ("{devices=[2,1,4]<=[8]
// last_tile_dim_replicate}"), the form XLA dumps, jax.Array.sharding and mhlo.sharding
// attributes print.
//
// An HloSharding is a tile assignment: an array of device ids of shape [t0, ..., t(r-1),
// R...] (one tile count per tensor dim, then replication dims); the device at index
// (i0, ..., i(r-1), j) holds tile (i0, ..., i(r-1)). A mesh sharding describes the same
// thing once the mesh is cut into pieces (sub-axes): the tile assignment is the mesh's
// devices reshaped into those pieces and transposed so that each tensor dim's pieces come
// first (major to minor) and the replicated pieces last. Reading an HloSharding is finding
// those pieces; printing one is writing down that reshape and transpose.

// hloPiece is a sub-axis of mesh axis `axis`: the digit (coord / minor) % size.
type hloPiece struct {
	axis, minor, size int
}

func (p hloPiece) ref(m *Mesh) AxisRef {
	n := m.Axes[p.axis].Size
	return AxisRef{Name: m.Axes[p.axis].Name, Pre: n / (p.minor * p.size), Size: p.size, Of: n}
}

// axisStrides returns the row-major position stride of every mesh axis.
func axisStrides(m *Mesh) []int {
	st := make([]int, len(m.Axes))
	s := 1
	for i := len(m.Axes) - 1; i >= 0; i-- {
		st[i] = s
		s *= m.Axes[i].Size
	}
	return st
}

// HLO prints s as XLA's HloSharding text on m: the tile count of every dim, then the
// unreduced and the replicated device counts as subgroup dims when there are any
// (last_tile_dims={unreduced, replicated}, or last_tile_dim_replicate alone as XLA
// canonicalizes it), and the device order, as an iota tile assignment
// ("<=[2,8,4,4]T(0,2,1,3)") on a mesh without device_ids, else as an explicit id list.
// Implicitly or explicitly replicated axes are replication; open flags and priorities
// are not part of the layout and are not printed. s must be valid on m.
func (s Sharding) HLO(m *Mesh) string {
	t := tileHLO(s, m)
	switch {
	case !t.sharded && t.unreduced == 1:
		return "{replicated}"
	case !t.sharded && t.rep == 1:
		return "{unreduced}"
	}
	return t.text(m)
}

// hloTiling is a sharding laid out as XLA tiles it: the mesh cut into pieces, the
// pieces in tile order, and the tile counts.
type hloTiling struct {
	pieces    []hloPiece // mesh order, major to minor
	order     []int      // indices into pieces: the dims' axes, unreduced, then replicated
	counts    []int      // tile count of every dim
	sharded   bool       // some dim has more than one tile
	unreduced int        // devices holding partial sums of one tile
	rep       int        // devices holding copies of one tile
}

// tileHLO cuts m's axes into pieces at every sub-axis boundary s uses and orders them as
// the tiles run: each dim's axes, the unreduced axes, then the replicated pieces.
func tileHLO(s Sharding, m *Mesh) hloTiling {
	cuts := hloCuts(s, m)
	t := hloTiling{counts: make([]int, len(s.Dims)), unreduced: 1, rep: 1}
	first := make([]int, len(m.Axes))
	for i, a := range m.Axes {
		first[i] = len(t.pieces)
		for k := 0; k+1 < len(cuts[i]); k++ {
			pre, next := cuts[i][k], cuts[i][k+1]
			t.pieces = append(t.pieces, hloPiece{axis: i, minor: a.Size / next, size: next / pre})
		}
	}
	used := make([]bool, len(t.pieces))
	take := func(r AxisRef) {
		i := m.AxisIndex(r.Name)
		for k := range len(cuts[i]) - 1 {
			if pre := cuts[i][k]; pre >= r.Pre && pre < r.Next() {
				t.order = append(t.order, first[i]+k)
				used[first[i]+k] = true
			}
		}
	}
	for d, ds := range s.Dims {
		t.counts[d] = 1
		for _, r := range ds.Axes {
			take(r)
			t.counts[d] *= r.Size
		}
		t.sharded = t.sharded || t.counts[d] > 1
	}
	for _, r := range s.Unreduced {
		take(r)
		t.unreduced *= r.Size
	}
	for g, pc := range t.pieces {
		if !used[g] && pc.size > 1 {
			t.order = append(t.order, g)
			t.rep *= pc.size
		}
	}
	return t
}

// hloCuts cuts every axis of m at each sub-axis boundary a dim or the unreduced set of s
// uses: per axis, the ascending distinct pre values, 1 and the size included.
func hloCuts(s Sharding, m *Mesh) [][]int {
	cuts := make([][]int, len(m.Axes))
	for i, a := range m.Axes {
		cuts[i] = []int{1, a.Size}
	}
	for _, r := range append(s.UsedAxes()[:0:0], s.Unreduced...) {
		i := m.AxisIndex(r.Name)
		cuts[i] = append(cuts[i], r.Pre, r.Next())
	}
	for _, d := range s.Dims {
		for _, r := range d.Axes {
			i := m.AxisIndex(r.Name)
			cuts[i] = append(cuts[i], r.Pre, r.Next())
		}
	}
	for i := range cuts {
		slices.Sort(cuts[i])
		cuts[i] = slices.Compact(cuts[i])
	}
	return cuts
}

// text prints t on m: the tile counts with the unreduced and replicated subgroups, the
// device order and the subgroup kinds.
func (t hloTiling) text(m *Mesh) string {
	counts := t.counts
	if t.unreduced > 1 {
		counts = append(counts, t.unreduced)
	}
	if t.rep > 1 {
		counts = append(counts, t.rep)
	}
	var b strings.Builder
	b.WriteString("{devices=[")
	for d, c := range counts {
		if d > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
	}
	b.WriteByte(']')
	if m.DeviceIDs == nil {
		writeIota(&b, t.pieces, t.order)
	} else {
		writeDeviceList(&b, m, t.pieces, t.order)
	}
	switch {
	case t.unreduced > 1 && t.rep > 1:
		b.WriteString(" last_tile_dims={unreduced, replicated}")
	case t.unreduced > 1:
		b.WriteString(" last_tile_dims={unreduced}")
	case t.rep > 1:
		b.WriteString(" last_tile_dim_replicate")
	}
	b.WriteByte('}')
	return b.String()
}

// writeIota prints order (indices into pieces) as XLA's canonical iota tile assignment:
// the mesh reshaped into runs of pieces that stay adjacent in order, then transposed.
func writeIota(b *strings.Builder, pieces []hloPiece, order []int) {
	type run struct{ first, size int }
	var runs []run // in order's sequence
	for k, g := range order {
		if pieces[g].size == 1 {
			continue
		}
		if n := len(runs); n > 0 && k > 0 && order[k-1]+1 == g {
			runs[n-1].size *= pieces[g].size
			continue
		}
		runs = append(runs, run{g, pieces[g].size})
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(x, y run) int { return x.first - y.first })
	n := 1
	for _, r := range runs {
		n *= r.size
	}
	perm := make([]string, len(runs))
	identity := true
	for k, r := range runs {
		idx := slices.IndexFunc(sorted, func(x run) bool { return x.first == r.first })
		perm[k] = strconv.Itoa(idx)
		identity = identity && idx == k
	}
	if identity {
		b.WriteString("<=[" + strconv.Itoa(n) + "]")
		return
	}
	dims := make([]string, len(sorted))
	for k, r := range sorted {
		dims[k] = strconv.Itoa(r.size)
	}
	b.WriteString("<=[" + strings.Join(dims, ",") + "]T(" + strings.Join(perm, ",") + ")")
}

// writeDeviceList lists device ids in tile order (row-major over order's pieces).
func writeDeviceList(b *strings.Builder, m *Mesh, pieces []hloPiece, order []int) {
	st := axisStrides(m)
	n := 1
	for _, g := range order {
		n *= pieces[g].size
	}
	digits := make([]int, len(order))
	for k := range n {
		p := 0
		for i, g := range order {
			pc := pieces[g]
			p += digits[i] * pc.minor * st[pc.axis]
		}
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(m.DeviceAt(p)))
		for i := len(digits) - 1; i >= 0; i-- {
			digits[i]++
			if digits[i] < pieces[order[i]].size {
				break
			}
			digits[i] = 0
		}
	}
}
