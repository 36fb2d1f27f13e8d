package transfer

import (
	"context"
	"slices"
)

// move sends part `part` of `parts` of a cell (the cell cut along its longest dim) from
// one device to another in a phase.
type move struct {
	phase       int32
	from, to    int32
	cell        int32
	part, parts int32
}

// Move is a move written out: global device ids, the global ranges it carries.
type Move struct {
	Phase  int
	From   int
	To     int
	Ranges [][2]int64
	Bytes  int64
}

// splitDim is the dim a cell's parts cut: its longest.
func (c *cell) splitDim() int {
	best := 0
	for d := range c.lo {
		if c.hi[d]-c.lo[d] > c.hi[best]-c.lo[best] {
			best = d
		}
	}
	return best
}

// partRange is part k of n of the cell along its split dim.
func (c *cell) partRange(k, n int32) (d int, lo, hi int64) {
	d = c.splitDim()
	e := c.hi[d] - c.lo[d]
	return d, c.lo[d] + e*int64(k)/int64(n), c.lo[d] + e*int64(k+1)/int64(n)
}

// moveElems is the number of elements move m carries.
func (c *class) moveElems(m move) int64 {
	cl := &c.cells[m.cell]
	if m.parts <= 1 {
		return cl.elems
	}
	d, lo, hi := cl.partRange(m.part, m.parts)
	return cl.elems / (cl.hi[d] - cl.lo[d]) * (hi - lo)
}

// written is m with its ranges.
func (c *class) written(m move) Move {
	cl := &c.cells[m.cell]
	r := make([][2]int64, len(cl.lo))
	for d := range r {
		r[d] = [2]int64{cl.lo[d], cl.hi[d]}
	}
	if m.parts > 1 {
		d, lo, hi := cl.partRange(m.part, m.parts)
		r[d] = [2]int64{lo, hi}
	}
	return Move{Phase: int(m.phase), From: int(m.from), To: int(m.to), Ranges: r, Bytes: int64(c.bytesOf(c.moveElems(m)) + 0.5)}
}

// builder makes one class's moves, balancing senders and receivers by the bytes it has
// given each device so far.
type builder struct {
	p     *Problem
	f     *Fabric
	c     *class
	moves []move
	// per global device: bytes sent and received over NVLink and NICs so far
	nvOut, nicOut, nicIn []float64
	replica, position    []int32 // target replica and mesh position of each device (-1)
	order                []int   // replicas in chain order (chain, tree)
	rank                 []int   // replica -> index in order
	// limit bounds len(moves): a move past it is dropped and over set (the planner
	// refuses the plan); the loops stop at the next cell.
	limit int
	over  bool
}

// stop reports why a builder loop ends before cell ci: its deadline, or its moves over
// the limit (nil: go on).
func (b *builder) stop(ctx context.Context, ci int) (bool, error) {
	if b.over {
		return true, nil
	}
	if ci&255 == 0 && ctx.Err() != nil {
		return true, ctx.Err()
	}
	return false, nil
}

func newBuilder(p *Problem, c *class) *builder {
	n := p.Devices
	b := &builder{p: p, f: p.Fabric, c: c,
		nvOut: make([]float64, n), nicOut: make([]float64, n), nicIn: make([]float64, n),
		replica: make([]int32, n), position: make([]int32, n), limit: DefaultMaxMoves}
	for i := range b.replica {
		b.replica[i], b.position[i] = -1, -1
	}
	for r, t := range p.Targets {
		for q, d := range t.Devices {
			b.replica[d], b.position[d] = int32(r), int32(q)
		}
	}
	return b
}

func (b *builder) add(m move) {
	if len(b.moves) >= b.limit {
		b.over = true
		return
	}
	w := b.c.bytesOf(b.c.moveElems(m))
	if b.f.Node(int(m.from)) == b.f.Node(int(m.to)) {
		b.nvOut[m.from] += w
	} else {
		b.nicOut[m.from] += w
		b.nicIn[m.to] += w
	}
	b.moves = append(b.moves, m)
}

// holder picks the holder of cell ci that d should pull from: d itself (-1: no move),
// else the least loaded in d's node, else the least loaded over NICs.
func (b *builder) holder(cl *cell, d int32) int32 {
	node := b.f.Node(int(d))
	best, bestLoad, local := int32(-1), 0.0, false
	for _, h := range cl.holders {
		if h == d {
			return -1
		}
		if b.f.Node(int(h)) == node {
			if !local || b.nvOut[h] < bestLoad {
				best, bestLoad, local = h, b.nvOut[h], true
			}
			continue
		}
		if !local && (best < 0 || b.nicOut[h] < bestLoad) {
			best, bestLoad = h, b.nicOut[h]
		}
	}
	return best
}

// direct: every needer pulls every cell it lacks in phase 0.
func (b *builder) direct(ctx context.Context) error {
	for ci := range b.c.cells {
		if stop, err := b.stop(ctx, ci); stop {
			return err
		}
		cl := &b.c.cells[ci]
		for _, d := range cl.needers {
			if h := b.holder(cl, d); h >= 0 {
				b.add(move{phase: 0, from: h, to: d, cell: int32(ci), parts: 1})
			}
		}
	}
	return nil
}

// fanout: each node fetches each cell its needers lack once over the network, cut into
// one part per needer in the node, then the fetchers pass their parts to the node's
// other needers over NVLink (phase 1). Cells held in the node go over NVLink in phase 0.
func (b *builder) fanout(ctx context.Context) error {
	var group []int32
	for ci := range b.c.cells {
		if stop, err := b.stop(ctx, ci); stop {
			return err
		}
		cl := &b.c.cells[ci]
		needers := slices.Clone(cl.needers)
		slices.SortFunc(needers, func(x, y int32) int { return b.f.Node(int(x)) - b.f.Node(int(y)) })
		for i := 0; i < len(needers); {
			node := b.f.Node(int(needers[i]))
			j := i
			for j < len(needers) && b.f.Node(int(needers[j])) == node {
				j++
			}
			group = append(group[:0], needers[i:j]...)
			i = j
			if b.heldInNode(cl, node) {
				for _, d := range group {
					if h := b.holder(cl, d); h >= 0 {
						b.add(move{phase: 0, from: h, to: d, cell: int32(ci), parts: 1})
					}
				}
				continue
			}
			sd := cl.splitDim()
			parts := int32(min(int64(len(group)), cl.hi[sd]-cl.lo[sd]))
			for k := range parts {
				// The least loaded needer fetches, unless another device of the node
				// would still be less loaded after taking the part (its NIC is idle:
				// it fetches and forwards over NVLink).
				f := group[0]
				for _, d := range group[1:] {
					if b.nicIn[d] < b.nicIn[f] {
						f = d
					}
				}
				w := b.c.bytesOf(b.c.moveElems(move{cell: int32(ci), part: k, parts: parts}))
				lo, hi := node*b.f.GPUsPerNode, min((node+1)*b.f.GPUsPerNode, b.p.Devices)
				for d := lo; d < hi; d++ {
					if b.nicIn[d]+w <= b.nicIn[f] {
						f = int32(d)
					}
				}
				b.add(move{phase: 0, from: b.holder(cl, f), to: f, cell: int32(ci), part: k, parts: parts})
				for _, d := range group {
					if d != f {
						b.add(move{phase: 1, from: f, to: d, cell: int32(ci), part: k, parts: parts})
					}
				}
			}
		}
	}
	return nil
}

// spread: what a source node holds goes out through every NIC of the node, not only
// its holders': for each needer in another node, the device of the holder's node whose
// NIC has sent the least takes the cell from the holder over NVLink (phase 0, once per
// cell and device) and sends it (phase 1). Needers in a holder's node pull over NVLink.
func (b *builder) spread(ctx context.Context) error {
	have := map[int32]bool{}
	for ci := range b.c.cells {
		if stop, err := b.stop(ctx, ci); stop {
			return err
		}
		cl := &b.c.cells[ci]
		clear(have)
		for _, h := range cl.holders {
			have[h] = true
		}
		w := b.c.bytesOf(cl.elems)
		for _, d := range cl.needers {
			h := b.holder(cl, d)
			if h < 0 {
				continue
			}
			hn := b.f.Node(int(h))
			if hn == b.f.Node(int(d)) {
				b.add(move{phase: 0, from: h, to: d, cell: int32(ci), parts: 1})
				continue
			}
			// The relay: the least loaded NIC of the holder's node; a device without the
			// cell must be less loaded by the cell's bytes to be worth the NVLink copy.
			r := h
			lo, hi := hn*b.f.GPUsPerNode, min((hn+1)*b.f.GPUsPerNode, b.p.Devices)
			for x := lo; x < hi; x++ {
				cost := b.nicOut[x]
				if !have[int32(x)] {
					cost += w
				}
				if cost < b.nicOut[r] {
					r = int32(x)
				}
			}
			if !have[r] {
				b.add(move{phase: 0, from: h, to: r, cell: int32(ci), parts: 1})
				have[r] = true
			}
			b.add(move{phase: 1, from: r, to: d, cell: int32(ci), parts: 1})
		}
	}
	return nil
}

func (b *builder) heldInNode(cl *cell, node int) bool {
	for _, h := range cl.holders {
		if b.f.Node(int(h)) == node {
			return true
		}
	}
	return false
}

// relay: the first replica in b.order pulls directly (phase 0); replica order[i] copies
// from its parent's device at the same position: order[i-1] (chain) or order[(i-1)/2]
// (tree), in phase i (chain) or its depth (tree).
func (b *builder) relay(ctx context.Context, tree bool) error {
	for ci := range b.c.cells {
		if stop, err := b.stop(ctx, ci); stop {
			return err
		}
		cl := &b.c.cells[ci]
		for _, d := range cl.needers {
			i := b.rank[b.replica[d]]
			if i == 0 {
				if h := b.holder(cl, d); h >= 0 {
					b.add(move{phase: 0, from: h, to: d, cell: int32(ci), parts: 1})
				}
				continue
			}
			if slices.Contains(cl.holders, d) {
				continue
			}
			parent, phase := i-1, i
			if tree {
				parent, phase = (i-1)/2, depth(i)
			}
			from := b.p.Targets[b.order[parent]].Devices[b.position[d]]
			b.add(move{phase: int32(phase), from: int32(from), to: d, cell: int32(ci), parts: 1})
		}
	}
	return nil
}

// depth is node i's depth in the binary tree where i's parent is (i-1)/2.
func depth(i int) int {
	d := 0
	for i > 0 {
		i = (i - 1) / 2
		d++
	}
	return d
}
