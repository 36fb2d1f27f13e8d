package planner

import (
	"container/heap"
	"context"
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// move is one edge of the search: an op from before to after over the group atoms.
type move struct {
	op         Op
	dim, dim2  int     // slice/gather/reduce_scatter dim; all_to_all: dim = from, dim2 = to
	dims       []int   // slice: every dim sliced
	group      []uint8 // atoms the collective runs over
	before     state
	after      state
	unrBefore  []sharding.AxisRef
	unrAfter   []sharding.AxisRef
	reduceRefs []sharding.AxisRef // reductions: the axes reduced
	est        cost.Estimate
	bytes      int64 // received by the busiest device
}

type node struct {
	st    state
	g     float64
	steps int
	mv    *move
	prev  *node
	index int
}

type pq []*node

func (q pq) Len() int { return len(q) }
func (q pq) Less(i, j int) bool {
	if q[i].g != q[j].g {
		return q[i].g < q[j].g
	}
	return q[i].steps < q[j].steps
}
func (q pq) Swap(i, j int) { q[i], q[j] = q[j], q[i]; q[i].index = i; q[j].index = j }
func (q *pq) Push(x any)   { n := x.(*node); n.index = len(*q); *q = append(*q, n) }
func (q *pq) Pop() any {
	old := *q
	n := old[len(old)-1]
	*q = old[:len(old)-1]
	return n
}

// search runs Dijkstra from start to goal over slice, all_gather, all_to_all and
// collective_permute moves. It returns the moves, the number of expansions, and whether
// the goal was reached within the budget.
func (sp *space) search(ctx context.Context, r *Request, start, goal state, unr []sharding.AxisRef) ([]move, int, bool, error) {
	if start.equal(goal) {
		return nil, 0, true, nil
	}
	srcRep := r.Source.IsFullyReplicated()
	tgtRep := r.Target.IsFullyReplicated()
	maxTile := max(sp.tileElems(start), sp.tileElems(goal))
	goalMask := goal.used()
	startNode := &node{st: start}
	best := map[string]float64{start.key(): 0}
	q := &pq{startNode}
	expansions := 0
	for q.Len() > 0 {
		n := heap.Pop(q).(*node)
		if g, ok := best[n.st.key()]; ok && g < n.g {
			continue
		}
		if n.st.equal(goal) {
			var mv []move
			for x := n; x.mv != nil; x = x.prev {
				mv = append(mv, *x.mv)
			}
			slices.Reverse(mv)
			return mergeMoves(sp, r, mv), expansions, true, nil
		}
		expansions++
		if expansions > r.MaxExpansions {
			break
		}
		if expansions%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, expansions, false, err
			}
		}
		for _, mv := range sp.neighbors(r, n.st, goal, goalMask, unr) {
			if sp.tileElems(mv.after) > maxTile {
				continue
			}
			if !srcRep && !tgtRep && mv.after.used() == 0 && len(unr) == 0 && !mv.after.equal(goal) {
				continue // never pass through full replication
			}
			g := n.g + mv.est.TimeUS
			k := mv.after.key()
			if old, ok := best[k]; ok && old <= g {
				continue
			}
			best[k] = g
			m := mv
			heap.Push(q, &node{st: mv.after, g: g, steps: n.steps + 1, mv: &m, prev: n})
		}
	}
	return nil, expansions, false, nil
}

// neighbors lists the moves out of st that the request allows and that are feasible.
func (sp *space) neighbors(r *Request, st, goal state, goalMask uint64, unr []sharding.AxisRef) []move {
	var out []move
	used := st.used()
	add := func(mv move) {
		mv.before, mv.unrBefore, mv.unrAfter = st, unr, unr
		var group uint64
		for _, a := range mv.group {
			group |= 1 << a
		}
		if mv.op != OpCollectivePermute && !sp.feasible(st, mv.after, group) {
			return
		}
		sp.price(r, &mv)
		out = append(out, mv)
	}
	rank := len(st)
	if r.allowed(OpSlice) {
		for a := range sp.atoms {
			u := uint8(a)
			if used&(1<<u) != 0 || goalMask&(1<<u) == 0 {
				continue
			}
			for d := range rank {
				nx := st.clone()
				nx[d] = append(nx[d], u)
				add(move{op: OpSlice, dim: d, dims: []int{d}, group: nil, after: nx})
			}
		}
	}
	for d := range rank {
		n := len(st[d])
		for k := 1; k <= n; k++ {
			suffix := st[d][n-k:]
			if r.allowed(OpAllGather) {
				nx := st.clone()
				nx[d] = nx[d][:n-k]
				add(move{op: OpAllGather, dim: d, group: slices.Clone(suffix), after: nx})
			}
			if r.allowed(OpAllToAll) {
				for b := range rank {
					if b == d {
						continue
					}
					nx := st.clone()
					nx[d] = nx[d][:n-k]
					nx[b] = append(nx[b], suffix...)
					add(move{op: OpAllToAll, dim: d, dim2: b, group: slices.Clone(suffix), after: nx})
				}
			}
		}
	}
	if r.allowed(OpCollectivePermute) {
		// Direct to the goal when every dim already has the goal's shard count.
		same := true
		for d := range rank {
			if sp.count(st[d]) != sp.count(goal[d]) {
				same = false
				break
			}
		}
		if same && !st.equal(goal) {
			add(move{op: OpCollectivePermute, group: changedAtoms(st, goal), after: goal.clone()})
		}
		// Swap two equal-sized atoms, or replace an atom by an unused one, when that puts
		// a goal atom at its goal position (undirected permutations only widen the search
		// without making plans cheaper: a later permute can do them in the same step).
		atGoal := func(d, i int, a uint8) bool { return i < len(goal[d]) && goal[d][i] == a }
		type pos struct{ d, i int }
		var ps []pos
		for d := range rank {
			for i := range st[d] {
				ps = append(ps, pos{d, i})
			}
		}
		for x := range ps {
			px := ps[x]
			a := st[px.d][px.i]
			for y := x + 1; y < len(ps); y++ {
				py := ps[y]
				b := st[py.d][py.i]
				if sp.atoms[a].Size != sp.atoms[b].Size || !(atGoal(px.d, px.i, b) || atGoal(py.d, py.i, a)) {
					continue
				}
				nx := st.clone()
				nx[px.d][px.i], nx[py.d][py.i] = b, a
				add(move{op: OpCollectivePermute, group: []uint8{a, b}, after: nx})
			}
			if px.i < len(goal[px.d]) {
				u := goal[px.d][px.i]
				if used&(1<<u) == 0 && sp.atoms[u].Size == sp.atoms[a].Size {
					nx := st.clone()
					nx[px.d][px.i] = u
					add(move{op: OpCollectivePermute, group: []uint8{a, u}, after: nx})
				}
			}
		}
	}
	return out
}

func changedAtoms(a, b state) []uint8 {
	var out []uint8
	seen := uint64(0)
	for d := range a {
		for i, x := range a[d] {
			if i >= len(b[d]) || b[d][i] != x {
				if seen&(1<<x) == 0 {
					out = append(out, x)
					seen |= 1 << x
				}
			}
		}
		for i, x := range b[d] {
			if i >= len(a[d]) || a[d][i] != x {
				if seen&(1<<x) == 0 {
					out = append(out, x)
					seen |= 1 << x
				}
			}
		}
	}
	return out
}

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
	piece := func(d int) int64 {
		l := sp.tile(d, mv.before[d])
		if l == 0 {
			return 0
		}
		return sp.bytes(inElems / l * sharding.CeilDiv(l, k))
	}
	c := cost.Collective{Mesh: r.Mesh, Axes: sp.refs(sortedAtoms(sp, mv.group))}
	switch mv.op {
	case OpSlice:
		mv.bytes, mv.est = 0, cost.Estimate{}
		return
	case OpAllGather:
		c.Kind, c.Bytes = cost.AllGather, k*inBytes
		mv.bytes = (k - 1) * inBytes
	case OpAllToAll:
		c.Kind, c.Bytes = cost.AllToAll, k*inBytes
		mv.bytes = (k - 1) * piece(mv.dim2)
	case OpCollectivePermute:
		c.Kind, c.Bytes = cost.CollectivePermute, inBytes
		mv.bytes = inBytes
	case OpReduceScatter:
		c.Kind, c.Bytes = cost.ReduceScatter, inBytes
		mv.bytes = (k - 1) * piece(mv.dim)
	case OpAllReduce:
		c.Kind, c.Bytes = cost.AllReduce, inBytes
		mv.bytes = 2 * (k - 1) * sp.bytes(sharding.CeilDiv(inElems, k))
	}
	mv.est = r.Model.Estimate(c)
}

// sortedAtoms orders atoms by mesh axis and pre-size so adjacent pieces merge.
func sortedAtoms(sp *space, ids []uint8) []uint8 {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b uint8) int {
		ra, rb := sp.atoms[a], sp.atoms[b]
		ia, ib := sp.mesh.AxisIndex(ra.Name), sp.mesh.AxisIndex(rb.Name)
		if ia != ib {
			return ia - ib
		}
		return ra.Pre - rb.Pre
	})
	return out
}

// mergeMoves merges runs of slices and runs of collective-permutes into one step each.
func mergeMoves(sp *space, r *Request, mv []move) []move {
	var out []move
	for _, m := range mv {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.op == m.op && (m.op == OpSlice || m.op == OpCollectivePermute) {
				last.after = m.after
				if m.op == OpSlice {
					if !slices.Contains(last.dims, m.dim) {
						last.dims = append(last.dims, m.dim)
					}
				} else {
					last.group = changedAtoms(last.before, last.after)
				}
				sp.price(r, last)
				continue
			}
		}
		out = append(out, m)
	}
	return out
}
