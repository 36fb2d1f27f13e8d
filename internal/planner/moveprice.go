package planner

import (
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// price fills the bytes and the estimate of mv. Buffers are padded (XLA pads uneven
// shards), so bytes count padding: all_gather receives k-1 input buffers; all_to_all and
// reduce_scatter split the input along one dim, padded to a multiple of k, and receive
// k-1 pieces; all_reduce receives 2(k-1) pieces.
func (sp *space) price(r *Request, mv *move) {
	inElems := sp.tileElems(mv.before)
	inBytes := sp.bytes(inElems)
	k := int64(1)
	for _, a := range mv.group {
		k *= int64(sp.atoms[a].Size)
	}
	// piece: the input split k ways along the dim that gets split (padded).
	piece := func(d int) int64 { return sp.pieceBytes(mv.before, inElems, d, k) }
	c := cost.Collective{Mesh: r.Mesh, Axes: sp.refs(sortedAtoms(sp, mv.group))}
	switch mv.op {
	case OpSlice:
		mv.bytes, mv.est = 0, cost.Estimate{}
		return
	case OpAllGather:
		c.Kind, c.Bytes = cost.AllGather, k*inBytes
		mv.bytes = (k - 1) * inBytes
	case OpAllToAll:
		// The array each group exchanges: k input buffers, each padded to k equal
		// pieces along the split dim (more than k buffers on uneven tiles).
		c.Kind, c.Bytes = cost.AllToAll, k*k*piece(mv.dim2)
		mv.bytes = (k - 1) * piece(mv.dim2)
	case OpCollectivePermute:
		mv.bytes = inBytes
		if est, ok := sp.routed(r, mv.before, mv.after, true, inBytes); ok {
			mv.est = est
			return
		}
		c.Kind, c.Bytes = cost.CollectivePermute, inBytes
	case OpReduceScatter:
		c.Kind, c.Bytes = cost.ReduceScatter, k*piece(mv.dim)
		mv.bytes = (k - 1) * piece(mv.dim)
	case OpAllReduce:
		c.Kind, c.Bytes = cost.AllReduce, inBytes
		mv.bytes = 2 * (k - 1) * sp.bytes(sharding.CeilDiv(inElems, k))
	}
	mv.est = r.Model.Estimate(c)
}

// pieceBytes is the bytes of one of the k padded pieces a buffer of state st (inElems
// elements) splits into along dim d.
func (sp *space) pieceBytes(st state, inElems int64, d int, k int64) int64 {
	l := sp.tile(d, st[d])
	if l == 0 {
		return 0
	}
	return sp.bytes(inElems / l * sharding.CeilDiv(l, k))
}

// allToAllBytes is the array an all_to_all over k devices exchanges from state st into
// dim d: k input buffers, each padded to k equal pieces along d.
func (sp *space) allToAllBytes(st state, d int, k int64) int64 {
	return k * k * sp.pieceBytes(st, sp.tileElems(st), d, k)
}

// countMask is the product of the sizes of the atoms in group.
func (sp *space) countMask(group uint64) int64 {
	k := int64(1)
	for a := range sp.atoms {
		if group&(1<<a) != 0 {
			k *= int64(sp.atoms[a].Size)
		}
	}
	return k
}

// sortedAtoms orders atoms by mesh axis and pre-size so adjacent pieces merge.
func sortedAtoms(sp *space, ids []uint8) []uint8 {
	out := slices.Clone(ids)
	sortAtoms(sp, out)
	return out
}

// sortAtoms sorts ids in place as sortedAtoms orders them.
func sortAtoms(sp *space, ids []uint8) {
	slices.SortFunc(ids, func(a, b uint8) int {
		ra, rb := sp.atoms[a], sp.atoms[b]
		ia, ib := sp.mesh.AxisIndex(ra.Name), sp.mesh.AxisIndex(rb.Name)
		if ia != ib {
			return ia - ib
		}
		return ra.Pre - rb.Pre
	})
}

// mergeMoves merges runs of slices and runs of collective-permutes into one step each.
func mergeMoves(sp *space, r *Request, mv []move) []move {
	if len(mv) == 0 {
		return nil
	}
	out := make([]move, 0, len(mv))
	for _, m := range mv {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.op == OpSlice && m.op == OpSlice {
				last.after = m.after
				if !slices.Contains(last.dims, m.dim) {
					last.dims = append(last.dims, m.dim)
				}
				continue
			}
			if last.op == OpCollectivePermute && m.op == OpCollectivePermute {
				// One permute instead of two when that is no slower (routed prices
				// depend on where every atom goes, so a merge can cost more).
				sp.price(r, last)
				sp.price(r, &m)
				merged := *last
				merged.after = m.after
				merged.group = changedAtoms(merged.before, merged.after)
				sp.price(r, &merged)
				if merged.est.TimeUS <= last.est.TimeUS+m.est.TimeUS {
					*last = merged
					continue
				}
			}
		}
		out = append(out, m)
	}
	return out
}
