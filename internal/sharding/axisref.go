package sharding

import (
	"sort"
	"strconv"
	"strings"
)

// AxisRef names a full mesh axis or a Shardy sub-axis "x:(pre)size": axis x of size Of,
// reshaped into [pre, size, Of/(pre*size)], keeping the middle. A full axis has Pre 1 and
// Size Of. AxisRef values are comparable with ==.
type AxisRef struct {
	Name string
	Pre  int
	Size int
	Of   int // size of the whole axis
}

// FullAxis returns the reference to the whole axis a.
func FullAxis(a Axis) AxisRef { return AxisRef{Name: a.Name, Pre: 1, Size: a.Size, Of: a.Size} }

// IsFull reports whether r covers its whole axis.
func (r AxisRef) IsFull() bool { return r.Pre == 1 && r.Size == r.Of }

// Next is Pre*Size: the pre-size of the sub-axis right after r.
func (r AxisRef) Next() int { return r.Pre * r.Size }

// Minor is the product of the axis pieces minor to r: Of/(Pre*Size).
func (r AxisRef) Minor() int { return r.Of / (r.Pre * r.Size) }

// Coord is the device's coordinate along r given its coordinate c on the whole axis.
func (r AxisRef) Coord(c int) int { return (c / r.Minor()) % r.Size }

// String prints r in Shardy's form without quotes: "x" or "x:(2)4".
func (r AxisRef) String() string {
	if r.IsFull() {
		return r.Name
	}
	return r.Name + ":(" + strconv.Itoa(r.Pre) + ")" + strconv.Itoa(r.Size)
}

// Contains reports whether r covers all of o.
func (r AxisRef) Contains(o AxisRef) bool {
	return r.Name == o.Name && r.Pre <= o.Pre && r.Next() >= o.Next()
}

// Overlaps reports whether r and o share part of an axis.
func (r AxisRef) Overlaps(o AxisRef) bool {
	return r.Name == o.Name && r.Pre < o.Next() && o.Pre < r.Next()
}

// CanCoexist reports whether r and o fit one factorisation of their axis (always true
// for different axes).
func (r AxisRef) CanCoexist(o AxisRef) bool {
	if r.Name != o.Name {
		return true
	}
	lo, hi := min(r.Pre, o.Pre), max(r.Pre, o.Pre)
	nlo, nhi := min(r.Next(), o.Next()), max(r.Next(), o.Next())
	if nlo > hi {
		return nlo%hi == 0 && hi%lo == 0 && nhi%nlo == 0
	}
	return hi%nlo == 0
}

// Sub returns the sub-axis (pre)size of r's axis; it becomes the full axis when it
// covers it.
func (r AxisRef) Sub(pre, size int) AxisRef {
	return AxisRef{Name: r.Name, Pre: pre, Size: size, Of: r.Of}
}

// ParseAxisRef parses "x" or "x:(m)k" against mesh m. field names the value in errors.
func ParseAxisRef(s string, m *Mesh, field string) (AxisRef, error) {
	name, rest, isSub := strings.Cut(s, ":")
	i := m.AxisIndex(name)
	if i < 0 {
		return AxisRef{}, Fieldf(field, "unknown mesh axis %q (mesh axes: %s)", name, m.axisNames())
	}
	a := m.Axes[i]
	if !isSub {
		return FullAxis(a), nil
	}
	var pre, size int
	ok := strings.HasPrefix(rest, "(")
	if ok {
		p, k, found := strings.Cut(rest[1:], ")")
		var e1, e2 error
		pre, e1 = strconv.Atoi(p)
		size, e2 = strconv.Atoi(k)
		ok = found && e1 == nil && e2 == nil
	}
	if !ok {
		return AxisRef{}, Fieldf(field, "sub-axis %q is not of the form \"%s:(m)k\" (m the product of the pieces major to it, k its size)", s, name)
	}
	// Bound m and k by n before multiplying: m*k must not overflow.
	if size <= 1 || pre < 1 || pre > a.Size || size > a.Size || a.Size%(pre*size) != 0 {
		return AxisRef{}, Fieldf(field, "sub-axis %q is invalid for axis %q of size %d: need k > 1, m >= 1 and m*k dividing %d", s, name, a.Size, a.Size)
	}
	return AxisRef{Name: name, Pre: pre, Size: size, Of: a.Size}, nil
}

func (m *Mesh) axisNames() string {
	names := make([]string, len(m.Axes))
	for i, a := range m.Axes {
		names[i] = a.Name
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// SortAxisRefs sorts refs into canonical order: mesh axis order, then increasing
// pre-size.
func SortAxisRefs(refs []AxisRef, m *Mesh) {
	sort.SliceStable(refs, func(i, j int) bool {
		ai, aj := m.AxisIndex(refs[i].Name), m.AxisIndex(refs[j].Name)
		if ai != aj {
			return ai < aj
		}
		return refs[i].Pre < refs[j].Pre
	})
}

// MergeAdjacent merges consecutive sub-axes of the same axis (r.Next() == next.Pre) in
// place and returns the shortened slice.
func MergeAdjacent(refs []AxisRef) []AxisRef {
	out := refs[:0]
	for _, r := range refs {
		if n := len(out); n > 0 && out[n-1].Name == r.Name && out[n-1].Next() == r.Pre {
			out[n-1].Size *= r.Size
			continue
		}
		out = append(out, r)
	}
	return out
}

// Product is the product of the sizes of refs.
func Product(refs []AxisRef) int {
	p := 1
	for _, r := range refs {
		p *= r.Size
	}
	return p
}
