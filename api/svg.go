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

// maxSVGDevices bounds the meshes drawn: a picture of more devices is not readable.
const maxSVGDevices = 1024

const (
	svgCell     = 40.0
	svgTensorPx = 300.0
)

// meshDrawing places every device of a mesh as nested grids: the minor axis runs left to
// right, the next top to bottom, the next left to right around whole blocks, and so on;
// levels above the last two are labelled boxes. cells are in row-major position order.
type meshDrawing struct {
	w, h  float64
	cells [][2]float64
	boxes []svgBox
}

type svgBox struct {
	x, y, w, h float64
	label      string
}

func layoutMesh(m *sharding.Mesh) meshDrawing {
	n := len(m.Axes)
	var level func(k int) meshDrawing
	level = func(k int) meshDrawing {
		if k == n {
			return meshDrawing{w: svgCell, h: svgCell, cells: [][2]float64{{0, 0}}}
		}
		inner := level(k + 1)
		horizontal := (n-1-k)%2 == 0
		composite := k < n-2
		pad, top := 0.0, 0.0
		if composite {
			pad, top = 6, 14
		}
		bw, bh := inner.w+2*pad, inner.h+2*pad+top
		gap := 4.0
		if n-1-k >= 2 {
			gap = 10 + 4*float64(n-1-k)
		}
		size := m.Axes[k].Size
		var out meshDrawing
		for i := 0; i < size; i++ {
			ox, oy := float64(i)*(bw+gap), 0.0
			if !horizontal {
				ox, oy = 0, float64(i)*(bh+gap)
			}
			for _, c := range inner.cells {
				out.cells = append(out.cells, [2]float64{ox + pad + c[0], oy + pad + top + c[1]})
			}
			for _, b := range inner.boxes {
				b.x, b.y = ox+pad+b.x, oy+pad+top+b.y
				out.boxes = append(out.boxes, b)
			}
			if composite {
				out.boxes = append(out.boxes, svgBox{ox, oy, bw, bh, m.Axes[k].Name + "=" + strconv.Itoa(i)})
			}
		}
		if horizontal {
			out.w, out.h = float64(size)*bw+float64(size-1)*gap, bh
		} else {
			out.w, out.h = bw, float64(size)*bh+float64(size-1)*gap
		}
		return out
	}
	d := level(0)
	left, top := 4.0, 18.0
	if n >= 2 {
		left = 34
	}
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
	return d
}

// svgDoc builds one SVG document from panels laid out top to bottom.
type svgDoc struct {
	b    bytes.Buffer
	y, w float64
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

// mesh draws m at the current height; overlay adds to the panel (in its coordinates).
func (d *svgDoc) mesh(m *sharding.Mesh, lay meshDrawing, class string, attrs string, overlay func(*svgDoc)) {
	d.printf(`<g class="%s" data-devices="%d"%s transform="translate(0 %s)">`+"\n", class, m.NumDevices(), attrs, num(d.y))
	for _, b := range lay.boxes {
		d.printf(`<rect class="box" x="%s" y="%s" width="%s" height="%s" rx="4" fill="none" stroke="#b8c0cf" stroke-dasharray="3 2"/><text class="axis" x="%s" y="%s">%s</text>`+"\n",
			num(b.x), num(b.y), num(b.w), num(b.h), num(b.x+4), num(b.y+11), esc(b.label))
	}
	n := len(m.Axes)
	if n >= 1 {
		d.printf(`<text class="axis" x="%s" y="12">%s →</text>`+"\n", num(lay.cells[0][0]), esc(m.Axes[n-1].Name))
	}
	if n >= 2 {
		d.printf(`<text class="axis" x="2" y="%s">%s ↓</text>`+"\n", num(lay.cells[0][1]+14), esc(m.Axes[n-2].Name))
	}
	coords := make([]int, n)
	for p, c := range lay.cells {
		id := m.DeviceAt(p)
		coords = m.Coords(p, coords[:0])
		d.printf(`<g class="device" data-device="%d"><rect x="%s" y="%s" width="%s" height="%s" rx="3" fill="#fff" stroke="#8a93a6"/><text x="%s" y="%s" text-anchor="middle">%d</text><title>device %d at %s</title></g>`+"\n",
			id, num(c[0]), num(c[1]), num(svgCell), num(svgCell), num(c[0]+svgCell/2), num(c[1]+svgCell/2+4), id, id, esc(coordText(m, coords)))
	}
	if overlay != nil {
		overlay(d)
	}
	d.printf("</g>\n")
	d.y += lay.h
	d.w = math.Max(d.w, lay.w)
}

func coordText(m *sharding.Mesh, coords []int) string {
	parts := make([]string, len(coords))
	for k, c := range coords {
		parts[k] = m.Axes[k].Name + "=" + strconv.Itoa(c)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// tensor draws the tiles of a tensor of shape, one rectangle per device (replicas of a
// tile drawn over one another), coloured by device. It shows dims rows x cols (rank 1:
// one row); a tensor of rank 3 or more is drawn over its last two dims, with the tiles
// that hold index 0 of its other dims.
func (d *svgDoc) tensor(shape []int64, tiles []sharding.DeviceTile, role string) {
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
	scale := svgTensorPx / float64(max(rows, cols))
	w, h := math.Max(24, float64(cols)*scale), math.Max(24, float64(rows)*scale)
	d.printf(`<g class="tensor" data-role="%s" data-shape="%s" transform="translate(4 %s)">`+"\n", role, esc(jsonText(shape)), num(d.y))
	d.printf(`<rect x="0" y="0" width="%s" height="%s" fill="#eee"/>`+"\n", num(w), num(h))
	// Replicas of a tile are drawn over one another, the lowest id last (on top, as the
	// explorer colours a tile by its lowest owner), and labelled once.
	order := make([]int, len(tiles))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return tiles[order[a]].Device > tiles[order[b]].Device })
	type label struct {
		x, y, w, h float64
		owner, n   int
	}
	labels := map[string]*label{}
	var labelOrder []string
	for _, i := range order {
		t := tiles[i]
		shown := true
		for dim, r := range t.Ranges {
			if dim != rowsDim && dim != colsDim && r[0] != 0 {
				shown = false
			}
		}
		if !shown {
			continue
		}
		rr := [2]int64{0, 1}
		if rowsDim >= 0 {
			rr = t.Ranges[rowsDim]
		}
		cr := t.Ranges[colsDim]
		x, y := float64(cr[0])*w/float64(cols), float64(rr[0])*h/float64(rows)
		tw, th := float64(cr[1]-cr[0])*w/float64(cols), float64(rr[1]-rr[0])*h/float64(rows)
		d.printf(`<rect class="tile" data-device="%d" data-ranges="%s" x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#fff"><title>device %d: %s</title></rect>`+"\n",
			t.Device, esc(jsonText(t.Ranges)), num(x), num(y), num(tw), num(th), deviceColor(t.Device), t.Device, esc(rangesText(t.Ranges)))
		key := jsonText(t.Ranges)
		if l, ok := labels[key]; ok {
			l.owner, l.n = t.Device, l.n+1
		} else {
			labels[key] = &label{x, y, tw, th, t.Device, 1}
			labelOrder = append(labelOrder, key)
		}
	}
	for _, k := range labelOrder {
		l := labels[k]
		if l.w < 26 || l.h < 14 {
			continue
		}
		text := strconv.Itoa(l.owner)
		if l.n > 1 {
			text += fmt.Sprintf(" ×%d", l.n)
		}
		d.printf(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(l.x+l.w/2), num(l.y+l.h/2+4), text)
	}
	d.printf("</g>\n")
	d.y += h + 6
	d.w = math.Max(d.w, w+8)
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
	out.WriteString(`<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#c2185b"/></marker></defs>` + "\n")
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
	d.heading(fmt.Sprintf("tensor %s sharded %s", jsonText(shape), resp.Sharding.Text))
	d.tensor(shape, resp.Devices, "tiles")
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
	transfers := st.Transfers
	for _, r := range st.TransferRuns {
		transfers = append(transfers, r.Expand()...)
	}
	if len(transfers) > 0 {
		for _, t := range transfers {
			add(t.From, t.To, t.Bytes)
		}
		return out
	}
	pairs := st.Pairs
	for _, r := range st.PairRuns {
		pairs = append(pairs, r.Expand()...)
	}
	for _, p := range pairs {
		add(p[0], p[1], st.BytesPerDevice)
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
	tilesOf := func(sh ShardingJSON) ([]sharding.DeviceTile, error) {
		s, err := sharding.ParseText(sh.Text, m, resp.Shape, "sharding")
		if err != nil {
			return nil, err
		}
		return sharding.NewLayout(m, resp.Shape, s).Tiles(nil), nil
	}
	lay := layoutMesh(m)
	var d svgDoc
	d.heading(fmt.Sprintf("mesh %s, %d devices; %d steps, %.2f µs (lower bound %.2f µs)", m.String(), m.NumDevices(), len(resp.Steps), resp.Summary.TimeUS, resp.Summary.TimeLowerBoundUS))
	for _, role := range []struct {
		name string
		sh   ShardingJSON
	}{{"source", resp.Source}, {"target", resp.Target}} {
		tiles, err := tilesOf(role.sh)
		if err != nil {
			return nil, err
		}
		d.heading(role.name + " " + role.sh.Text)
		d.tensor(resp.Shape, tiles, role.name)
	}
	for i, st := range resp.Steps {
		moves, groups := stepMoves(st), stepGroups(m, st)
		d.heading(fmt.Sprintf("step %d: %s over %s, %d bytes per device, %.2f µs", i+1, st.Op, strings.Join(st.MeshAxes, ","), st.BytesPerDevice, st.TimeUS))
		d.mesh(m, lay, "step", fmt.Sprintf(` data-step="%d" data-op="%s"`, i, esc(st.Op)), func(d *svgDoc) {
			for k, g := range groups {
				for _, id := range g {
					c := lay.cells[m.PositionOf(id)]
					d.printf(`<rect class="group-outline" data-group="%d" data-device="%d" x="%s" y="%s" width="%s" height="%s" rx="5" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="5 3"/>`+"\n",
						k, id, num(c[0]-2), num(c[1]-2), num(svgCell+4), num(svgCell+4), groupColor(k))
				}
			}
			for _, mv := range moves {
				a, b := lay.cells[m.PositionOf(mv.from)], lay.cells[m.PositionOf(mv.to)]
				x1, y1, x2, y2 := a[0]+svgCell/2, a[1]+svgCell/2, b[0]+svgCell/2, b[1]+svgCell/2
				dx, dy := x2-x1, y2-y1
				l := math.Max(1, math.Hypot(dx, dy))
				sx, sy, ex, ey := x1+dx/l*12, y1+dy/l*12, x2-dx/l*14, y2-dy/l*14
				mx, my := (sx+ex)/2-dy/l*10, (sy+ey)/2+dx/l*10
				d.printf(`<path class="arrow" data-from="%d" data-to="%d" data-bytes="%d" d="M %s %s Q %s %s %s %s" fill="none" stroke="#c2185b" stroke-width="1.6" marker-end="url(#head)"><title>%d → %d: %d bytes</title></path>`+"\n",
					mv.from, mv.to, mv.bytes, num(sx), num(sy), num(mx), num(my), num(ex), num(ey), mv.from, mv.to, mv.bytes)
			}
		})
	}
	return d.bytes("shardplan plan " + resp.PlanID), nil
}

// writeSVG answers an SVG drawing.
func writeSVG(w http.ResponseWriter, body []byte) {
	writeBody(w, http.StatusOK, svgMediaType+"; charset=utf-8", body)
}

// bufferWriter is an http.ResponseWriter that keeps the answer.
type bufferWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferWriter) Header() http.Header         { return b.header }
func (b *bufferWriter) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferWriter) WriteHeader(code int)        { b.code = code }
