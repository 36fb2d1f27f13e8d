package sharding

import (
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

	axisIdx [][]int // per dim, the mesh axis index of each axis ref
}

// NewLayout prepares the tile maps of s (already validated against m and shape).
func NewLayout(m *Mesh, shape []int64, s Sharding) *Layout {
	l := &Layout{Mesh: m, Shape: shape, Sharding: s, Counts: s.ShardCounts(), Tile: make([]int64, len(shape)), axisIdx: make([][]int, len(shape))}
	for d := range shape {
		l.Tile[d] = CeilDiv(shape[d], int64(l.Counts[d]))
		for _, r := range s.Dims[d].Axes {
			l.axisIdx[d] = append(l.axisIdx[d], m.AxisIndex(r.Name))
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
	for k, r := range l.Sharding.Dims[d].Axes {
		idx = idx*r.Size + r.Coord(coords[l.axisIdx[d][k]])
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
	coords := l.Mesh.Coords(l.Mesh.PositionOf(id), nil)
	t := DeviceTile{Device: id, Coords: coords, Ranges: make([][2]int64, len(l.Shape)), LocalShape: append([]int64(nil), l.Tile...), Padding: make([]int64, len(l.Shape))}
	for d := range l.Shape {
		s, e := l.Range(d, l.ShardIndex(d, coords))
		t.Ranges[d] = [2]int64{s, e}
		t.Padding[d] = l.Tile[d] - (e - s)
	}
	return t
}

// Tiles returns the tiles of the given device ids, or of every device in id order when
// ids is nil.
func (l *Layout) Tiles(ids []int) []DeviceTile {
	if ids == nil {
		n := l.Mesh.NumDevices()
		out := make([]DeviceTile, n)
		for id := range n {
			out[id] = l.TileOf(id)
		}
		return out
	}
	out := make([]DeviceTile, len(ids))
	for i, id := range ids {
		out[i] = l.TileOf(id)
	}
	return out
}

// Owner is a device holding an element, with the element's index in its local buffer.
type Owner struct {
	Device     int     `json:"device"`
	Coords     []int   `json:"coords"`
	LocalIndex []int64 `json:"local_index"`
}

// Locate returns every device holding global index idx (in device id order), with the
// element's local index. idx must be inside the shape. The cost is O(devices holding it
// x mesh rank): the owners' coordinates are enumerated, not searched.
func (l *Layout) Locate(idx []int64) []Owner {
	// Per mesh axis, the coordinate is fixed by the dims its refs shard, or free.
	m := l.Mesh
	fixed := make([]int, len(m.Axes)) // partial coordinate built from pieces
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
		fixed[p.axis] += p.val * p.minor
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
	var owners []Owner
	coords := make([]int, len(m.Axes))
	var rec func(a int)
	rec = func(a int) {
		if a == len(m.Axes) {
			id := m.DeviceAt(m.PositionOfCoords(coords))
			owners = append(owners, Owner{Device: id, Coords: append([]int(nil), coords...), LocalIndex: append([]int64(nil), local...)})
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
	sortOwners(owners)
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
	for i := 1; i < len(os); i++ {
		for j := i; j > 0 && os[j].Device < os[j-1].Device; j-- {
			os[j], os[j-1] = os[j-1], os[j]
		}
	}
}

// Maps returns the symbolic maps of the mesh notes for this layout, e.g.
// "d(m, n)[k, l] -> t[m * 6 + k, n * 6 + l]" and
// "t[i, j] -> d(i floordiv 6, j floordiv 6)[i mod 6, j mod 6]". Device coordinates are
// named after the mesh axes; a dim sharded by several axes uses their mixed-radix index.
func (l *Layout) Maps() (deviceToGlobal, globalToDevice string) {
	m := l.Mesh
	idxNames := []string{"i", "j", "k", "l", "m", "n", "o", "p", "q", "r"}
	localNames := []string{"a", "b", "c", "e", "f", "g", "h", "u", "v", "w"}
	name := func(names []string, d int) string {
		if d < len(names) {
			return names[d]
		}
		return "x" + strconv.Itoa(d)
	}
	coordName := func(r AxisRef) string {
		if r.IsFull() {
			return r.Name
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
			e = "(" + e + ") * " + strconv.Itoa(r.Size) + " + " + wrapIfSub(coordName(r), r)
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
			rhsGlobal = append(rhsGlobal, wrapSum(shardExpr(d))+" * "+t+" + "+name(localNames, d))
			gLocal = append(gLocal, name(idxNames, d)+" mod "+t)
		}
		gIdx = append(gIdx, name(idxNames, d))
	}
	// global -> device: per mesh axis, the coordinate (or * when free)
	for _, a := range m.Axes {
		var parts []string
		for d := range l.Shape {
			axes := l.Sharding.Dims[d].Axes
			t := strconv.FormatInt(l.Tile[d], 10)
			after := 1
			for k := len(axes) - 1; k >= 0; k-- {
				r := axes[k]
				if r.Name == a.Name {
					e := name(idxNames, d) + " floordiv " + t
					if after > 1 {
						e = "(" + e + ") floordiv " + strconv.Itoa(after)
					}
					if k > 0 {
						e = "(" + e + ") mod " + strconv.Itoa(r.Size)
					}
					if !r.IsFull() {
						e = "(" + e + ") * " + strconv.Itoa(r.Minor())
					}
					parts = append(parts, e)
				}
				after *= r.Size
			}
		}
		switch len(parts) {
		case 0:
			gDev = append(gDev, "*")
		default:
			gDev = append(gDev, strings.Join(parts, " + "))
		}
	}
	glob = gIdx
	deviceToGlobal = "d(" + strings.Join(dev, ", ") + ")[" + strings.Join(lhsLocal, ", ") + "] -> t[" + strings.Join(rhsGlobal, ", ") + "]"
	globalToDevice = "t[" + strings.Join(glob, ", ") + "] -> d(" + strings.Join(gDev, ", ") + ")[" + strings.Join(gLocal, ", ") + "]"
	return deviceToGlobal, globalToDevice
}

func wrapIfSub(e string, r AxisRef) string {
	if r.IsFull() {
		return e
	}
	return "(" + e + ")"
}

func wrapSum(e string) string {
	if strings.ContainsAny(e, "+*") {
		return "(" + e + ")"
	}
	return e
}
