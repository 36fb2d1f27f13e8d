package hlo

import (
	"fmt"
	"slices"
	"sort"

	"github.com/shardplan/shardplan/internal/sharding"
)

// GroupAxes finds the mesh axes (full axes or Shardy sub-axes) a collective's groups run
// over: every group must be the devices that differ only in their coordinates on those
// axes, listed in mixed-radix order over them (the first axis major). It returns them
// major to minor. Device ids are the mesh's (DeviceIDs, else row-major positions).
// An empty groups list means one group of every device.
func GroupAxes(m *sharding.Mesh, groups [][]int) ([]sharding.AxisRef, error) {
	n := m.NumDevices()
	if len(groups) == 0 {
		all := make([]int, n)
		for i := range all {
			all[i] = m.DeviceAt(i)
		}
		groups = [][]int{all}
	}
	size := len(groups[0])
	if size == 0 {
		return nil, fmt.Errorf("group 0 is empty; every group lists its devices")
	}
	seen := make([]bool, n)
	for gi, g := range groups {
		if len(g) != size {
			return nil, fmt.Errorf("group %d has %d devices, group 0 has %d; the groups must be of one size", gi, len(g), size)
		}
		for _, id := range g {
			if id >= n {
				return nil, fmt.Errorf("device %d is not on the %d-device mesh %s", id, n, m)
			}
			if seen[id] {
				return nil, fmt.Errorf("device %d is in two groups", id)
			}
			seen[id] = true
		}
	}
	if size == 1 {
		return []sharding.AxisRef{}, nil
	}
	axes, err := groupAxes(m, groups[0])
	if err != nil {
		return nil, err
	}
	for gi, g := range groups[1:] {
		if err := checkGroup(m, g, axes); err != nil {
			return nil, fmt.Errorf("group %d: %v", gi+1, err)
		}
	}
	return axes, nil
}

// groupAxes reads the axes of one group.
func groupAxes(m *sharding.Mesh, g []int) ([]sharding.AxisRef, error) {
	coords := make([][]int, len(g))
	for i, id := range g {
		coords[i] = m.Coords(m.PositionOf(id), nil)
	}
	type found struct {
		ref   sharding.AxisRef
		first int // first member index whose coordinate on ref differs from member 0's
	}
	var fs []found
	for a, ax := range m.Axes {
		vals := map[int]bool{}
		first := -1
		for i, c := range coords {
			vals[c[a]] = true
			if first < 0 && c[a] != coords[0][a] {
				first = i
			}
		}
		if len(vals) == 1 {
			continue
		}
		ref, ok := subAxisOf(ax, vals)
		if !ok {
			return nil, fmt.Errorf("the group %v takes coordinates %v on axis %q, which no (sub-)axis of it spans", clipIDs(g), sortedKeys(vals), ax.Name)
		}
		fs = append(fs, found{ref, first})
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].first > fs[j].first })
	axes := make([]sharding.AxisRef, len(fs))
	for i, f := range fs {
		axes[i] = f.ref
	}
	if err := checkGroup(m, g, axes); err != nil {
		return nil, err
	}
	return axes, nil
}

// subAxisOf finds the sub-axis of ax whose coordinates are vals (a base plus 0..k-1
// times a stride), or reports false.
func subAxisOf(ax sharding.Axis, vals map[int]bool) (sharding.AxisRef, bool) {
	vs := sortedKeys(vals)
	k := len(vs)
	if k < 2 {
		return sharding.AxisRef{}, false
	}
	stride := vs[1] - vs[0]
	for i := 1; i < k; i++ {
		if vs[i]-vs[i-1] != stride {
			return sharding.AxisRef{}, false
		}
	}
	if ax.Size%(stride*k) != 0 {
		return sharding.AxisRef{}, false
	}
	pre := ax.Size / (stride * k)
	ref := sharding.AxisRef{Name: ax.Name, Pre: pre, Size: k, Of: ax.Size}
	// The group's coordinates must be one block of the sub-axis: equal above and below it.
	base := vs[0]
	for _, v := range vs {
		if (v/stride)/k != (base/stride)/k || v%stride != base%stride {
			return sharding.AxisRef{}, false
		}
	}
	return ref, true
}

// checkGroup verifies that member i of g sits at mixed-radix index i over axes (the
// first major) and that the members agree on every other coordinate.
func checkGroup(m *sharding.Mesh, g []int, axes []sharding.AxisRef) error {
	want := 1
	for _, a := range axes {
		want *= a.Size
	}
	if want != len(g) {
		return fmt.Errorf("the group %v has %d devices, its axes %s span %d", clipIDs(g), len(g), refsText(axes), want)
	}
	c0 := m.Coords(m.PositionOf(g[0]), nil)
	c := make([]int, len(m.Axes))
	for i, id := range g {
		m.Coords(m.PositionOf(id), c)
		// Expected mixed-radix digits of i over axes.
		rest := i
		digits := make([]int, len(axes))
		for k := len(axes) - 1; k >= 0; k-- {
			digits[k] = rest % axes[k].Size
			rest /= axes[k].Size
		}
		for ai, ax := range m.Axes {
			got := c[ai]
			exp := c0[ai]
			for k, r := range axes {
				if r.Name != ax.Name {
					continue
				}
				minor := r.Minor()
				exp = exp - r.Coord(c0[ai])*minor + digits[k]*minor
			}
			if got != exp {
				return fmt.Errorf("the group %v does not list its devices in order over %s (device %d is member %d)", clipIDs(g), refsText(axes), id, i)
			}
		}
	}
	return nil
}

func sortedKeys(s map[int]bool) []int {
	out := make([]int, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func refsText(axes []sharding.AxisRef) string {
	if len(axes) == 0 {
		return "no axis"
	}
	s := ""
	for i, a := range axes {
		if i > 0 {
			s += ","
		}
		s += a.String()
	}
	return "(" + s + ")"
}

func clipIDs(g []int) string {
	if len(g) > 8 {
		return fmt.Sprint(g[:8])[:len(fmt.Sprint(g[:8]))-1] + " ...]"
	}
	return fmt.Sprint(g)
}

// PairAxes gives the mesh axes on which some pair's source and target coordinates
// differ (mesh order), and the longest distance any pair travels in ring steps summed
// over those axes (the short way round).
func PairAxes(m *sharding.Mesh, pairs [][2]int) ([]sharding.AxisRef, int, error) {
	n := m.NumDevices()
	differ := make([]bool, len(m.Axes))
	hops := 0
	a, b := make([]int, len(m.Axes)), make([]int, len(m.Axes))
	for i, pr := range pairs {
		if pr[0] >= n || pr[1] >= n {
			return nil, 0, fmt.Errorf("pair %d names device %d, not on the %d-device mesh %s", i, max(pr[0], pr[1]), n, m)
		}
		m.Coords(m.PositionOf(pr[0]), a)
		m.Coords(m.PositionOf(pr[1]), b)
		h := 0
		for k, ax := range m.Axes {
			if a[k] != b[k] {
				differ[k] = true
				d := abs(a[k] - b[k])
				h += min(d, ax.Size-d)
			}
		}
		hops = max(hops, h)
	}
	var axes []sharding.AxisRef
	for k, ax := range m.Axes {
		if differ[k] {
			axes = append(axes, sharding.FullAxis(ax))
		}
	}
	return axes, hops, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
