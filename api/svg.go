package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// The drawings of /explore as SVG from the API (Accept: image/svg+xml on /v1/tiles and
// /v1/reshard), for notebooks and docs: the mesh as nested grids with device ids, the
// tensor coloured by owning device, and for a plan one mesh per step with an arrow per
// point-to-point move and an outline per collective group. Elements carry data-
// attributes (data-device, data-ranges, data-from, data-to, data-step) so that a reader
// can check them against the JSON answer of the same request.

// maxSVGDevices bounds the meshes drawn. Above svgDeviceLimit devices a mesh is drawn
// by axes: one box per group of devices over its major axes, as /explore draws it.
const (
	maxSVGDevices  = 65536
	svgDeviceLimit = 64
	// svgGroupedDevices: up to this many devices the tensor has one rectangle per
	// device; above, its tiles are grouped by axis, up to svgAxisGroups boxes per dim.
	svgGroupedDevices = 1024
	svgAxisGroups     = 8
	svgFold           = 8 // a row (or column) of a mesh drawing holds up to this many cells
	// svgMatrixTitles: a move matrix of up to this many runs has a title per run.
	svgMatrixTitles = 512
	svgStripes      = 16
)

const (
	svgCell     = 40.0
	svgBlockW   = 64.0
	svgBlockH   = 42.0
	svgTensorPx = 300.0
	// svgGroupedPx is the size of a tensor drawn by axis groups, so that a box is wide
	// enough for its label.
	svgGroupedPx = 480.0
)

// meshDrawing places the cells of a mesh drawing (devices, or boxes of devices) as
// nested grids: the minor axis runs left to right, the next top to bottom, the next left
// to right around whole blocks, and so on; levels above the last two are labelled boxes.
// An axis longer than svgFold wraps into rows (across) or columns (down). cells are in
// row-major position order; first and span give each cell's run of mesh positions.
type meshDrawing struct {
	w, h   float64
	cw, ch float64
	cells  [][2]float64
	boxes  []svgBox
	blocks bool   // cells are boxes of span devices each
	span   int    // devices per cell
	legend string // which axis runs which way
}

type svgBox struct {
	x, y, w, h float64
	label      string
}

// svgAxis is an axis or a sub-axis of a drawing ("x:(2)4", as Shardy writes it).
type svgAxis struct {
	name string
	size int
}

// meshLevels groups a mesh's axes, major to minor, into levels of at most
// svgDeviceLimit cells each, splitting an axis that does not fit into sub-axes; a mesh
// of up to svgDeviceLimit devices is one level.
func meshLevels(m *sharding.Mesh) [][]svgAxis {
	if m.NumDevices() <= svgDeviceLimit {
		level := make([]svgAxis, len(m.Axes))
		for i, a := range m.Axes {
			level[i] = svgAxis{a.Name, a.Size}
		}
		return [][]svgAxis{level}
	}
	var levels [][]svgAxis
	var cur []svgAxis
	prod := 1
	for _, a := range m.Axes {
		piece := func(pre, size int) svgAxis {
			if size == a.Size {
				return svgAxis{a.Name, size}
			}
			return svgAxis{fmt.Sprintf("%s:(%d)%d", a.Name, pre, size), size}
		}
		pre, size := 1, a.Size
		for {
			if prod*size <= svgDeviceLimit {
				cur = append(cur, piece(pre, size))
				prod *= size
				break
			}
			d := svgDeviceLimit / prod
			for d > 1 && size%d != 0 {
				d--
			}
			if d > 1 {
				cur = append(cur, piece(pre, d))
				pre, size = pre*d, size/d
			} else if len(cur) == 0 {
				cur = append(cur, piece(pre, size)) // a prime longer than the limit
				prod = size
				break
			}
			levels = append(levels, cur)
			cur, prod = nil, 1
		}
	}
	if len(cur) > 0 {
		levels = append(levels, cur)
	}
	return levels
}

// layoutMesh lays out the whole mesh: every device, or above svgDeviceLimit devices one
// box per group over the first level's axes.
func layoutMesh(m *sharding.Mesh) meshDrawing {
	levels := meshLevels(m)
	top := levels[0]
	if len(levels) == 1 {
		d := layoutCells(top, svgCell, svgCell, 22)
		d.span = 1
		return d
	}
	d := layoutCells(top, svgBlockW, svgBlockH, 6)
	d.blocks = true
	d.span = m.NumDevices() / len(d.cells)
	var inner []string
	for _, l := range levels[1:] {
		for _, a := range l {
			inner = append(inner, a.name)
		}
	}
	d.legend += fmt.Sprintf(" · each box: %d devices over %s", d.span, strings.Join(inner, ", "))
	return d
}

func layoutCells(axes []svgAxis, cw, ch, innerGap float64) meshDrawing {
	n := len(axes)
	var level func(k int) meshDrawing
	level = func(k int) meshDrawing {
		if k == n {
			return meshDrawing{w: cw, h: ch, cells: [][2]float64{{0, 0}}}
		}
		inner := level(k + 1)
		horizontal := (n-1-k)%2 == 0
		composite := k < n-2
		pad, top := 0.0, 0.0
		if composite {
			pad, top = 6, 14
		}
		bw, bh := inner.w+2*pad, inner.h+2*pad+top
		gap := innerGap
		if n-1-k >= 2 {
			gap = innerGap + 4 + 2*float64(n-1-k)
		}
		size := axes[k].size
		runs := min(size, svgFold)
		wraps := (size + runs - 1) / runs
		var out meshDrawing
		for i := 0; i < size; i++ {
			along, across := float64(i%runs), float64(i/runs)
			ox, oy := along*(bw+gap), across*(bh+gap)
			if !horizontal {
				ox, oy = across*(bw+gap), along*(bh+gap)
			}
			for _, c := range inner.cells {
				out.cells = append(out.cells, [2]float64{ox + pad + c[0], oy + pad + top + c[1]})
			}
			for _, b := range inner.boxes {
				b.x, b.y = ox+pad+b.x, oy+pad+top+b.y
				out.boxes = append(out.boxes, b)
			}
			if composite {
				label := axes[k].name + "=" + strconv.Itoa(i)
				if textWidth(label, 11) > bw-8 {
					label = strconv.Itoa(i)
				}
				out.boxes = append(out.boxes, svgBox{ox, oy, bw, bh, label})
			}
		}
		nx, ny := float64(runs), float64(wraps)
		if !horizontal {
			nx, ny = ny, nx
		}
		out.w, out.h = nx*bw+(nx-1)*gap, ny*bh+(ny-1)*gap
		return out
	}
	d := level(0)
	left, top := 4.0, 20.0
	for i := range d.cells {
		d.cells[i][0] += left
		d.cells[i][1] += top
	}
	for i := range d.boxes {
		d.boxes[i].x += left
		d.boxes[i].y += top
	}
	d.w += left + 6
	d.h += top + 6
	d.cw, d.ch = cw, ch
	var across, down []string
	for k := n - 1; k >= 0; k-- {
		if (n-1-k)%2 == 0 {
			across = append(across, axes[k].name)
		} else {
			down = append(down, axes[k].name)
		}
	}
	d.legend = "→ " + strings.Join(across, ", ")
	if len(down) > 0 {
		d.legend += " · ↓ " + strings.Join(down, ", ")
	}
	return d
}

// textWidth estimates the width of a monospace text at a font size, in px.
func textWidth(s string, size float64) float64 {
	return float64(len([]rune(s))) * size * 0.62
}

// cellOf is the cell holding mesh position p.
func (lay *meshDrawing) cellOf(p int) int { return p / lay.span }

// svgDoc builds one SVG document from panels laid out top to bottom.
type svgDoc struct {
	b    bytes.Buffer
	y, w float64
	// extraH is the height of what an overlay drew beside the mesh (the move matrix).
	extraH float64
}

func (d *svgDoc) printf(format string, args ...any) { fmt.Fprintf(&d.b, format, args...) }

func num(f float64) string { return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) }

func esc(s string) string { return html.EscapeString(s) }

// deviceColor is the colour of a device id, the explorer page's colour.
func deviceColor(id int) string {
	h := math.Mod(float64(id)*137.508, 360)
	l := 72
	if id%2 == 1 {
		l = 62
	}
	return fmt.Sprintf("hsl(%s, 62%%, %d%%)", strconv.FormatFloat(math.Round(h*10)/10, 'f', -1, 64), l)
}

func groupColor(k int) string { return fmt.Sprintf("hsl(%d, 70%%, 38%%)", (k*67+200)%360) }

// heading writes a caption line and moves down.
func (d *svgDoc) heading(text string) {
	d.y += 18
	d.w = math.Max(d.w, 8+6.7*float64(len([]rune(text))))
	d.printf(`<text class="heading" x="4" y="%s">%s</text>`+"\n", num(d.y-4), esc(text))
}

// mesh draws m at the current height: every device labelled by id, or boxes of devices
// labelled by their id range; overlay adds to the panel (in its coordinates) and
// returns how much wider the panel grew beside the mesh.
func (d *svgDoc) mesh(m *sharding.Mesh, lay meshDrawing, class string, attrs string, overlay func(*svgDoc) float64) {
	d.printf(`<g class="%s" data-devices="%d"%s transform="translate(0 %s)">`+"\n", class, m.NumDevices(), attrs, num(d.y))
	d.printf(`<text class="axis" x="4" y="12">%s</text>`+"\n", esc(lay.legend))
	for _, b := range lay.boxes {
		d.printf(`<rect class="box" x="%s" y="%s" width="%s" height="%s" rx="4" fill="none" stroke="#b8c0cf" stroke-dasharray="3 2"/><text class="axis" x="%s" y="%s">%s</text>`+"\n",
			num(b.x), num(b.y), num(b.w), num(b.h), num(b.x+4), num(b.y+11), esc(b.label))
	}
	coords := make([]int, len(m.Axes))
	for i, c := range lay.cells {
		if lay.blocks {
			first := i * lay.span
			a, b := m.DeviceAt(first), m.DeviceAt(first+lay.span-1)
			d.printf(`<g class="block" data-block="%d" data-first="%d" data-span="%d"><rect x="%s" y="%s" width="%s" height="%s" rx="4" fill="#fff" stroke="#8a93a6"/><text x="%s" y="%s" text-anchor="middle" font-size="10">%d</text><text x="%s" y="%s" text-anchor="middle" font-size="10">…%d</text><title>%d devices from position %d: ids %d…%d</title></g>`+"\n",
				i, first, lay.span, num(c[0]), num(c[1]), num(lay.cw), num(lay.ch), num(c[0]+lay.cw/2), num(c[1]+13), a, num(c[0]+lay.cw/2), num(c[1]+25), b, lay.span, first, a, b)
			continue
		}
		id := m.DeviceAt(i)
		coords = m.Coords(i, coords[:0])
		d.printf(`<g class="device" data-device="%d"><rect x="%s" y="%s" width="%s" height="%s" rx="3" fill="#fff" stroke="#8a93a6"/><text x="%s" y="%s" text-anchor="middle">%d</text><title>device %d at %s</title></g>`+"\n",
			id, num(c[0]), num(c[1]), num(svgCell), num(svgCell), num(c[0]+svgCell/2), num(c[1]+svgCell/2+4), id, id, esc(coordText(m, coords)))
	}
	w := math.Max(lay.w, textWidth(lay.legend, 11)+8)
	if overlay != nil {
		w += overlay(d)
	}
	d.printf("</g>\n")
	d.y += math.Max(lay.h, d.extraH)
	d.extraH = 0
	d.w = math.Max(d.w, w)
}

func coordText(m *sharding.Mesh, coords []int) string {
	parts := make([]string, len(coords))
	for k, c := range coords {
		parts[k] = m.Axes[k].Name + "=" + strconv.Itoa(c)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// tensor draws the tiles of a tensor laid out by l, one rectangle per device of tiles
// (replicas of a tile drawn over one another), coloured by device. It shows dims rows x
// cols (rank 1: one row); a tensor of rank 3 or more is drawn over its last two dims, with
// the tiles that hold index 0 of its other dims. Above svgGroupedDevices devices the tiles
// are drawn grouped by axis (groupedTensor).
func (d *svgDoc) tensor(l *sharding.Layout, tiles []DeviceTile, role string) {
	shape := l.Shape
	rank := len(shape)
	rowsDim, colsDim := -1, 0
	if rank >= 2 {
		rowsDim, colsDim = rank-2, rank-1
	}
	rows := int64(1)
	if rowsDim >= 0 {
		rows = shape[rowsDim]
	}
	cols := shape[colsDim]
	grouped := l.Mesh.NumDevices() > svgGroupedDevices
	px := svgTensorPx
	if grouped {
		px = svgGroupedPx
	}
	scale := px / float64(max(rows, cols, 1))
	// A very long or very wide tensor is drawn at least a quarter as wide as long, so
	// that its tiles stay visible.
	w, h := math.Max(px/4, float64(cols)*scale), math.Max(px/4, float64(rows)*scale)
	if rowsDim < 0 {
		h = 24
		if grouped {
			h = 48
		}
	}
	d.printf(`<g class="tensor" data-role="%s" data-shape="%s" transform="translate(4 %s)">`+"\n", role, esc(jsonText(shape)), num(d.y))
	d.printf(`<rect x="0" y="0" width="%s" height="%s" fill="#eee"/>`+"\n", num(w), num(h))
	if grouped {
		d.groupedTensor(l, tiles, rowsDim, colsDim, w, h)
		d.printf("</g>\n")
		d.y += h + 6
		d.w = math.Max(d.w, w+8)
		return
	}
	// Replicas of a tile are drawn over one another, the lowest id last (on top, as the
	// explorer colours a tile by its lowest owner), and labelled once.
	order := make([]int, len(tiles))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return tiles[order[a]].Device > tiles[order[b]].Device })
	labels := map[string]*tileLabel{}
	var labelOrder []string
	for _, i := range order {
		t := tiles[i]
		if !shownTile(t.Ranges, rowsDim, colsDim) {
			continue
		}
		rr := [2]int64{0, 1}
		if rowsDim >= 0 {
			rr = t.Ranges[rowsDim]
		}
		cr := t.Ranges[colsDim]
		x, y := float64(cr[0])*w/float64(cols), float64(rr[0])*h/float64(rows)
		tw, th := float64(cr[1]-cr[0])*w/float64(cols), float64(rr[1]-rr[0])*h/float64(rows)
		key := jsonText(t.Ranges)
		l, seen := labels[key]
		if seen {
			l.owner, l.n = t.Device, l.n+1
		} else {
			l = &tileLabel{x, y, tw, th, t.Device, 1}
			labels[key] = l
			labelOrder = append(labelOrder, key)
		}
		d.tile(t.Device, t.Ranges, x, y, tw, th)
	}
	for _, k := range labelOrder {
		l := labels[k]
		text := replicaText(l.owner, l.n)
		if l.w < textWidth(text, 11)+4 || l.h < 14 {
			continue
		}
		d.printf(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(l.x+l.w/2), num(l.y+l.h/2+4), text)
	}
	d.printf("</g>\n")
	d.y += h + 6
	d.w = math.Max(d.w, w+8)
}

// shownTile reports whether a tile holds index 0 of every dim but rowsDim and colsDim.
func shownTile(ranges [][2]int64, rowsDim, colsDim int) bool {
	for dim, r := range ranges {
		if dim != rowsDim && dim != colsDim && r[0] != 0 {
			return false
		}
	}
	return true
}

// tileLabel is a distinct tile of a drawing: its place, its lowest owner and how many
// devices hold it.
type tileLabel struct {
	x, y, w, h float64
	owner, n   int
}

// axisGroup is a run of shards along one tensor dim, [lo, hi) in shard index, named by
// the coordinates of the dim's axes it covers ("x 8..15", "a 1 b 0..7"; "" for a dim
// that is not sharded).
type axisGroup struct {
	lo, hi int
	label  string
}

// axisGroups splits the shards of a dim sharded by axes (major to minor) into at most
// svgAxisGroups groups along its axes: whole major axes while they fit, then the next
// axis in equal runs of its coordinates. A dim that does not split (no axes, or a prime
// axis longer than the limit first) is one group over all its axes' coordinates.
func axisGroups(axes []sharding.AxisRef) []axisGroup {
	count := sharding.Product(axes)
	type digit struct {
		name        string
		size, width int // coordinates: size runs of width each
	}
	var digits []digit
	prod := 1
	for _, a := range axes {
		if prod*a.Size <= svgAxisGroups {
			digits = append(digits, digit{a.String(), a.Size, 1})
			prod *= a.Size
			continue
		}
		k := svgAxisGroups / prod
		for k > 1 && a.Size%k != 0 {
			k--
		}
		if k > 1 {
			digits = append(digits, digit{a.String(), k, a.Size / k})
			prod *= k
		}
		break
	}
	if prod == 1 {
		if len(axes) == 0 {
			return []axisGroup{{0, 1, ""}}
		}
		names := make([]string, len(axes))
		for i, a := range axes {
			names[i] = a.String()
		}
		return []axisGroup{{0, count, fmt.Sprintf("%s 0..%d", strings.Join(names, ","), count-1)}}
	}
	per := count / prod
	out := make([]axisGroup, prod)
	for j := range out {
		parts := make([]string, len(digits))
		rest := j
		for i := len(digits) - 1; i >= 0; i-- {
			g := digits[i]
			c := rest % g.size
			rest /= g.size
			if g.width == 1 {
				parts[i] = fmt.Sprintf("%s %d", g.name, c)
			} else {
				parts[i] = fmt.Sprintf("%s %d..%d", g.name, c*g.width, c*g.width+g.width-1)
			}
		}
		out[j] = axisGroup{j * per, (j + 1) * per, strings.Join(parts, " ")}
	}
	return out
}

// groupedTensor draws a w x h tensor's tiles grouped by axis: one box per pair of a
// row group and a column group (axisGroups), coloured by the lowest device holding a
// tile in it and labelled by the axes' coordinates it covers, with data-tiles (distinct
// tiles) and data-devices (devices of tiles) counting what it stands for.
func (d *svgDoc) groupedTensor(l *sharding.Layout, tiles []DeviceTile, rowsDim, colsDim int, w, h float64) {
	var rowGroups []axisGroup
	rows := int64(1)
	if rowsDim >= 0 {
		rowGroups = axisGroups(l.Sharding.Dims[rowsDim].Axes)
		rows = l.Shape[rowsDim]
	} else {
		rowGroups = []axisGroup{{0, 1, ""}}
	}
	colGroups := axisGroups(l.Sharding.Dims[colsDim].Axes)
	cols := l.Shape[colsDim]
	groupOf := func(gs []axisGroup, idx int) int {
		return sort.Search(len(gs), func(i int) bool { return gs[i].hi > idx }) // gs cover [0, count)
	}
	type box struct {
		owner, devices int
		tiles          map[[2]int]bool
	}
	boxes := make([]box, len(rowGroups)*len(colGroups))
	for i := range boxes {
		boxes[i].owner = -1
	}
	for _, t := range tiles {
		if !shownTile(t.Ranges, rowsDim, colsDim) {
			continue
		}
		ri := 0
		if rowsDim >= 0 {
			ri = l.ShardIndex(rowsDim, t.Coords)
		}
		ci := l.ShardIndex(colsDim, t.Coords)
		b := &boxes[groupOf(rowGroups, ri)*len(colGroups)+groupOf(colGroups, ci)]
		if b.tiles == nil {
			b.tiles = map[[2]int]bool{}
		}
		b.tiles[[2]int{ri, ci}] = true
		b.devices++
		if b.owner < 0 || t.Device < b.owner {
			b.owner = t.Device
		}
	}
	span := func(dim int, g axisGroup, length int64, px float64) (float64, float64) {
		if dim < 0 {
			return 0, px
		}
		a, _ := l.Range(dim, g.lo)
		_, b := l.Range(dim, g.hi-1)
		return float64(a) * px / float64(length), float64(b) * px / float64(length)
	}
	d.printf(`<g class="tile-groups" data-rows="%d" data-cols="%d">`+"\n", len(rowGroups), len(colGroups))
	for r, rg := range rowGroups {
		y0, y1 := span(rowsDim, rg, rows, h)
		for c, cg := range colGroups {
			b := boxes[r*len(colGroups)+c]
			if b.owner < 0 {
				continue // no listed device holds a tile of this box
			}
			x0, x1 := span(colsDim, cg, cols, w)
			bw, bh := math.Max(x1-x0, 0.5), math.Max(y1-y0, 0.5)
			var lines []string
			for _, s := range []string{rg.label, cg.label} {
				if s != "" {
					lines = append(lines, s)
				}
			}
			name := strings.Join(lines, ", ")
			if name == "" {
				name = "whole tensor"
			}
			d.printf(`<g class="tile-group" data-label="%s" data-owner="%d" data-tiles="%d" data-devices="%d"><rect x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#fff"/>`,
				esc(name), b.owner, len(b.tiles), b.devices, num(x0), num(y0), num(bw), num(bh), deviceColor(b.owner))
			d.boxLabel(lines, x0, y0, bw, bh)
			d.printf("<title>%s: %s on %s from device %d</title></g>\n", esc(name), Count(len(b.tiles), "tile"), Count(b.devices, "device"), b.owner)
		}
	}
	d.printf("</g>\n")
}

// groupedCaption says, above a tensor drawn by axis groups, what a box stands for.
func (d *svgDoc) groupedCaption(l *sharding.Layout) {
	if l.Mesh.NumDevices() <= svgGroupedDevices {
		return
	}
	tiles := 1
	for _, c := range l.Counts {
		tiles *= c
	}
	d.heading(fmt.Sprintf("%s on %s, drawn by axis: one box per axis group, coloured by its lowest device", Count(tiles, "tile"), Count(l.Mesh.NumDevices(), "device")))
}

// boxLabel writes lines of text centred in a box, across when they fit its width, else
// down when they fit its height, else not at all.
func (d *svgDoc) boxLabel(lines []string, x, y, w, h float64) {
	if len(lines) == 0 {
		return
	}
	long := 0.0
	for _, s := range lines {
		long = math.Max(long, textWidth(s, 10))
	}
	tall := 12 * float64(len(lines))
	cx, cy := x+w/2, y+h/2
	switch {
	case long+4 <= w && tall+2 <= h:
		for i, s := range lines {
			d.printf(`<text x="%s" y="%s" text-anchor="middle" font-size="10">%s</text>`, num(cx), num(cy-tall/2+12*float64(i)+9), esc(s))
		}
	case long+4 <= h && tall+2 <= w:
		for i, s := range lines {
			d.printf(`<text x="%s" y="%s" text-anchor="middle" font-size="10" transform="rotate(-90 %s %s)">%s</text>`, num(cx), num(cy-tall/2+12*float64(i)+9), num(cx), num(cy), esc(s))
		}
	}
}

// tile draws one tile. A tile too thin for a border has none, so that many narrow
// tiles read as colour.
func (d *svgDoc) tile(device int, ranges [][2]int64, x, y, w, h float64) {
	stroke := ` stroke="#fff"`
	if w < 6 || h < 6 {
		stroke = ""
	}
	d.printf(`<rect class="tile" data-device="%d" data-ranges="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"%s><title>device %d: %s</title></rect>`+"\n",
		device, esc(jsonText(ranges)), num(x), num(y), num(math.Max(w, 0.5)), num(math.Max(h, 0.5)), deviceColor(device), stroke, device, esc(rangesText(ranges)))
}

// replicaText is the one notation for a tile and its replicas, in the SVG as on
// /explore: the lowest device id, then "×n" when n devices hold the tile.
func replicaText(owner, n int) string {
	if n > 1 {
		return fmt.Sprintf("%d ×%d", owner, n)
	}
	return strconv.Itoa(owner)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func rangesText(r [][2]int64) string {
	parts := make([]string, len(r))
	for d, x := range r {
		parts[d] = fmt.Sprintf("dim %d [%d, %d)", d, x[0], x[1])
	}
	return strings.Join(parts, ", ")
}

func (d *svgDoc) bytes(title string) []byte {
	var out bytes.Buffer
	w, h := d.w+8, d.y+8
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="monospace" font-size="11">`+"\n",
		num(w), num(h), num(w), num(h))
	fmt.Fprintf(&out, "<title>%s</title>\n", esc(title))
	out.WriteString(`<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="4" markerHeight="4" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#c2185b"/></marker></defs>` + "\n")
	out.Write(d.b.Bytes())
	out.WriteString("</svg>\n")
	return out.Bytes()
}

// tilesSVG draws a /v1/tiles answer: the mesh and the tensor's tiles.
func tilesSVG(m *sharding.Mesh, shape []int64, resp *TilesResponse) ([]byte, error) {
	if err := svgDrawable(m); err != nil {
		return nil, err
	}
	var d svgDoc
	d.heading(fmt.Sprintf("mesh %s, %d devices", m.String(), m.NumDevices()))
	d.mesh(m, layoutMesh(m), "mesh", "", nil)
	sh, err := sharding.ParseText(resp.Sharding.Text, m, shape, "sharding")
	if err != nil {
		return nil, err
	}
	l := sharding.NewLayout(m, shape, sh)
	d.heading(fmt.Sprintf("tensor %s sharded %s", jsonText(shape), resp.Sharding.Text))
	d.groupedCaption(l)
	d.tensor(l, resp.Devices, "tiles")
	return d.bytes("shardplan tiles: " + resp.Sharding.Text), nil
}

func svgDrawable(m *sharding.Mesh) error {
	if n := m.NumDevices(); n > maxSVGDevices {
		return limitExceeded("mesh", "has %d devices; SVG drawings are made for meshes of up to %d devices (ask for JSON)", n, maxSVGDevices)
	}
	return nil
}

// svgMove is one arrow of a step: from sends to to.
type svgMove struct {
	from, to int
	bytes    int64
}

// stepMoves lists a step's point-to-point moves, self moves left out, one per pair.
func stepMoves(st StepJSON) []svgMove {
	idx := map[[2]int]int{}
	var out []svgMove
	add := func(from, to int, b int64) {
		if from == to {
			return
		}
		k := [2]int{from, to}
		if i, ok := idx[k]; ok {
			out[i].bytes += b
			return
		}
		idx[k] = len(out)
		out = append(out, svgMove{from, to, b})
	}
	// Runs are expanded one at a time, not into one list of every move.
	if len(st.Transfers) > 0 || len(st.TransferRuns) > 0 {
		for _, t := range st.Transfers {
			add(t.From, t.To, t.Bytes)
		}
		for _, r := range st.TransferRuns {
			for _, t := range r.Expand() {
				add(t.From, t.To, t.Bytes)
			}
		}
		return out
	}
	for _, p := range st.Pairs {
		add(p[0], p[1], st.BytesPerDevice)
	}
	for _, r := range st.PairRuns {
		for _, p := range r.Expand() {
			add(p[0], p[1], st.BytesPerDevice)
		}
	}
	return out
}

// stepGroups lists the device groups of a collective step: the devices that differ only
// on its mesh axes (or sub-axes), in the order of their first member.
func stepGroups(m *sharding.Mesh, st StepJSON) [][]int {
	switch st.Op {
	case "all_gather", "all_to_all", "reduce_scatter", "all_reduce":
	default:
		return nil
	}
	refs := make([]sharding.AxisRef, 0, len(st.MeshAxes))
	for _, a := range st.MeshAxes {
		r, err := sharding.ParseAxisRef(a, m, "")
		if err != nil {
			return nil
		}
		refs = append(refs, r)
	}
	groups := map[string][]int{}
	var order []string
	coords := make([]int, len(m.Axes))
	for p := 0; p < m.NumDevices(); p++ {
		coords = m.Coords(p, coords[:0])
		for _, r := range refs {
			k := m.AxisIndex(r.Name)
			coords[k] -= r.Coord(coords[k]) * r.Minor()
		}
		key := fmt.Sprint(coords)
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], m.DeviceAt(p))
	}
	out := make([][]int, 0, len(order))
	for _, k := range order {
		if g := groups[k]; len(g) > 1 {
			sort.Ints(g)
			out = append(out, g)
		}
	}
	return out
}

// reshardSVG draws a /v1/reshard answer: the source and target tiles and, for each step,
// the mesh with its moves and groups.
func reshardSVG(resp *ReshardResponse) ([]byte, error) {
	axes := make([]sharding.Axis, len(resp.Mesh.Axes))
	for i, a := range resp.Mesh.Axes {
		axes[i] = sharding.Axis{Name: a.Name, Size: a.Size}
	}
	m, err := sharding.NewMesh(resp.Mesh.Name, axes, resp.Mesh.DeviceIDs)
	if err != nil {
		return nil, err
	}
	if err := svgDrawable(m); err != nil {
		return nil, err
	}
	tilesOf := func(sh ShardingJSON) (*sharding.Layout, []DeviceTile, error) {
		s, err := sharding.ParseText(sh.Text, m, resp.Shape, "sharding")
		if err != nil {
			return nil, nil, err
		}
		l := sharding.NewLayout(m, resp.Shape, s)
		return l, deviceTilesOf(l.Tiles(nil)), nil
	}
	lay := layoutMesh(m)
	var d svgDoc
	d.heading(fmt.Sprintf("mesh %s, %s; %s, %.2f µs (lower bound %.2f µs)", m.String(), Count(m.NumDevices(), "device"), Count(len(resp.Steps), "step"), resp.Summary.TimeUS, resp.Summary.TimeLowerBoundUS))
	for _, role := range []struct {
		name string
		sh   ShardingJSON
	}{{"source", resp.Source}, {"target", resp.Target}} {
		l, tiles, err := tilesOf(role.sh)
		if err != nil {
			return nil, err
		}
		d.heading(role.name + " " + role.sh.Text)
		d.groupedCaption(l)
		d.tensor(l, tiles, role.name)
	}
	for i, st := range resp.Steps {
		moves, groups := stepMoves(st), stepGroups(m, st)
		d.heading(fmt.Sprintf("step %d: %s over %s, %d bytes per device, %.2f µs", i+1, st.Op, strings.Join(st.MeshAxes, ","), st.BytesPerDevice, st.TimeUS))
		d.mesh(m, lay, "step", fmt.Sprintf(` data-step="%d" data-op="%s"`, i, esc(st.Op)), func(d *svgDoc) float64 {
			if lay.blocks {
				stepStripes(d, m, lay, groups)
				return stepMatrix(d, m, lay, moves)
			}
			for k, g := range groups {
				for _, id := range g {
					c := lay.cells[m.PositionOf(id)]
					d.printf(`<rect class="group-outline" data-group="%d" data-device="%d" x="%s" y="%s" width="%s" height="%s" rx="5" fill="%s" fill-opacity="0.25" stroke="%s" stroke-width="2" stroke-dasharray="5 3"/>`+"\n",
						k, id, num(c[0]-2), num(c[1]-2), num(svgCell+4), num(svgCell+4), groupColor(k), groupColor(k))
				}
			}
			for _, mv := range moves {
				a, b := lay.cells[m.PositionOf(mv.from)], lay.cells[m.PositionOf(mv.to)]
				ax, ay, bx, by := a[0]+svgCell/2, a[1]+svgCell/2, b[0]+svgCell/2, b[1]+svgCell/2
				dx, dy := bx-ax, by-ay
				l := math.Max(1, math.Hypot(dx, dy))
				// Bend to the left of the direction of travel (opposite moves part) and
				// run from cell edge to cell edge, the head clear of the device id.
				bend := math.Min(28, 10+l*0.15)
				mx, my := (ax+bx)/2-dy/l*bend, (ay+by)/2+dx/l*bend
				sx, sy := edgePoint(a, mx, my, 1)
				ex, ey := edgePoint(b, mx, my, 2)
				d.printf(`<path class="arrow" data-from="%d" data-to="%d" data-bytes="%d" d="M %s %s Q %s %s %s %s" fill="none" stroke="#c2185b" stroke-width="2.2" marker-end="url(#head)"><title>%d → %d: %d bytes</title></path>`+"\n",
					mv.from, mv.to, mv.bytes, num(sx), num(sy), num(mx), num(my), num(ex), num(ey), mv.from, mv.to, mv.bytes)
			}
			return 0
		})
	}
	return d.bytes("shardplan plan " + resp.PlanID), nil
}

// edgePoint is where the segment from the centre of the device cell at c towards
// (tx, ty) leaves the cell, pushed out by pad.
func edgePoint(c [2]float64, tx, ty, pad float64) (float64, float64) {
	return boxEdge(c[0]+svgCell/2, c[1]+svgCell/2, svgCell/2, svgCell/2, tx, ty, pad)
}

// stepStripes draws a collective's groups over boxes of devices: under each box's label
// a bar of stripes, one per group its devices belong to (up to svgStripes), coloured by
// group.
func stepStripes(d *svgDoc, m *sharding.Mesh, lay meshDrawing, groups [][]int) {
	if len(groups) == 0 {
		return
	}
	perBox := make([][]int, len(lay.cells))
	for k, g := range groups {
		seen := map[int]bool{}
		for _, id := range g {
			b := lay.cellOf(m.PositionOf(id))
			if !seen[b] && len(perBox[b]) < svgStripes {
				seen[b] = true
				perBox[b] = append(perBox[b], k)
			}
		}
	}
	for b, ks := range perBox {
		if len(ks) == 0 {
			continue
		}
		sort.Ints(ks)
		c := lay.cells[b]
		sw := (lay.cw - 6) / float64(len(ks))
		d.printf(`<g class="bands" data-block="%d" data-groups="%d">`, b, len(ks))
		for s, k := range ks {
			d.printf(`<rect class="band" data-group="%d" x="%s" y="%s" width="%s" height="9" fill="%s"/>`, k, num(c[0]+3+float64(s)*sw), num(c[1]+lay.ch-12), num(sw), groupColor(k))
		}
		d.printf("</g>\n")
	}
}

// stepMatrix draws a step's point-to-point moves over boxes of devices as a matrix
// beside the mesh (rows send, columns receive; darker is more bytes) and returns the
// width it takes.
func stepMatrix(d *svgDoc, m *sharding.Mesh, lay meshDrawing, moves []svgMove) float64 {
	if len(moves) == 0 {
		return 0
	}
	n := len(lay.cells)
	type cell struct {
		moves int
		bytes int64
	}
	cells := map[[2]int]*cell{}
	var most int64
	for _, mv := range moves {
		k := [2]int{lay.cellOf(m.PositionOf(mv.from)), lay.cellOf(m.PositionOf(mv.to))}
		c := cells[k]
		if c == nil {
			c = &cell{}
			cells[k] = c
		}
		c.moves++
		c.bytes += mv.bytes
		most = max(most, c.bytes)
	}
	px := math.Max(4, math.Min(14, math.Floor(300/float64(n))))
	x0 := lay.w + 20
	left, top := x0+40, 34.0
	size := float64(n) * px
	caption := fmt.Sprintf("moves between boxes: %d", len(moves))
	d.printf(`<g class="matrix" data-moves="%d" data-cells="%d"><text class="axis" x="%s" y="12">%s</text><text class="axis" x="%s" y="26">to box →</text><text class="axis" x="%s" y="%s">from</text><rect x="%s" y="%s" width="%s" height="%s" fill="#fff" stroke="#d6dbe4"/>`+"\n",
		len(moves), len(cells), num(x0), caption, num(left), num(x0), num(top+10), num(left), num(top), num(size), num(size))
	keys := make([][2]int, 0, len(cells))
	for k := range cells {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a][0] != keys[b][0] {
			return keys[a][0] < keys[b][0]
		}
		return keys[a][1] < keys[b][1]
	})
	// A row's run of cells with the same moves and bytes is one rectangle (data-to-block
	// to data-to-last), so that an even all-to-all of 64 boxes is 64 rectangles, not 4,096.
	type run struct {
		from, to, last int
		c              *cell
	}
	var runs []run
	for _, k := range keys {
		c := cells[k]
		if n := len(runs); n > 0 {
			r := &runs[n-1]
			if r.from == k[0] && r.last+1 == k[1] && *r.c == *c {
				r.last = k[1]
				continue
			}
		}
		runs = append(runs, run{k[0], k[1], k[1], c})
	}
	for _, r := range runs {
		c := r.c
		shade := 0.25 + 0.75*float64(c.bytes)/float64(max(most, 1))
		d.printf(`<rect class="move-cell" data-from-block="%d" data-to-block="%d" data-to-last="%d" data-moves="%d" x="%s" y="%s" width="%s" height="%s" fill="#c2185b" fill-opacity="%s">`,
			r.from, r.to, r.last, c.moves, num(left+float64(r.to)*px), num(top+float64(r.from)*px), num(px*float64(r.last-r.to+1)), num(px), num(shade))
		if len(runs) <= svgMatrixTitles {
			to := strconv.Itoa(r.to)
			if r.last > r.to {
				to += "…" + strconv.Itoa(r.last)
			}
			d.printf("<title>box %d → box %s: %d moves, %d bytes each</title>", r.from, to, c.moves, c.bytes)
		}
		d.printf("</rect>\n")
	}
	d.printf("</g>\n")
	d.extraH = top + size + 8
	return math.Max(left+size+10, x0+textWidth(caption, 11)+8) - lay.w
}

// writeSVG answers an SVG drawing.
func writeSVG(w http.ResponseWriter, body []byte) {
	writeBody(w, http.StatusOK, svgMediaType+"; charset=utf-8", body)
}
