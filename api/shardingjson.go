package api

import (
	"slices"
	"strconv"

	"github.com/shardplan/shardplan/internal/sharding"
)

// ShardingJSON is the canonical output form of a sharding (API.md "Sharding").
type ShardingJSON struct {
	// Dims has one entry per tensor dim.
	Dims []DimShardingJSON `json:"dims"`
	// Replicated lists the explicitly replicated axes, in mesh order.
	Replicated []string `json:"replicated,omitempty" example:"w"`
	// Unreduced lists the axes over which the tensor holds partial sums, in mesh order.
	Unreduced []string `json:"unreduced,omitempty" example:"u"`
	// Text is Shardy's textual form (output only; also accepted as input).
	Text string `json:"text" example:"sharding<@mesh, [{\"x\"}, {\"z\", \"y\", ?}p1], replicated={\"w\"}>"`
	// Hlo is XLA's HloSharding text of the same layout (output only; also accepted as
	// input): what XLA dumps, jax.Array.sharding and mhlo.sharding print. Unreduced axes
	// are an unreduced subgroup (last_tile_dims={unreduced, ...}); open flags and
	// priorities are not part of it.
	Hlo string `json:"hlo" example:"{devices=[2,1,4]<=[8] last_tile_dim_replicate}"`
	// PartitionSpec is JAX's PartitionSpec of the same layout (output only; also accepted
	// as input); absent when a sub-axis makes it inexpressible (use text then).
	PartitionSpec string `json:"partition_spec,omitempty" example:"P('x', None, ('y','z'))"`
} // @name Sharding

// DimShardingJSON is the sharding of one tensor dim.
type DimShardingJSON struct {
	// Axes shard the dim, major to minor: "x" (a full axis) or "x:(m)k" (a sub-axis).
	Axes []string `json:"axes" example:"x,y:(1)2"`
	// Open: propagation may add axes to this dim.
	Open bool `json:"open,omitempty"`
	// Priority is Shardy's p<N>, 0 highest; absent means none.
	Priority *int `json:"priority,omitempty" validate:"omitempty,gte=0"`
} // @name DimSharding

// shardingJSON renders s (canonical, on mesh m) in the wire's canonical output form.
// Endpoints that answer with shardings (tiles, reshard, graph) all use it.
func shardingJSON(s sharding.Sharding, m *sharding.Mesh) ShardingJSON {
	return (&shardingWriter{m: m}).json(s)
}

// shardingWriter renders many shardings on one mesh. A graph's tensors share a few
// distinct shardings, so each distinct one is rendered once (its Shardy, HLO and
// PartitionSpec texts printed once) and its ShardingJSON, slices included, is given to
// every tensor that has it: callers must not modify what json returns.
//
// A writer with stable set also keeps the first few shardings it renders themselves
// and finds a sharding among them by comparing fields, without building its key: a
// reshard answer's steps repeat a handful of shardings (each step's before is the
// previous step's after). Its callers promise not to modify a sharding they pass
// while the writer is in use.
type shardingWriter struct {
	m      *sharding.Mesh
	stable bool
	recent []renderedSharding      // stable only: up to maxRecentShardings
	seen   map[string]ShardingJSON // by shardingKey, the rest
	key    []byte                  // scratch for the lookup
	dims   []sharding.DimSharding  // scratch for closedJSON's view
}

// renderedSharding is a sharding a stable writer rendered, and its rendering.
type renderedSharding struct {
	s   sharding.Sharding
	out ShardingJSON
}

// maxRecentShardings bounds a stable writer's list: past it, shardings are found by key.
const maxRecentShardings = 16

// closedJSON is json of s.Layout() (every dim closed, no priorities, no replicated
// list). It looks at s through a scratch copy of its dims instead of cloning s: most closed shardings of an answer are already rendered, and a
// rendered ShardingJSON keeps nothing of the sharding it came from.
func (w *shardingWriter) closedJSON(s sharding.Sharding) ShardingJSON {
	w.dims = w.dims[:0]
	for _, d := range s.Dims {
		w.dims = append(w.dims, sharding.DimSharding{Axes: d.Axes, Priority: sharding.NoPriority})
	}
	return w.render(sharding.Sharding{Dims: w.dims, Unreduced: s.Unreduced}, false)
}

func (w *shardingWriter) json(s sharding.Sharding) ShardingJSON { return w.render(s, w.stable) }

// render is json of s; keep says s may be kept in recent (it is not scratch).
func (w *shardingWriter) render(s sharding.Sharding, keep bool) ShardingJSON {
	for i := range w.recent {
		if shardingsEqual(w.recent[i].s, s) {
			return w.recent[i].out
		}
	}
	keep = keep && len(w.recent) < maxRecentShardings
	if !keep {
		w.key = appendShardingKey(w.key[:0], s)
		if out, ok := w.seen[string(w.key)]; ok {
			return out
		}
	}
	out := ShardingJSON{Dims: make([]DimShardingJSON, len(s.Dims)), Text: s.Text(w.m.Name), Hlo: s.HLO(w.m)}
	out.PartitionSpec, _ = s.PartitionSpecText()
	for i, d := range s.Dims {
		dj := DimShardingJSON{Axes: refStrings(d.Axes), Open: d.Open}
		if d.Priority != sharding.NoPriority {
			p := d.Priority
			dj.Priority = &p
		}
		out.Dims[i] = dj
	}
	if len(s.Replicated) > 0 {
		out.Replicated = refStrings(s.Replicated)
	}
	if len(s.Unreduced) > 0 {
		out.Unreduced = refStrings(s.Unreduced)
	}
	if keep {
		w.recent = append(w.recent, renderedSharding{s: s, out: out})
		return out
	}
	if w.seen == nil {
		w.seen = map[string]ShardingJSON{}
	}
	w.seen[string(w.key)] = out
	return out
}

// shardingsEqual reports whether a and b are equal in every field (those
// appendShardingKey keys).
func shardingsEqual(a, b sharding.Sharding) bool {
	if len(a.Dims) != len(b.Dims) || !slices.Equal(a.Replicated, b.Replicated) || !slices.Equal(a.Unreduced, b.Unreduced) {
		return false
	}
	for i := range a.Dims {
		da, db := &a.Dims[i], &b.Dims[i]
		if da.Open != db.Open || da.Priority != db.Priority || !slices.Equal(da.Axes, db.Axes) {
			return false
		}
	}
	return true
}

// appendShardingKey appends a key of every field of s: equal keys, equal shardings.
// Lists are counted and names length-prefixed, so no two shardings share a key.
func appendShardingKey(dst []byte, s sharding.Sharding) []byte {
	refs := func(rs []sharding.AxisRef) {
		dst = strconv.AppendInt(dst, int64(len(rs)), 10)
		for _, r := range rs {
			dst = append(dst, ' ')
			dst = strconv.AppendInt(dst, int64(len(r.Name)), 10)
			dst = append(dst, ':')
			dst = append(dst, r.Name...)
			for _, n := range [...]int{r.Pre, r.Size, r.Of} {
				dst = append(dst, ',')
				dst = strconv.AppendInt(dst, int64(n), 10)
			}
		}
		dst = append(dst, ';')
	}
	dst = strconv.AppendInt(dst, int64(len(s.Dims)), 10)
	for _, d := range s.Dims {
		dst = append(dst, '[')
		refs(d.Axes)
		dst = strconv.AppendBool(dst, d.Open)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, int64(d.Priority), 10)
	}
	refs(s.Replicated)
	refs(s.Unreduced)
	return dst
}

func refStrings(refs []sharding.AxisRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

// meshJSON renders a validated mesh in its object form.
func meshJSON(m *sharding.Mesh) MeshObject {
	out := MeshObject{Name: m.Name, Axes: make([]MeshAxis, len(m.Axes)), DeviceIDs: m.DeviceIDs}
	for i, a := range m.Axes {
		out.Axes[i] = MeshAxis{Name: a.Name, Size: a.Size}
	}
	return out
}
