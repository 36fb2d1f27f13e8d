package hlo

import (
	"fmt"
	"strconv"
	"strings"
)

// NamedMesh is the named form of replica groups newer XLA prints:
// mesh['x'=2,'y'=4] {'y'}, mesh['x'=2,'y'=4], device_ids=([2,4]<=[4,2]T(1,0)) {'x','y:(1)2'}.
// The groups are the devices that differ only in their coordinates on the listed axes
// (or sub-axes), members in mixed-radix order over them, the first major.
type NamedMesh struct {
	Names []string
	Sizes []int
	// DeviceIDs are the mesh's device ids in row-major order (nil: iota).
	DeviceIDs []int
	// Axes are the group's axes: index into Names, and the sub-axis (Pre, Size; Size 0
	// for the full axis).
	Axes []NamedAxis
}

// NamedAxis is one axis (or sub-axis "name:(pre)size") of a named mesh's group.
type NamedAxis struct {
	Index     int
	Pre, Size int
}

func (n NamedAxis) size(m *NamedMesh) int {
	if n.Size > 0 {
		return n.Size
	}
	return m.Sizes[n.Index]
}

// ParseNamedMesh reads the named form of replica groups.
func ParseNamedMesh(text string, maxDevices int) (*NamedMesh, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), "mesh[")
	if !ok {
		return nil, fmt.Errorf("expected mesh['axis'=size,...] {'axis',...}, got %q", clip(text))
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return nil, fmt.Errorf("unclosed mesh[ in %q", clip(text))
	}
	m := &NamedMesh{}
	n := 1
	for part := range strings.SplitSeq(rest[:end], ",") {
		name, size, ok := strings.Cut(strings.TrimSpace(part), "=")
		v, err := strconv.Atoi(strings.TrimSpace(size))
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("mesh axis %q is not 'name'=size", clip(part))
		}
		m.Names = append(m.Names, unquoteAxis(name))
		m.Sizes = append(m.Sizes, v)
		if n *= v; n > maxDevices {
			return nil, fmt.Errorf("the mesh has more than %d devices", maxDevices)
		}
	}
	rest = strings.TrimSpace(rest[end+1:])
	if r, ok := strings.CutPrefix(rest, ","); ok {
		r = strings.TrimSpace(r)
		r, ok = strings.CutPrefix(r, "device_ids=(")
		close := strings.LastIndexByte(r, ')')
		if !ok || close < 0 {
			return nil, fmt.Errorf("expected device_ids=(...) after the mesh, got %q", clip(rest))
		}
		ids, err := meshDeviceIDs(strings.TrimSpace(r[:close]), n)
		if err != nil {
			return nil, fmt.Errorf("device_ids: %v", err)
		}
		m.DeviceIDs = ids
		rest = strings.TrimSpace(r[close+1:])
	}
	if !strings.HasPrefix(rest, "{") || !strings.HasSuffix(rest, "}") {
		return nil, fmt.Errorf("expected {'axis',...} after the mesh, got %q", clip(rest))
	}
	inner := strings.TrimSpace(rest[1 : len(rest)-1])
	if inner == "" {
		return m, nil
	}
	for part := range strings.SplitSeq(inner, ",") {
		part = unquoteAxis(part) // 'y:(1)2' or 'y':(1)2
		name, sub, hasSub := strings.Cut(part, ":")
		name = unquoteAxis(name)
		ax := NamedAxis{Index: -1}
		for i, nm := range m.Names {
			if nm == name {
				ax.Index = i
			}
		}
		if ax.Index < 0 {
			return nil, fmt.Errorf("axis %q is not one of the mesh's %v", name, m.Names)
		}
		if hasSub {
			pre, size, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(sub), "("), ")")
			p, err1 := strconv.Atoi(pre)
			s, err2 := strconv.Atoi(size)
			full := m.Sizes[ax.Index]
			if !ok || err1 != nil || err2 != nil || p < 1 || s < 2 || full%(p*s) != 0 {
				return nil, fmt.Errorf("sub-axis %q is not name:(pre)size dividing the axis's %d", clip(part), full)
			}
			ax.Pre, ax.Size = p, s
		}
		m.Axes = append(m.Axes, ax)
	}
	return m, nil
}

func unquoteAxis(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// meshDeviceIDs reads a device_ids=(...) list: an iota [dims]<=[reshape]T(perm) or
// the ids themselves.
func meshDeviceIDs(text string, n int) ([]int, error) {
	if strings.HasPrefix(text, "[") && strings.Contains(text, "<=") {
		_, rest, _ := strings.Cut(text, "<=")
		dimsText, permText, hasPerm := strings.Cut(rest, "T")
		dims, err := bracketInts(dimsText, n)
		if err != nil {
			return nil, err
		}
		perm := make([]int, len(dims))
		for i := range perm {
			perm[i] = i
		}
		if hasPerm {
			perm, err = intList(strings.Trim(strings.TrimSpace(permText), "()"), len(dims))
			if err != nil || len(perm) != len(dims) {
				return nil, fmt.Errorf("T(...) is not a permutation of the %d dims", len(dims))
			}
		}
		total := 1
		for _, d := range dims {
			total *= d
		}
		if total != n {
			return nil, fmt.Errorf("the iota has %d devices, the mesh %d", total, n)
		}
		return Iota(dims, perm), nil
	}
	ids, err := intList(strings.NewReplacer("{", "", "}", "", "[", "", "]", "").Replace(text), n)
	if err != nil {
		return nil, err
	}
	if len(ids) != n {
		return nil, fmt.Errorf("%d ids for %d devices", len(ids), n)
	}
	seen := make([]bool, n)
	for _, id := range ids {
		if seen[id] {
			return nil, fmt.Errorf("device %d is listed twice", id)
		}
		seen[id] = true
	}
	return ids, nil
}

// NumDevices is the mesh's device count.
func (m *NamedMesh) NumDevices() int {
	n := 1
	for _, s := range m.Sizes {
		n *= s
	}
	return n
}

// Groups lists the replica groups: for every coordinate of the axes not grouped (row
// major), the devices over the group's axes in mixed-radix order.
func (m *NamedMesh) Groups() [][]int {
	n := m.NumDevices()
	gsize := 1
	for _, a := range m.Axes {
		gsize *= a.size(m)
	}
	// digit d of a device on its group: its coordinate on each grouped (sub-)axis.
	coords := make([]int, len(m.Sizes))
	member := func(pos int) (key, idx int) {
		rest := pos
		for i := len(m.Sizes) - 1; i >= 0; i-- {
			coords[i] = rest % m.Sizes[i]
			rest /= m.Sizes[i]
		}
		// idx: mixed radix over the group's axes; key: the position with those digits zeroed.
		zeroed := append([]int(nil), coords...)
		for _, a := range m.Axes {
			// A sub-axis name:(pre)size splits the axis, major to minor, into pre,
			// size and the rest: its digit is the middle one.
			s := a.size(m)
			minor := 1
			if a.Size > 0 {
				minor = m.Sizes[a.Index] / (a.Pre * a.Size)
			}
			d := (coords[a.Index] / minor) % s
			idx = idx*s + d
			zeroed[a.Index] -= d * minor
		}
		for i, c := range zeroed {
			key = key*m.Sizes[i] + c
		}
		return key, idx
	}
	groupOf := map[int]int{}
	var groups [][]int
	for pos := 0; pos < n; pos++ {
		key, idx := member(pos)
		g, ok := groupOf[key]
		if !ok {
			g = len(groups)
			groupOf[key] = g
			groups = append(groups, make([]int, gsize))
		}
		id := pos
		if m.DeviceIDs != nil {
			id = m.DeviceIDs[pos]
		}
		groups[g][idx] = id
	}
	return groups
}
