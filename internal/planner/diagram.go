package planner

import (
	"fmt"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// maxLabelElems bounds the tile size drawn element by element; bigger tiles show their
// index ranges instead.
const maxLabelElems = 16

// Diagram renders the mesh-contents pictures of seed 000: the source layout, then the
// layout after every step, each titled with the step. The minor-most mesh axis runs
// across, the other axes stack down (major first). Small rank-1 and rank-2 tensors
// (dims <= 9) show element labels like "11 12" (1-based row and column); others show
// each device's global index ranges.
func Diagram(p *Plan) string {
	r := p.Request
	var b strings.Builder
	fmt.Fprintf(&b, "Reshard %s tensor from %s to %s on a %s mesh.\n", shapeString(r.Shape), r.Source.Body(), r.Target.Body(), r.Mesh.String())
	b.WriteString("\nsharding = " + r.Source.Body() + "\n")
	b.WriteString(MeshPicture(r.Mesh, r.Shape, r.Source))
	for i, st := range p.Steps {
		fmt.Fprintf(&b, "\nstep %d: %s%s -> sharding = %s (%d bytes per device)\n", i+1, st.Op, axesNote(st), st.After.Body(), st.BytesPerDevice)
		b.WriteString(MeshPicture(r.Mesh, r.Shape, st.After))
	}
	return b.String()
}

func axesNote(st Step) string {
	if len(st.MeshAxes) == 0 {
		return ""
	}
	names := make([]string, len(st.MeshAxes))
	for i, a := range st.MeshAxes {
		names[i] = a.String()
	}
	return " over " + strings.Join(names, ", ")
}

func shapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "x")
}

// MeshPicture draws the contents of every device of m for a tensor of shape laid out by
// s.
func MeshPicture(m *sharding.Mesh, shape []int64, s sharding.Sharding) string {
	l := sharding.NewLayout(m, shape, s)
	labels := len(shape) >= 1 && len(shape) <= 2 && l.TileElements() <= maxLabelElems
	for _, d := range shape {
		labels = labels && d <= 9
	}
	naxes := len(m.Axes)
	cols := 1
	if naxes > 0 {
		cols = m.Axes[naxes-1].Size
	}
	n := m.NumDevices()
	rows := n / cols
	// Cell contents per row-major position.
	cells := make([][]string, n)
	width, height := 0, 0
	for pos := range n {
		t := l.TileOf(m.DeviceAt(pos))
		cells[pos] = cellLines(t, labels)
		height = max(height, len(cells[pos]))
		for _, line := range cells[pos] {
			width = max(width, len(line))
		}
	}
	var b strings.Builder
	if naxes > 0 {
		fmt.Fprintf(&b, "mesh axis %s\n%s>\n", m.Axes[naxes-1].Name, strings.Repeat("-", max(3, cols*(width+3)-1)))
	}
	border := "+" + strings.Repeat(strings.Repeat("-", width+2)+"+", cols)
	down := ""
	if naxes > 1 {
		names := make([]string, naxes-1)
		for i := range naxes - 1 {
			names[naxes-2-i] = "mesh axis " + m.Axes[i].Name
		}
		down = " " + strings.Join(names, " | ") + " ↓"
	}
	b.WriteString(border + down + "\n")
	for row := range rows {
		for line := range height {
			b.WriteByte('|')
			for c := range cols {
				txt := ""
				if cl := cells[row*cols+c]; line < len(cl) {
					txt = cl[line]
				}
				fmt.Fprintf(&b, " %-*s |", width, txt)
			}
			b.WriteByte('\n')
		}
		b.WriteString(border + "\n")
	}
	return b.String()
}

// cellLines is what one device holds: element labels or index ranges.
func cellLines(t sharding.DeviceTile, labels bool) []string {
	if !labels {
		parts := make([]string, len(t.Ranges))
		for d, r := range t.Ranges {
			parts[d] = fmt.Sprintf("%d:%d", r[0], r[1])
		}
		return []string{"[" + strings.Join(parts, ", ") + "]"}
	}
	if len(t.Ranges) == 1 {
		var parts []string
		for i := t.Ranges[0][0]; i < t.Ranges[0][1]; i++ {
			parts = append(parts, fmt.Sprint(i+1))
		}
		return []string{strings.Join(parts, " ")}
	}
	var lines []string
	for i := t.Ranges[0][0]; i < t.Ranges[0][1]; i++ {
		var parts []string
		for j := t.Ranges[1][0]; j < t.Ranges[1][1]; j++ {
			parts = append(parts, fmt.Sprintf("%d%d", i+1, j+1))
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	if len(lines) == 0 {
		lines = []string{"-"}
	}
	return lines
}
