package sharding

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// NoPriority marks a dim sharding without a priority.
const NoPriority = -1

// DimSharding is the sharding of one tensor dim: the axes that shard it, major to minor;
// Open when propagation may append axes; Priority (Shardy's p<N>, 0 highest) or
// NoPriority.
type DimSharding struct {
	Axes     []AxisRef
	Open     bool
	Priority int
}

// Sharding is a tensor's sharding on a mesh. Replicated lists explicitly replicated
// axes; Unreduced the axes over which the tensor holds partial sums. Axes in neither and
// in no dim are implicitly replicated.
type Sharding struct {
	Dims       []DimSharding
	Replicated []AxisRef
	Unreduced  []AxisRef
}

// Replicated returns the fully replicated, closed sharding of a rank-r tensor.
func Replicated(rank int) Sharding {
	s := Sharding{Dims: make([]DimSharding, rank)}
	for i := range s.Dims {
		s.Dims[i].Priority = NoPriority
	}
	return s
}

// Layout is s as a layout alone: every dim closed and without a priority, no replicated
// list (the form Shardy's export gives back). It shares no memory with s.
func (s Sharding) Layout() Sharding {
	out := Sharding{Dims: make([]DimSharding, len(s.Dims)), Unreduced: slices.Clone(s.Unreduced)}
	for i, d := range s.Dims {
		out.Dims[i] = DimSharding{Axes: slices.Clone(d.Axes), Priority: NoPriority}
	}
	return out
}

// Clone returns a deep copy of s.
func (s Sharding) Clone() Sharding {
	c := Sharding{Dims: make([]DimSharding, len(s.Dims))}
	for i, d := range s.Dims {
		c.Dims[i] = DimSharding{Axes: append([]AxisRef(nil), d.Axes...), Open: d.Open, Priority: d.Priority}
	}
	c.Replicated = append([]AxisRef(nil), s.Replicated...)
	c.Unreduced = append([]AxisRef(nil), s.Unreduced...)
	return c
}

// Rank is the number of dims.
func (s Sharding) Rank() int { return len(s.Dims) }

// ShardCounts returns, per dim, the product of the sizes of its axes.
func (s Sharding) ShardCounts() []int {
	n := make([]int, len(s.Dims))
	for i, d := range s.Dims {
		n[i] = Product(d.Axes)
	}
	return n
}

// IsFullyReplicated reports whether no dim is sharded and nothing is unreduced.
func (s Sharding) IsFullyReplicated() bool {
	for _, d := range s.Dims {
		if len(d.Axes) > 0 {
			return false
		}
	}
	return len(s.Unreduced) == 0
}

// Equal reports whether a and b shard the same way (axes per dim, replicated and
// unreduced sets, open flags and priorities).
func (s Sharding) Equal(o Sharding) bool {
	if len(s.Dims) != len(o.Dims) || !slices.Equal(s.Replicated, o.Replicated) || !slices.Equal(s.Unreduced, o.Unreduced) {
		return false
	}
	for i := range s.Dims {
		a, b := s.Dims[i], o.Dims[i]
		if a.Open != b.Open || a.Priority != b.Priority || !slices.Equal(a.Axes, b.Axes) {
			return false
		}
	}
	return true
}

// SameLayout reports whether a and b place data the same way: the same axes per dim and
// the same unreduced set (open flags, priorities and explicit replication ignored).
func (s Sharding) SameLayout(o Sharding) bool {
	if len(s.Dims) != len(o.Dims) || !slices.Equal(s.Unreduced, o.Unreduced) {
		return false
	}
	for i := range s.Dims {
		if !slices.Equal(s.Dims[i].Axes, o.Dims[i].Axes) {
			return false
		}
	}
	return true
}

// Canonicalize merges adjacent sub-axes in every list and sorts Replicated and Unreduced
// into mesh order, in place.
func (s *Sharding) Canonicalize(m *Mesh) {
	for i := range s.Dims {
		s.Dims[i].Axes = MergeAdjacent(s.Dims[i].Axes)
	}
	SortAxisRefs(s.Replicated, m)
	s.Replicated = MergeAdjacent(s.Replicated)
	SortAxisRefs(s.Unreduced, m)
	s.Unreduced = MergeAdjacent(s.Unreduced)
}

// Text prints s in Shardy's textual form bound to mesh name:
// sharding<@mesh, [{"x"}, {"z", "y", ?}p1], replicated={"w"}>.
func (s Sharding) Text(meshName string) string {
	var b strings.Builder
	b.WriteString("sharding<@")
	b.WriteString(meshName)
	b.WriteString(", ")
	b.WriteString(s.Body())
	b.WriteByte('>')
	return b.String()
}

// Body prints s in Shardy's form without the sharding<@mesh, ...> wrapper.
func (s Sharding) Body() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s.Dims {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('{')
		for j, r := range d.Axes {
			if j > 0 {
				b.WriteString(", ")
			}
			writeRef(&b, r)
		}
		if d.Open {
			if len(d.Axes) > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
		}
		b.WriteByte('}')
		if d.Priority != NoPriority {
			b.WriteByte('p')
			b.WriteString(strconv.Itoa(d.Priority))
		}
	}
	b.WriteByte(']')
	writeSet := func(name string, refs []AxisRef) {
		if len(refs) == 0 {
			return
		}
		b.WriteString(", ")
		b.WriteString(name)
		b.WriteString("={")
		for j, r := range refs {
			if j > 0 {
				b.WriteString(", ")
			}
			writeRef(&b, r)
		}
		b.WriteByte('}')
	}
	writeSet("replicated", s.Replicated)
	writeSet("unreduced", s.Unreduced)
	return b.String()
}

func writeRef(b *strings.Builder, r AxisRef) {
	b.WriteByte('"')
	b.WriteString(r.Name)
	b.WriteByte('"')
	if !r.IsFull() {
		b.WriteString(":(")
		b.WriteString(strconv.Itoa(r.Pre))
		b.WriteByte(')')
		b.WriteString(strconv.Itoa(r.Size))
	}
}

// String is Body.
func (s Sharding) String() string { return s.Body() }

// UsedAxes returns every axis ref of s: dims (major to minor, dim order), then
// replicated, then unreduced.
func (s Sharding) UsedAxes() []AxisRef {
	var out []AxisRef
	for _, d := range s.Dims {
		out = append(out, d.Axes...)
	}
	out = append(out, s.Replicated...)
	return append(out, s.Unreduced...)
}

// place is where an axis ref sits in a sharding, for error paths.
type place struct {
	list int // 0: dims, 1: replicated, 2: unreduced
	dim  int
	k    int
}

// pather maps places in a sharding to wire field paths. note returns a message prefix
// (the text form's "at offset N: ").
type pather interface {
	whole() string
	dim(d int) (field, note string)
	ref(p place) (field, note string)
}

func refErr(pt pather, p place, format string, args ...any) *FieldError {
	f, note := pt.ref(p)
	return Fieldf(f, note+format, args...)
}

func dimErr(pt pather, d int, format string, args ...any) *FieldError {
	f, note := pt.dim(d)
	return Fieldf(f, note+format, args...)
}

// refName names the place of a ref inside a message: its field path, or "offset N" in
// the text form.
func refName(pt pather, p place) string {
	f, note := pt.ref(p)
	if note != "" {
		return strings.TrimPrefix(strings.TrimSuffix(note, ": "), "at ")
	}
	return f
}

// validate checks the invariants of s for a tensor of the given shape (nil: any rank).
func validate(s *Sharding, shape []int64, pt pather) error {
	var errs Errors
	if shape != nil && len(s.Dims) != len(shape) {
		return Fieldf(pt.whole(), "has %d dims but the tensor has rank %d; give one entry per tensor dim", len(s.Dims), len(shape))
	}
	type used struct {
		r AxisRef
		p place
	}
	var all []used
	for d, ds := range s.Dims {
		for k, r := range ds.Axes {
			all = append(all, used{r, place{0, d, k}})
		}
		if ds.Priority < NoPriority {
			errs = append(errs, dimErr(pt, d, "priority %d is negative; priorities are >= 0 (0 is highest)", ds.Priority))
		}
		if ds.Priority > math.MaxInt32 {
			errs = append(errs, dimErr(pt, d, "priority %d is too large; use 0..%d", ds.Priority, math.MaxInt32))
		}
		if ds.Priority != NoPriority && !ds.Open && len(ds.Axes) == 0 {
			errs = append(errs, dimErr(pt, d, "an empty closed dim cannot carry a priority; drop the priority or open the dim"))
		}
		if shape != nil && shape[d] == 0 && len(ds.Axes) > 0 {
			errs = append(errs, dimErr(pt, d, "a dim of size 0 cannot be sharded"))
		}
	}
	for k, r := range s.Replicated {
		all = append(all, used{r, place{1, 0, k}})
	}
	for k, r := range s.Unreduced {
		all = append(all, used{r, place{2, 0, k}})
	}
	for i := range all {
		for j := 0; j < i; j++ {
			a, b := all[j], all[i]
			if a.r.Overlaps(b.r) {
				what := "is used twice"
				if a.r != b.r {
					what = "overlaps " + quoteRef(a.r)
				}
				errs = append(errs, refErr(pt, b.p, "axis %s %s (first at %s); each axis or sub-axis may shard one dim or be replicated/unreduced once", quoteRef(b.r), what, refName(pt, a.p)))
				break
			}
			if !a.r.CanCoexist(b.r) {
				errs = append(errs, refErr(pt, b.p, "sub-axis %s cannot coexist with %s: they do not fit one factorisation of axis %q", quoteRef(b.r), quoteRef(a.r), a.r.Name))
				break
			}
		}
	}
	return errs.Err()
}

// Validate checks a sharding built in code (not parsed) against mesh m and a tensor of
// the given shape (nil: any rank): every axis ref names a mesh axis, carries that axis's
// size in Of and is a valid sub-axis, and the invariants Parse enforces hold (rank, no
// axis used twice or overlapping, coexisting sub-axes, priorities). It does not check
// the canonical form (see Canonicalize). Errors are a *FieldError or Errors whose paths
// are those of the object form under field ("dims[1].axes[0]" when field is "").
func (s Sharding) Validate(m *Mesh, shape []int64, field string) error {
	pt := objPather(field)
	var errs Errors
	check := func(r AxisRef, p place) {
		f, _ := pt.ref(p)
		i := m.AxisIndex(r.Name)
		switch {
		case i < 0:
			errs = append(errs, Fieldf(f, "unknown mesh axis %q (mesh axes: %s)", r.Name, m.axisNames()))
		case r.Of != m.Axes[i].Size:
			errs = append(errs, Fieldf(f, "axis ref %s says axis %q has size %d but the mesh says %d", quoteRef(r), r.Name, r.Of, m.Axes[i].Size))
		case r.Pre < 1 || r.Size < 1 || r.Pre > r.Of || r.Size > r.Of || r.Of%(r.Pre*r.Size) != 0 || (r.Size == 1 && r.Of != 1):
			errs = append(errs, Fieldf(f, "sub-axis (%d)%d is invalid for axis %q of size %d: need k > 1, m >= 1 and m*k dividing %d", r.Pre, r.Size, r.Name, r.Of, r.Of))
		}
	}
	for d, ds := range s.Dims {
		for k, r := range ds.Axes {
			check(r, place{0, d, k})
		}
	}
	for k, r := range s.Replicated {
		check(r, place{1, 0, k})
	}
	for k, r := range s.Unreduced {
		check(r, place{2, 0, k})
	}
	if len(errs) > 0 {
		return errs
	}
	return validate(&s, shape, pt)
}

func quoteRef(r AxisRef) string { return `"` + r.String() + `"` }
