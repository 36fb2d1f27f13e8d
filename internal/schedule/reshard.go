package schedule

import (
	"context"
	"slices"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Reshard is the schedule of plan p: one phase per step, the ranks being the mesh's
// device ids. A step's new tile is assembled from the tiles its op reads: the rank's
// own (slice; what it already holds of every other op), the group's (all_gather,
// all_to_all, and the partial sums of all_reduce and reduce_scatter, added up), the
// pair's sender (collective_permute), the planned transfers (all_to_all_v); a halo
// exchange sends the planned halo pieces, which the next step reads beside the tiles.
// It stops with ctx's error once ctx is done.
func Reshard(ctx context.Context, p *planner.Plan) (*Schedule, error) {
	r := p.Request
	m := r.Mesh
	n := m.NumDevices()
	s := &Schedule{Kind: "reshard", Phases: len(p.Steps), Buckets: 1,
		Tensors: []Tensor{{Name: "x", Shape: r.Shape, ElemBits: r.ElemBits, Bytes: sharding.BufferBytes(elements(r.Shape), r.ElemBits)}}}
	s.Ranks = make([]Rank, n)
	src := sharding.NewLayout(m, r.Shape, r.Source)
	for id := range n {
		s.Ranks[id] = Rank{Rank: id, Buffers: []Buffer{{Name: BufTile, Global: tileBox(src, id)}}, Phases: make([]Phase, 0, len(p.Steps))}
	}
	halos := map[int][]Box{} // halo pieces each rank holds
	for i, st := range p.Steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b := newBuilder(r.ElemBits, 0)
		lb := sharding.NewLayout(m, r.Shape, st.Before)
		la := sharding.NewLayout(m, r.Shape, st.After)
		held := func(id int, withHalos bool) []holding {
			hs := []holding{{rank: id, buf: BufTile, global: tileBox(lb, id)}}
			if withHalos {
				for k, h := range halos[id] {
					hs = append(hs, holding{rank: id, buf: BufHalo, index: k, global: h})
				}
			}
			return hs
		}
		groups := map[int][]int{}
		dims := stepDims(&st)
		if st.Halo != nil {
			next := map[int][]Box{}
			for id, hs := range halos {
				next[id] = slices.Clone(hs)
			}
			created := map[int][]Buffer{}
			for _, tr := range st.Halo.Transfers() {
				want := Box(tr.Ranges)
				pieces, ok := cover(want, held(tr.From, true))
				if !ok {
					return nil, errorf("step %d: halo piece %v is not held by its sender %d", i, tr.Ranges, tr.From)
				}
				k := len(next[tr.To])
				next[tr.To] = append(next[tr.To], want)
				created[tr.To] = append(created[tr.To], Buffer{Name: BufHalo, Index: k, Global: want})
				for _, pc := range pieces {
					b.move(pc, tr.To, BufHalo, k, want, false)
				}
			}
			for id := range n {
				s.Ranks[id].Phases = append(s.Ranks[id].Phases, Phase{Phase: i, Collective: string(st.Op), Halo: true, Dims: dims,
					Tile: tileBox(la, id), KeepsTile: true, NewBuffers: created[id], Ops: b.ops[id]})
			}
			halos = next
			continue
		}
		var from map[int][]holding // per receiver, what it reads (nil: its group's tiles)
		switch st.Op {
		case planner.OpSlice:
			from = map[int][]holding{}
			for id := range n {
				from[id] = held(id, true)
			}
		case planner.OpCollectivePermute:
			from = map[int][]holding{}
			for _, pr := range planner.Pairs(m, r.Shape, st.Before, st.After) {
				from[pr[1]] = held(pr[0], false)
			}
		case planner.OpAllToAllV:
			ts, err := planner.TransfersContext(ctx, m, r.Shape, r.ElemBits, st.Before, st.After, st.NearestHolders)
			if err != nil {
				return nil, err
			}
			from = map[int][]holding{}
			for id := range n {
				from[id] = held(id, false)
			}
			for _, tr := range ts {
				// The planned piece, from its sender's tile.
				from[tr.To] = append(from[tr.To], holding{rank: tr.From, buf: BufTile, global: Box(tr.Ranges), at: tileBox(lb, tr.From)})
			}
		default:
			for id := range n {
				groups[id] = groupOf(m, id, st.MeshAxes)
			}
		}
		reduce := st.Op == planner.OpAllReduce || st.Op == planner.OpReduceScatter
		for id := range n {
			want := tileBox(la, id)
			switch {
			case reduce:
				// Every member holds its partial sum of the rank's new tile.
				order := append([]int{id}, slices.DeleteFunc(slices.Clone(groups[id]), func(g int) bool { return g == id })...)
				for _, g := range order {
					pieces, ok := cover(want, held(g, false))
					if !ok {
						return nil, errorf("step %d (%s): rank %d's partial sum of %v is not in member %d's tile", i, st.Op, id, want, g)
					}
					for _, pc := range pieces {
						b.move(pc, id, BufTile, 0, want, g != id)
					}
				}
			default:
				hs := from[id]
				if hs == nil {
					hs = held(id, st.Op == planner.OpAllGather)
					for _, g := range groups[id] {
						if g != id {
							hs = append(hs, held(g, st.Op == planner.OpAllGather)...)
						}
					}
				}
				pieces, ok := cover(want, hs)
				if !ok {
					return nil, errorf("step %d (%s): rank %d's new tile %v is not held by what the step reads", i, st.Op, id, want)
				}
				for _, pc := range pieces {
					b.move(pc, id, BufTile, 0, want, false)
				}
			}
		}
		for id := range n {
			s.Ranks[id].Phases = append(s.Ranks[id].Phases, Phase{Phase: i, Collective: string(st.Op), Dims: dims,
				Group: groups[id], Tile: tileBox(la, id), Ops: b.ops[id]})
		}
		halos = map[int][]Box{}
	}
	return s, nil
}

// stepDims are the dims a step names.
func stepDims(st *planner.Step) []int {
	switch {
	case st.Op == planner.OpSlice:
		return st.Dims
	case st.Op == planner.OpAllToAll:
		return []int{st.SplitDim, st.ConcatDim}
	case st.Dim >= 0 && (st.Op == planner.OpAllGather || st.Op == planner.OpReduceScatter || st.Halo != nil):
		return []int{st.Dim}
	}
	return nil
}

func tileBox(l *sharding.Layout, id int) Box { return Box(l.TileOf(id).Ranges) }

func elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// groupOf lists the devices that differ from id only in their coordinates on axes, in
// group order (the axes major to minor).
func groupOf(m *sharding.Mesh, id int, axes []sharding.AxisRef) []int {
	c := m.Coords(m.PositionOf(id), nil)
	var out []int
	var rec func(k int)
	rec = func(k int) {
		if k == len(axes) {
			out = append(out, m.DeviceAt(m.PositionOfCoords(c)))
			return
		}
		r := axes[k]
		ai := m.AxisIndex(r.Name)
		saved := c[ai]
		for v := 0; v < r.Size; v++ {
			c[ai] += (v - r.Coord(c[ai])) * r.Minor()
			rec(k + 1)
		}
		c[ai] = saved
	}
	rec(0)
	return out
}
