package api

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"github.com/shardplan/shardplan/internal/transfer"
)

// maxTransferSVGDevices bounds the fabrics drawn (every device is a cell).
const maxTransferSVGDevices = 4096

// transferSVG draws a planned transfer: the fabric's nodes with their devices coloured
// by placement (the source marked on top, each replica its colour), and one arrow per
// pair of nodes that network moves join, as wide as its share of the bytes.
func transferSVG(p *transfer.Problem, res *transfer.Result) ([]byte, error) {
	if p.Devices > maxTransferSVGDevices {
		return nil, limitExceeded("fabric_devices", "is %d; transfer drawings are made for fabrics of up to %d devices (ask for JSON or text)", p.Devices, maxTransferSVGDevices)
	}
	g := p.Fabric.GPUsPerNode
	nodes := (p.Devices + g - 1) / g
	cols := min(8, nodes)
	const cell, gap = 14.0, 40.0
	nodeW := float64(min(g, p.Devices))*cell + 8
	nodeH := cell + 26
	replica := make([]int, p.Devices)
	for i := range replica {
		replica[i] = -1
	}
	for r, t := range p.Targets {
		for _, d := range t.Devices {
			replica[d] = r
		}
	}
	source := make([]bool, p.Devices)
	for _, d := range p.Source.Devices {
		source[d] = true
	}
	// Network bytes between nodes, NVLink bytes inside each node.
	type pair struct{ from, to int }
	flows := map[pair]float64{}
	nv := make([]float64, nodes)
	for _, c := range res.Classes {
		for _, m := range c.Moves {
			nf, nt := p.Fabric.Node(m.From), p.Fabric.Node(m.To)
			w := float64(m.Bytes) * float64(c.Count)
			if nf == nt {
				nv[nf] += w
			} else {
				flows[pair{nf, nt}] += w
			}
		}
	}
	var d svgDoc
	d.heading(fmt.Sprintf("%s: %s, %.1f us (bound %.1f us, %s); %d nodes of %d on %s", "transfer", res.Strategy, res.TimeUS, res.Bound.TimeUS, res.Bound.Binding, nodes, g, p.Fabric.Name))
	d.heading("devices: source marked on top, replicas coloured; arrows: network bytes between nodes")
	top := d.y + 10
	centre := func(n int) (float64, float64) {
		return 8 + float64(n%cols)*(nodeW+gap) + nodeW/2, top + float64(n/cols)*(nodeH+gap) + nodeH/2
	}
	// The flows bend inside the area of the nodes, so that no curve leaves the drawing
	// (a quadratic curve stays inside the hull of its end and control points).
	rows := (nodes + cols - 1) / cols
	areaX0, areaY0 := 4.0, top-6
	areaX1, areaY1 := 8+float64(cols)*(nodeW+gap)-gap+4, top+float64(rows)*(nodeH+gap)-gap+6
	var labels bytes.Buffer
	for n := range nodes {
		x, y := centre(n)
		x0, y0 := x-nodeW/2, y-nodeH/2
		d.printf(`<g class="node" data-node="%d"><rect x="%s" y="%s" width="%s" height="%s" fill="#fafafa" stroke="#888"/>`, n, num(x0), num(y0), num(nodeW), num(nodeH))
		fmt.Fprintf(&labels, `<text class="node-label" data-node="%d" x="%s" y="%s">node %d</text>`+"\n", n, num(x0+3), num(y0+11), n)
		for k := range g {
			id := n*g + k
			if id >= p.Devices {
				break
			}
			fill, role := "#e0e0e0", "idle"
			if r := replica[id]; r >= 0 {
				fill, role = groupColor(r), fmt.Sprintf("replica %d", r)
			}
			if source[id] {
				role = "source " + role
			}
			dx, dy := x0+4+float64(k)*cell, y0+15
			d.printf(`<rect class="device" data-device="%d" data-role="%s" x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#555"><title>device %d: %s</title></rect>`,
				id, esc(role), num(dx), num(dy), num(cell-2), num(cell-2), fill, id, esc(role))
			if source[id] {
				d.printf(`<rect x="%s" y="%s" width="%s" height="3" fill="#1565c0"/>`, num(dx), num(dy), num(cell-2))
			}
		}
		if nv[n] > 0 {
			d.printf(`<title>nvlink %s</title>`, humanBytes(int64(nv[n])))
		}
		d.printf("</g>\n")
	}
	most := 0.0
	keys := make([]pair, 0, len(flows))
	for k, v := range flows {
		most = math.Max(most, v)
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].from != keys[j].from {
			return keys[i].from < keys[j].from
		}
		return keys[i].to < keys[j].to
	})
	for _, k := range keys {
		x1, y1 := centre(k.from)
		x2, y2 := centre(k.to)
		// Bend to the left of the direction, so both ways show.
		mx, my := (x1+x2)/2-(y2-y1)*0.15, (y1+y2)/2+(x2-x1)*0.15
		mx, my = math.Min(math.Max(mx, areaX0), areaX1), math.Min(math.Max(my, areaY0), areaY1)
		// From node edge to node edge, the head outside the receiving node.
		sx, sy := boxEdge(x1, y1, nodeW/2, nodeH/2, mx, my, 1)
		ex, ey := boxEdge(x2, y2, nodeW/2, nodeH/2, mx, my, 3)
		w := 0.8 + 4*flows[k]/most
		d.printf(`<path class="flow" data-from-node="%d" data-to-node="%d" data-bytes="%d" d="M %s %s Q %s %s %s %s" fill="none" stroke="#c2185b" stroke-opacity="0.45" stroke-width="%s" marker-end="url(#head)"><title>node %d → node %d: %s</title></path>`+"\n",
			k.from, k.to, int64(flows[k]), num(sx), num(sy), num(mx), num(my), num(ex), num(ey), num(w), k.from, k.to, humanBytes(int64(flows[k])))
	}
	// The node labels are drawn last, over the flows, each on a white halo.
	d.printf(`<g class="labels" stroke="#fff" stroke-width="3" paint-order="stroke" stroke-linejoin="round">` + "\n")
	d.b.Write(labels.Bytes())
	d.printf("</g>\n")
	d.y = areaY1 + 4
	d.w = math.Max(d.w, areaX1)
	return d.bytes("shardplan transfer"), nil
}

// boxEdge is where the segment from the centre (cx, cy) of a box of half sizes hw, hh
// towards (tx, ty) leaves the box, pushed out by pad.
func boxEdge(cx, cy, hw, hh, tx, ty, pad float64) (float64, float64) {
	dx, dy := tx-cx, ty-cy
	sx, sy := math.Inf(1), math.Inf(1)
	if dx != 0 {
		sx = (hw + pad) / math.Abs(dx)
	}
	if dy != 0 {
		sy = (hh + pad) / math.Abs(dy)
	}
	s := math.Min(sx, sy)
	if math.IsInf(s, 1) {
		return cx, cy
	}
	return cx + dx*s, cy + dy*s
}
