package sharding

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Layout is a tensor of a given shape laid out on a mesh by a sharding: per dim the
// shard count and the (padded) tile length t = ceildiv(D, count). Building one costs
// O(rank x axes); per-device queries cost O(rank x axes).
type Layout struct {
	Mesh     *Mesh
	Shape    []int64
	Sharding Sharding
	Counts   []int   // shard count per dim
	Tile     []int64 // padded local length per dim

	axisIdx [][]int      // per dim, the mesh axis index of each axis ref
	digits  [][]dimDigit // per dim, how each axis ref's coordinate is read
}

// dimDigit reads one axis ref's coordinate from the device coordinates:
// (coords[axis] / minor) % size, or coords[axis] itself for a full axis.
type dimDigit struct {
	axis, minor, size int
	full              bool
}

// NewLayout prepares the tile maps of s (already validated against m and shape).
func NewLayout(m *Mesh, shape []int64, s Sharding) *Layout {
	l := &Layout{Mesh: m, Shape: shape, Sharding: s, Counts: s.ShardCounts(), Tile: make([]int64, len(shape)),
		axisIdx: make([][]int, len(shape)), digits: make([][]dimDigit, len(shape))}
	for d := range shape {
		l.Tile[d] = CeilDiv(shape[d], int64(l.Counts[d]))
		for _, r := range s.Dims[d].Axes {
			a := m.AxisIndex(r.Name)
			l.axisIdx[d] = append(l.axisIdx[d], a)
			l.digits[d] = append(l.digits[d], dimDigit{axis: a, minor: r.Minor(), size: r.Size, full: r.IsFull()})
		}
	}
	return l
}

// CeilDiv is ceil(a/b) for a >= 0, b > 0.
func CeilDiv(a, b int64) int64 { return (a + b - 1) / b }

// ShardIndex is the mixed-radix shard index along dim d of the device with the given
// mesh coordinates.
func (l *Layout) ShardIndex(d int, coords []int) int {
	idx := 0
	for _, g := range l.digits[d] {
		c := coords[g.axis]
		if !g.full {
			c = (c / g.minor) % g.size
		}
		idx = idx*g.size + c
	}
	return idx
}

// Range is the global [start, end) of shard idx along dim d.
func (l *Layout) Range(d, idx int) (int64, int64) {
	start := min(int64(idx)*l.Tile[d], l.Shape[d])
	return start, min(start+l.Tile[d], l.Shape[d])
}

// TileElements is the number of elements of a padded local buffer.
func (l *Layout) TileElements() int64 {
	n := int64(1)
	for _, t := range l.Tile {
		n *= t
	}
	return n
}

// DeviceTile is what one device holds: its mesh coordinates, the global [start, end) per
// dim, its padded local shape and the padding at the end of each dim.
type DeviceTile struct {
	Device     int        `json:"device"`
	Coords     []int      `json:"coords"`
	Ranges     [][2]int64 `json:"ranges"`
	LocalShape []int64    `json:"local_shape"`
	Padding    []int64    `json:"padding"`
}

// TileOf returns the tile of device id (0 <= id < devices).
func (l *Layout) TileOf(id int) DeviceTile {
	r := len(l.Shape)
	var t DeviceTile
	ints := make([]int64, 2*r)
	l.fill(&t, id, make([]int, len(l.Mesh.Axes)), make([][2]int64, r), ints[:r:r], ints[r:])
	return t
}

// fill writes the tile of device id into t, using the given slices (of the right
// lengths) as its Coords, Ranges, LocalShape and Padding.
func (l *Layout) fill(t *DeviceTile, id int, coords []int, ranges [][2]int64, local, padding []int64) {
	t.Device = id
	t.Coords = l.Mesh.Coords(l.Mesh.PositionOf(id), coords)
	t.Ranges, t.LocalShape, t.Padding = ranges, local, padding
	copy(local, l.Tile)
	for d := range l.Shape {
		s, e := l.Range(d, l.ShardIndex(d, t.Coords))
		ranges[d] = [2]int64{s, e}
		padding[d] = l.Tile[d] - (e - s)
	}
}

// Tiles returns the tiles of the given device ids (each 0 <= id < devices), or of every
// device in id order when ids is nil. It costs O(devices x (rank + mesh axes)) and makes
// a constant number of allocations: the tiles share four backing arrays (capacity-capped,
// so appending to one tile's slice never writes into another's).
func (l *Layout) Tiles(ids []int) []DeviceTile {
	n := len(ids)
	if ids == nil {
		n = l.Mesh.NumDevices()
	}
	r, na := len(l.Shape), len(l.Mesh.Axes)
	out := make([]DeviceTile, n)
	coords := make([]int, n*na)
	ranges := make([][2]int64, n*r)
	ints := make([]int64, 2*n*r)
	slot := func(i int) (c []int, rg [][2]int64, loc, pad []int64) {
		return coords[i*na : (i+1)*na : (i+1)*na], ranges[i*r : (i+1)*r : (i+1)*r],
			ints[2*i*r : (2*i+1)*r : (2*i+1)*r], ints[(2*i+1)*r : (2*i+2)*r : (2*i+2)*r]
	}
	if ids == nil {
		if tables := l.shardTables(); tables != nil {
			l.allTiles(out, tables, slot)
			return out
		}
	}
	for i := range out {
		id := i
		if ids != nil {
			id = ids[i]
		}
		c, rg, loc, pad := slot(i)
		l.fill(&out[i], id, c, rg, loc, pad)
	}
	return out
}

// maxTableAxis bounds the mesh axis size for which shardTables builds lookup tables.
const maxTableAxis = 1 << 16

// axisTable maps a coordinate on mesh axis `axis` to its contribution to a dim's shard
// index: the sum over the dim's refs of that axis of (ref coordinate x the product of
// the sizes of the refs minor to it).
type axisTable struct {
	axis    int
	contrib []int
}

// shardTables returns, per dim, one table per mesh axis sharding it, so that a shard
// index is a sum of lookups; nil when an axis is too large for a table.
func (l *Layout) shardTables() [][]axisTable {
	out := make([][]axisTable, len(l.Shape))
	for d := range l.Shape {
		digits := l.digits[d]
		weight := 1
		for k := len(digits) - 1; k >= 0; k-- {
			g := digits[k]
			size := l.Mesh.Axes[g.axis].Size
			if size > maxTableAxis {
				return nil
			}
			ti := slices.IndexFunc(out[d], func(t axisTable) bool { return t.axis == g.axis })
			if ti < 0 {
				out[d] = append(out[d], axisTable{axis: g.axis, contrib: make([]int, size)})
				ti = len(out[d]) - 1
			}
			for c := range size {
				v := c
				if !g.full {
					v = (c / g.minor) % g.size
				}
				out[d][ti].contrib[c] += v * weight
			}
			weight *= g.size
		}
	}
	return out
}

// allTiles fills the tiles of every device, walking mesh positions in row-major order
// with an odometer (no divisions per device) and placing each at out[id].
func (l *Layout) allTiles(out []DeviceTile, tables [][]axisTable, slot func(int) ([]int, [][2]int64, []int64, []int64)) {
	m := l.Mesh
	cur := make([]int, len(m.Axes))
	for p := range out {
		id := m.DeviceAt(p)
		c, rg, loc, pad := slot(id)
		copy(c, cur)
		copy(loc, l.Tile)
		for d, tbs := range tables {
			idx := 0
			for _, tb := range tbs {
				idx += tb.contrib[cur[tb.axis]]
			}
			s, e := l.Range(d, idx)
			rg[d] = [2]int64{s, e}
			pad[d] = l.Tile[d] - (e - s)
		}
		out[id] = DeviceTile{Device: id, Coords: c, Ranges: rg, LocalShape: loc, Padding: pad}
		for a := len(cur) - 1; a >= 0; a-- {
			if cur[a]++; cur[a] < m.Axes[a].Size {
				break
			}
			cur[a] = 0
		}
	}
}

// Owner is a device holding an element, with the element's index in its local buffer.
type Owner struct {
	Device     int     `json:"device"`
	Coords     []int   `json:"coords"`
	LocalIndex []int64 `json:"local_index"`
}

// Contains reports whether idx is an index inside the layout's shape.
func (l *Layout) Contains(idx []int64) bool {
	if len(idx) != len(l.Shape) {
		return false
	}
	for d, i := range idx {
		if i < 0 || i >= l.Shape[d] {
			return false
		}
	}
	return true
}

// Locate returns every device holding global index idx (in device id order), with the
// element's local index. It returns nil when idx is not inside the shape (see Contains). The cost is O(devices holding it
// x mesh rank): the owners' coordinates are enumerated, not searched.
func (l *Layout) Locate(idx []int64) []Owner {
	if !l.Contains(idx) {
		return nil
	}
	// Per mesh axis, the coordinate is fixed by the dims its refs shard, or free.
	m := l.Mesh
	covered := make([]int, len(m.Axes))
	for i := range covered {
		covered[i] = 1 // product of piece sizes fixed so far
	}
	local := make([]int64, len(l.Shape))
	var pieces []axisPiece
	for d := range l.Shape {
		shard := int(idx[d] / l.Tile[d])
		local[d] = idx[d] % l.Tile[d]
		axes := l.Sharding.Dims[d].Axes
		for k := len(axes) - 1; k >= 0; k-- {
			r := axes[k]
			pieces = append(pieces, axisPiece{axis: l.axisIdx[d][k], minor: r.Minor(), size: r.Size, val: shard % r.Size})
			shard /= r.Size
		}
	}
	for _, p := range pieces {
		covered[p.axis] *= p.size
	}
	// Enumerate the free part of every axis: the coordinate digits not fixed by pieces.
	// For each axis, the set of coordinates is {fixed + sum of free digits}; we list all
	// coordinates c in [0, size) whose fixed pieces match.
	choices := make([][]int, len(m.Axes))
	for a, ax := range m.Axes {
		if covered[a] == 1 {
			choices[a] = nil // all values
			continue
		}
		var cs []int
		for c := 0; c < ax.Size; c++ {
			if matches(a, c, pieces) {
				cs = append(cs, c)
			}
		}
		choices[a] = cs
	}
	total := 1
	for a, cs := range choices {
		if cs == nil {
			total *= m.Axes[a].Size
		} else {
			total *= len(cs)
		}
	}
	// One backing array each for the owners' coords and local indices (capacity-capped).
	na, r := len(m.Axes), len(local)
	owners := make([]Owner, 0, total)
	coordBuf := make([]int, total*na)
	localBuf := make([]int64, total*r)
	coords := make([]int, na)
	var rec func(a int)
	rec = func(a int) {
		if a == na {
			i := len(owners)
			c := coordBuf[i*na : (i+1)*na : (i+1)*na]
			li := localBuf[i*r : (i+1)*r : (i+1)*r]
			copy(c, coords)
			copy(li, local)
			owners = append(owners, Owner{Device: m.DeviceAt(m.PositionOfCoords(coords)), Coords: c, LocalIndex: li})
			return
		}
		if choices[a] == nil {
			for c := 0; c < m.Axes[a].Size; c++ {
				coords[a] = c
				rec(a + 1)
			}
			return
		}
		for _, c := range choices[a] {
			coords[a] = c
			rec(a + 1)
		}
	}
	rec(0)
	if m.DeviceIDs != nil { // identity ids come out in order already
		sortOwners(owners)
	}
	return owners
}

// axisPiece fixes the digit of mesh axis `axis` at stride minor and radix size to val.
type axisPiece struct{ axis, minor, size, val int }

func matches(axis, c int, ps []axisPiece) bool {
	for _, p := range ps {
		if p.axis == axis && (c/p.minor)%p.size != p.val {
			return false
		}
	}
	return true
}

func sortOwners(os []Owner) {
	slices.SortFunc(os, func(a, b Owner) int { return cmp.Compare(a.Device, b.Device) })
}

// Maps returns the symbolic maps of the mesh notes for this layout, e.g.
// "d(m, n)[k, l] -> t[m * 6 + k, n * 6 + l]" and
// "t[i, j] -> d(i floordiv 6, j floordiv 6)[i mod 6, j mod 6]". Device coordinates are
// named after the mesh axes; a dim sharded by several axes uses their mixed-radix index.
func (l *Layout) Maps() (deviceToGlobal, globalToDevice string) {
	m := l.Mesh
	idxNames, localNames := l.indexNames()
	name := func(names []string, d int) string { return names[d] }
	// coordName is the coordinate along r, (c / minor) % size, without no-op terms.
	coordName := func(r AxisRef) string {
		switch {
		case r.IsFull():
			return r.Name
		case r.Pre == 1: // the major-most piece: no mod needed
			return r.Name + " floordiv " + strconv.Itoa(r.Minor())
		case r.Minor() == 1: // the minor-most piece: no floordiv needed
			return r.Name + " mod " + strconv.Itoa(r.Size)
		}
		return "(" + r.Name + " floordiv " + strconv.Itoa(r.Minor()) + ") mod " + strconv.Itoa(r.Size)
	}
	// shard-index expression of dim d in terms of coordinates
	shardExpr := func(d int) string {
		axes := l.Sharding.Dims[d].Axes
		if len(axes) == 0 {
			return "0"
		}
		e := coordName(axes[0])
		for _, r := range axes[1:] {
			e = wrapExpr(e) + " * " + strconv.Itoa(r.Size) + " + " + wrapExpr(coordName(r))
		}
		return e
	}
	var dev, glob []string
	for _, a := range m.Axes {
		dev = append(dev, a.Name)
	}
	var lhsLocal, rhsGlobal, gIdx, gDev, gLocal []string
	for d := range l.Shape {
		lhsLocal = append(lhsLocal, name(localNames, d))
		t := strconv.FormatInt(l.Tile[d], 10)
		if len(l.Sharding.Dims[d].Axes) == 0 {
			rhsGlobal = append(rhsGlobal, name(localNames, d))
			gLocal = append(gLocal, name(idxNames, d))
		} else {
			rhsGlobal = append(rhsGlobal, wrapExpr(shardExpr(d))+" * "+t+" + "+name(localNames, d))
			gLocal = append(gLocal, name(idxNames, d)+" mod "+t)
		}
		gIdx = append(gIdx, name(idxNames, d))
	}
	// global -> device: per mesh axis, the coordinate (or * when free)
	for _, a := range m.Axes {
		var parts []string
		covered := 1 // product of the sizes of a's pieces that shard some dim
		for d := range l.Shape {
			axes := l.Sharding.Dims[d].Axes
			t := strconv.FormatInt(l.Tile[d], 10)
			after := 1
			for k := len(axes) - 1; k >= 0; k-- {
				r := axes[k]
				if r.Name == a.Name {
					covered *= r.Size
					e := name(idxNames, d) + " floordiv " + t
					if after > 1 {
						e = "(" + e + ") floordiv " + strconv.Itoa(after)
					}
					if k > 0 {
						e = "(" + e + ") mod " + strconv.Itoa(r.Size)
					}
					if r.Minor() > 1 {
						e = "(" + e + ") * " + strconv.Itoa(r.Minor())
					}
					parts = append(parts, e)
				}
				after *= r.Size
			}
		}
		if covered < a.Size || len(parts) == 0 {
			// Some digits of the coordinate are not fixed by any dim: any value holds it.
			parts = append(parts, "*")
		}
		gDev = append(gDev, strings.Join(parts, " + "))
	}
	glob = gIdx
	deviceToGlobal = "d(" + strings.Join(dev, ", ") + ")[" + strings.Join(lhsLocal, ", ") + "] -> t[" + strings.Join(rhsGlobal, ", ") + "]"
	globalToDevice = "t[" + strings.Join(glob, ", ") + "] -> d(" + strings.Join(gDev, ", ") + ")[" + strings.Join(gLocal, ", ") + "]"
	return deviceToGlobal, globalToDevice
}

// indexNames names the global and local indices of the maps: letters from i on (i, j for
// the global indices of a rank-2 tensor, then k, l for the local ones, as in the seed's
// "d(m, n)[k, l] -> t[m * 6 + k, n * 6 + l]"), skipping "t", "d" and every mesh axis
// name so that no name is ambiguous.
func (l *Layout) indexNames() (global, local []string) {
	taken := map[string]bool{"t": true, "d": true}
	for _, a := range l.Mesh.Axes {
		taken[a.Name] = true
	}
	pool := "ijklmnopqrsuvwabcefgh"
	next, extra := 0, 0
	fresh := func() string {
		for {
			var n string
			if next < len(pool) {
				n = pool[next : next+1]
				next++
			} else {
				n = "i" + strconv.Itoa(extra)
				extra++
			}
			if !taken[n] {
				taken[n] = true
				return n
			}
		}
	}
	r := len(l.Shape)
	global, local = make([]string, r), make([]string, r)
	for d := range global {
		global[d] = fresh()
	}
	for d := range local {
		local[d] = fresh()
	}
	return global, local
}

// wrapExpr parenthesises e unless it is a single name or number.
func wrapExpr(e string) string {
	if strings.Contains(e, " ") {
		return "(" + e + ")"
	}
	return e
}
