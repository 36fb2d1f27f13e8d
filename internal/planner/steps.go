package planner

import (
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// reduction builds the first move when the source holds partial sums the target does
// not: a reduce_scatter onto the goal dim those axes shard (when one goal dim holds all
// of them, in order, at its minor end after the dim's current atoms), else an
// all_reduce.
func (sp *space) reduction(start, goal state, reduce []sharding.AxisRef, r *Request) (move, bool) {
	ids := sp.atomsOf(reduce)
	var mask uint64
	for _, a := range ids {
		mask |= 1 << a
	}
	unrAfter := r.Target.Unreduced
	if r.allowed(OpReduceScatter) {
		for d, g := range goal {
			var inDim []uint8
			for _, a := range g {
				if mask&(1<<a) != 0 {
					inDim = append(inDim, a)
				}
			}
			if len(inDim) != len(ids) {
				continue
			}
			nx := start.clone()
			nx[d] = append(nx[d], inDim...)
			if !sp.feasible(start, nx, mask) {
				continue
			}
			mv := move{op: OpReduceScatter, dim: d, group: inDim, before: start, after: nx, unrBefore: r.Source.Unreduced, unrAfter: unrAfter, reduceRefs: reduce}
			sp.price(r, &mv)
			return mv, true
		}
	}
	if !r.allowed(OpAllReduce) {
		return move{}, false
	}
	mv := move{op: OpAllReduce, group: ids, before: start, after: start.clone(), unrBefore: r.Source.Unreduced, unrAfter: unrAfter, reduceRefs: reduce}
	sp.price(r, &mv)
	return mv, true
}

// gatherThenSlice is XLA's fallback: gather every sharded dim, then slice the goal.
func (sp *space) gatherThenSlice(start, goal state, unr []sharding.AxisRef) []move {
	var out []move
	cur := start
	for d := range cur {
		if len(cur[d]) == 0 {
			continue
		}
		nx := cur.clone()
		nx[d] = nil
		out = append(out, move{op: OpAllGather, dim: d, group: slices.Clone(cur[d]), before: cur, after: nx, unrBefore: unr, unrAfter: unr})
		cur = nx
	}
	if !cur.equal(goal) {
		var dims []int
		for d := range goal {
			if len(goal[d]) > 0 {
				dims = append(dims, d)
			}
		}
		out = append(out, move{op: OpSlice, dims: dims, before: cur, after: goal.clone(), unrBefore: unr, unrAfter: unr})
	}
	return out
}

// steps turns moves into API steps, pricing each.
func (sp *space) steps(r *Request, mv []move) []Step {
	out := make([]Step, 0, len(mv))
	devices := r.Mesh.NumDevices()
	for _, m := range mv {
		sp.price(r, &m)
		st := Step{Op: m.op, Dim: -1, SplitDim: -1, ConcatDim: -1, before: m.before, after: m.after}
		st.Before = sp.sharding(m.before, m.unrBefore)
		st.After = sp.sharding(m.after, m.unrAfter)
		st.LocalShapeBefore = localShape(r, st.Before)
		st.LocalShapeAfter = localShape(r, st.After)
		st.BytesPerDevice = m.bytes
		st.Cost = m.est
		group := m.group
		switch m.op {
		case OpSlice:
			group = newlyUsed(m.before, m.after)
			st.Dims = slices.Clone(m.dims)
			if st.Dims == nil {
				for d := range m.after {
					if !slices.Equal(m.before[d], m.after[d]) {
						st.Dims = append(st.Dims, d)
					}
				}
			}
			slices.Sort(st.Dims)
			st.MeshAxes = sp.refs(sortedAtoms(sp, group))
		case OpAllGather, OpReduceScatter:
			st.Dim = m.dim
			st.MeshAxes = sp.refs(group)
		case OpAllToAll:
			st.SplitDim, st.ConcatDim = m.dim2, m.dim
			st.MeshAxes = sp.refs(group)
		case OpAllReduce:
			st.MeshAxes = sharding.MergeAdjacent(slices.Clone(m.reduceRefs))
		default:
			st.MeshAxes = sp.refs(sortedAtoms(sp, group))
		}
		if m.op == OpSlice {
			st.GroupSize = 1
		} else {
			st.GroupSize = sharding.Product(st.MeshAxes)
		}
		st.GroupCount = devices / max(st.GroupSize, 1)
		out = append(out, st)
	}
	return out
}

func newlyUsed(before, after state) []uint8 {
	b := before.used()
	var out []uint8
	for _, d := range after {
		for _, a := range d {
			if b&(1<<a) == 0 {
				out = append(out, a)
			}
		}
	}
	return out
}

// directStep is the all_to_all_v candidate: every device receives exactly the part of
// its goal tile it lacks, from a device that holds it.
func (sp *space) directStep(r *Request, from, goal state, unr []sharding.AxisRef) Step {
	return sp.directStepBytes(r, from, goal, unr, -1)
}

// directStepBytes is directStep given its bytes per device (LowerBoundBetween of the two
// shardings; -1: compute them).
func (sp *space) directStepBytes(r *Request, from, goal state, unr []sharding.AxisRef, bytes int64) Step {
	st := sp.directStepUnpriced(r, from, goal, unr, bytes)
	if est, ok := sp.routed(r, from, goal, false, 0); ok {
		st.Cost, st.NearestHolders = est, sp.nearestHolders(from, goal)
	} else {
		st.Cost = r.Model.Estimate(cost.Collective{Kind: cost.AllToAllV, Bytes: st.BytesPerDevice, Mesh: r.Mesh, Axes: st.MeshAxes})
	}
	return st
}

// directStepUnpriced is directStepBytes without its cost.
func (sp *space) directStepUnpriced(r *Request, from, goal state, unr []sharding.AxisRef, bytes int64) Step {
	before := sp.sharding(from, unr)
	after := sp.sharding(goal, unr)
	st := directBetweenBytes(r, before, after, bytes)
	st.before, st.after = from, goal
	st.MeshAxes = sp.refs(sortedAtoms(sp, changedAtoms(from, goal)))
	st.GroupSize = sharding.Product(st.MeshAxes)
	st.GroupCount = r.Mesh.NumDevices() / max(st.GroupSize, 1)
	return st
}

func directBetweenBytes(r *Request, before, after sharding.Sharding, bytes int64) Step {
	if bytes < 0 {
		bytes = LowerBoundBetween(r, before, after)
	}
	return Step{
		Op: OpAllToAllV, Dim: -1, SplitDim: -1, ConcatDim: -1,
		Before: before, After: after,
		LocalShapeBefore: localShape(r, before), LocalShapeAfter: localShape(r, after),
		BytesPerDevice: bytes,
	}
}

// directFromShardings is the all_to_all_v plan when no atom space exists; between is
// LowerBoundBetween(r, r.Source, r.Target).
func directFromShardings(r *Request, between int64) Step {
	st := directBetweenBytes(r, r.Source, r.Target, between)
	var axes []sharding.AxisRef
	for _, a := range r.Mesh.Axes {
		for _, ref := range append(r.Source.UsedAxes(), r.Target.UsedAxes()...) {
			if ref.Name == a.Name {
				axes = append(axes, sharding.FullAxis(a))
				break
			}
		}
	}
	st.MeshAxes = axes
	st.GroupSize = sharding.Product(axes)
	st.GroupCount = r.Mesh.NumDevices() / max(st.GroupSize, 1)
	if tm, ok := r.Model.(trafficModel); ok {
		rt := r.watch(tm.AcquireRouter(r.Memos.costCaches(), r.Mesh))
		st.Cost = rt.Price(explicitTraffic(r, r.Source, r.Target, false)).Estimate
		rt.Release()
	} else {
		st.Cost = r.Model.Estimate(cost.Collective{Kind: cost.AllToAllV, Bytes: st.BytesPerDevice, Mesh: r.Mesh, Axes: axes})
	}
	return st
}

// explicitTraffic is the all_to_all_v from before to after as the full list of
// Transfers (from the nearest holders when nearest), for shardings that fit no common
// atom space (and for tests, which price a step's listed transfers).
func explicitTraffic(r *Request, before, after sharding.Sharding, nearest bool) *cost.Traffic {
	m := r.Mesh
	return &cost.Traffic{Kind: cost.AllToAllV, Mesh: m, Each: func(yield func(from, to []int, bytes int64) bool) {
		from := make([]int, len(m.Axes))
		to := make([]int, len(m.Axes))
		for _, t := range Transfers(m, r.Shape, r.ElemBits, before, after, nearest) {
			m.Coords(m.PositionOf(t.From), from)
			m.Coords(m.PositionOf(t.To), to)
			if !yield(from, to, t.Bytes) {
				return
			}
		}
	}}
}
