package propagation

import "github.com/shardplan/shardplan/internal/sharding"

// slabChunk is how many dims or axes one slab allocation holds.
const slabChunk = 4096

// slab hands out the dims and axis lists of the shardings a Result holds from a few
// large allocations instead of one or two per tensor. Pieces are capped at their
// length, so appending to one never writes into the next. The copies keep the nil-ness
// of what the allocating helpers they replace would return (see each method).
type slab struct {
	dims []sharding.DimSharding
	axes []axisRef
}

// dimsOf returns n zeroed dims, like make([]sharding.DimSharding, n).
func (s *slab) dimsOf(n int) []sharding.DimSharding {
	if n == 0 {
		return []sharding.DimSharding{}
	}
	if len(s.dims) < n {
		s.dims = make([]sharding.DimSharding, max(n, slabChunk))
	}
	out := s.dims[:n:n]
	s.dims = s.dims[n:]
	return out
}

// reserve makes room for n more axes in the current chunk.
func (s *slab) reserve(n int) {
	if cap(s.axes)-len(s.axes) < n {
		s.axes = make([]axisRef, 0, max(n, slabChunk))
	}
}

// copyOf is append([]axisRef(nil), a...): nil when a is empty.
func (s *slab) copyOf(a []axisRef) []axisRef {
	if len(a) == 0 {
		return nil
	}
	s.reserve(len(a))
	start := len(s.axes)
	s.axes = append(s.axes, a...)
	return s.axes[start:len(s.axes):len(s.axes)]
}

// cloneOf is slices.Clone(a): nil for nil, empty for empty.
func (s *slab) cloneOf(a []axisRef) []axisRef {
	if a == nil {
		return nil
	}
	if len(a) == 0 {
		return []axisRef{}
	}
	return s.copyOf(a)
}

// clone is sh.Clone().
func (s *slab) clone(sh sharding.Sharding) sharding.Sharding {
	c := sharding.Sharding{Dims: s.dimsOf(len(sh.Dims))}
	for i, d := range sh.Dims {
		c.Dims[i] = sharding.DimSharding{Axes: s.copyOf(d.Axes), Open: d.Open, Priority: d.Priority}
	}
	c.Replicated = s.copyOf(sh.Replicated)
	c.Unreduced = s.copyOf(sh.Unreduced)
	return c
}

// layout is sh.Layout(), its slices cut from the slab.
func (s *slab) layout(sh sharding.Sharding) sharding.Sharding {
	out := sharding.Sharding{Dims: s.dimsOf(len(sh.Dims)), Unreduced: s.cloneOf(sh.Unreduced)}
	for i, d := range sh.Dims {
		out.Dims[i] = sharding.DimSharding{Axes: s.cloneOf(d.Axes), Priority: sharding.NoPriority}
	}
	return out
}
