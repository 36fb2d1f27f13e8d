package schedule

import (
	"fmt"
	"slices"
)

// The symbolic executor of the tests: every element of every buffer is a cell that
// knows its global index and which partial sums (bits of parts) it adds up. It runs a
// schedule as the package comment says a runtime does and fails on anything a real
// runtime would get wrong: a message nobody receives or that does not match its
// receive, an element written twice, a sum of different elements or of the same
// partial twice, an element of a new tile left unwritten.

// cell is one element: its global linear index (-1: unwritten) and its partial sums.
type cell struct {
	idx   int64
	parts uint64
}

// buf is a buffer holding the global box at.
type buf struct {
	at    Box
	cells []cell
}

func newBuf(at Box) *buf {
	b := &buf{at: at, cells: make([]cell, at.elems())}
	for i := range b.cells {
		b.cells[i].idx = -1
	}
	return b
}

// each calls fn with the position in b of every element of the local box lb, row-major.
func (b *buf) each(lb Box, fn func(pos int64)) error {
	for d := range lb {
		ext := b.at[d][1] - b.at[d][0]
		if lb[d][0] < 0 || lb[d][1] > ext || lb[d][0] > lb[d][1] {
			return fmt.Errorf("local box %v outside a buffer of %v", lb, b.at)
		}
	}
	if lb.empty() {
		return nil
	}
	idx := make([]int64, len(lb))
	for d := range lb {
		idx[d] = lb[d][0]
	}
	for {
		pos := int64(0)
		for d := range lb {
			pos = pos*(b.at[d][1]-b.at[d][0]) + idx[d]
		}
		fn(pos)
		d := len(lb) - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < lb[d][1] {
				break
			}
			idx[d] = lb[d][0]
			d--
		}
		if d < 0 {
			return nil
		}
	}
}

func (b *buf) read(lb Box) ([]cell, error) {
	var out []cell
	err := b.each(lb, func(pos int64) { out = append(out, b.cells[pos]) })
	return out, err
}

func (b *buf) write(lb Box, cs []cell, reduce bool) error {
	i := 0
	var bad error
	err := b.each(lb, func(pos int64) {
		c := &b.cells[pos]
		v := cs[i]
		i++
		switch {
		case bad != nil:
		case v.idx < 0:
			bad = fmt.Errorf("writes an unwritten element")
		case c.idx < 0:
			*c = v
		case !reduce:
			bad = fmt.Errorf("writes element %d twice", v.idx)
		case c.idx != v.idx:
			bad = fmt.Errorf("adds element %d to element %d", v.idx, c.idx)
		case c.parts&v.parts != 0:
			bad = fmt.Errorf("adds partial sums %b of element %d twice", c.parts&v.parts, v.idx)
		default:
			c.parts |= v.parts
		}
	})
	if err != nil {
		return err
	}
	return bad
}

// check reports the first element of b that is not global element of its place with
// parts want (want(-1) skips the parts).
func (b *buf) check(shape []int64, want uint64, checkParts bool) error {
	i := 0
	var bad error
	full := make(Box, len(b.at))
	for d := range full {
		full[d] = [2]int64{0, b.at[d][1] - b.at[d][0]}
	}
	idx := make([]int64, len(b.at))
	_ = b.each(full, func(pos int64) {
		// pos is row-major: recover the global index.
		p := pos
		for d := len(b.at) - 1; d >= 0; d-- {
			ext := b.at[d][1] - b.at[d][0]
			idx[d] = b.at[d][0] + p%ext
			p /= ext
		}
		g := int64(0)
		for d := range idx {
			g = g*shape[d] + idx[d]
		}
		c := b.cells[pos]
		switch {
		case bad != nil:
		case c.idx != g:
			bad = fmt.Errorf("element %v holds %d, want %d", idx, c.idx, g)
		case checkParts && c.parts != want:
			bad = fmt.Errorf("element %v adds partial sums %b, want %b", idx, c.parts, want)
		}
		i++
	})
	return bad
}

// fill is a buffer of at holding the global elements, each with parts.
func fill(at Box, shape []int64, parts uint64) *buf {
	b := newBuf(at)
	full := make(Box, len(at))
	for d := range full {
		full[d] = [2]int64{0, at[d][1] - at[d][0]}
	}
	idx := make([]int64, len(at))
	_ = b.each(full, func(pos int64) {
		p := pos
		for d := len(at) - 1; d >= 0; d-- {
			ext := at[d][1] - at[d][0]
			idx[d] = at[d][0] + p%ext
			p /= ext
		}
		g := int64(0)
		for d := range idx {
			g = g*shape[d] + idx[d]
		}
		b.cells[pos] = cell{idx: g, parts: parts}
	})
	return b
}

// state is one rank's buffers: by name, then index (tile and source per tensor: index 0).
type state map[bufKey]*buf

type bufKey struct {
	tensor int
	name   string
	index  int
}

type msgKey struct {
	from, to, tag int
	tensor        int
}

// resolve is the buffer an operation of tensor names and where its global box sits in
// that buffer's tensor: a fused part's target buffer is its fused tensor's, the box
// moved by the part's offset.
func resolve(s *Schedule, tensor int, name string, index int, global Box) (bufKey, Box) {
	if s.Kind != "transfer" || name != BufTarget || s.Tensors[tensor].Fused == nil {
		return bufKey{tensor, name, index}, global
	}
	f := s.Tensors[tensor].Fused
	return bufKey{f.Tensor, name, index}, shift(global, f.Dim, f.Offset)
}

// shift is b moved by off along dim.
func shift(b Box, dim int, off int64) Box {
	out := slices.Clone(b)
	out[dim] = [2]int64{b[dim][0] + off, b[dim][1] + off}
	return out
}

// runPhase runs one phase of s on states (rank -> state): pick gives each rank's part
// of it (nil: none).
func runPhase(s *Schedule, states map[int]state, pick func(r *Rank) *Phase) error {
	// Sends read the buffers as the phase began.
	msgs := map[msgKey][]cell{}
	old := map[int]state{}
	for i := range s.Ranks {
		r := &s.Ranks[i]
		ph := pick(r)
		if ph == nil {
			continue
		}
		st := states[r.Rank]
		old[r.Rank] = st
		for _, op := range ph.Ops {
			if op.Kind != OpSend {
				continue
			}
			key, global := resolve(s, op.Tensor, op.Src, op.SrcIndex, op.Global)
			b := st[key]
			if b == nil {
				return fmt.Errorf("rank %d phase %d: sends from %s[%d] of tensor %d, which it does not hold", r.Rank, ph.Phase, op.Src, op.SrcIndex, op.Tensor)
			}
			if !slices.Equal(local(global, b.at), op.SrcLocal) {
				return fmt.Errorf("rank %d phase %d: send of %v reads %v of a buffer at %v", r.Rank, ph.Phase, op.Global, op.SrcLocal, b.at)
			}
			cs, err := b.read(op.SrcLocal)
			if err != nil {
				return fmt.Errorf("rank %d phase %d: %w", r.Rank, ph.Phase, err)
			}
			if want := (int64(len(cs))*int64(s.Tensors[op.Tensor].ElemBits) + 7) / 8; op.Bytes != want {
				return fmt.Errorf("rank %d phase %d: send of %d elements says %d bytes, want %d", r.Rank, ph.Phase, len(cs), op.Bytes, want)
			}
			k := msgKey{r.Rank, op.Peer, op.Tag, op.Tensor}
			if _, dup := msgs[k]; dup {
				return fmt.Errorf("rank %d phase %d: two sends to %d with tag %d", r.Rank, ph.Phase, op.Peer, op.Tag)
			}
			msgs[k] = cs
		}
	}
	for i := range s.Ranks {
		r := &s.Ranks[i]
		ph := pick(r)
		if ph == nil {
			continue
		}
		st := old[r.Rank]
		next := state{}
		for k, b := range st {
			next[k] = b
		}
		for _, nb := range ph.NewBuffers {
			next[bufKey{nb.Tensor, nb.Name, nb.Index}] = newBuf(nb.Global)
		}
		if s.Kind == "reshard" && !ph.KeepsTile {
			next[bufKey{0, BufTile, 0}] = newBuf(ph.Tile)
		}
		for _, op := range ph.Ops {
			var cs []cell
			switch op.Kind {
			case OpSend:
				continue
			case OpRecv:
				k := msgKey{op.Peer, r.Rank, op.Tag, op.Tensor}
				m, ok := msgs[k]
				if !ok {
					return fmt.Errorf("rank %d phase %d: receives from %d tag %d, which sends nothing", r.Rank, ph.Phase, op.Peer, op.Tag)
				}
				delete(msgs, k)
				cs = m
			case OpCopy:
				src := next
				if op.Src == BufTile || op.Src == BufHalo {
					src = st // a reshard's copy reads the tile and pieces of the phase's start
				}
				key, global := resolve(s, op.Tensor, op.Src, op.SrcIndex, op.Global)
				b := src[key]
				if b == nil {
					return fmt.Errorf("rank %d phase %d: copies from %s[%d], which it does not hold", r.Rank, ph.Phase, op.Src, op.SrcIndex)
				}
				if !slices.Equal(local(global, b.at), op.SrcLocal) {
					return fmt.Errorf("rank %d phase %d: copy of %v reads %v of a buffer at %v", r.Rank, ph.Phase, op.Global, op.SrcLocal, b.at)
				}
				var err error
				if cs, err = b.read(op.SrcLocal); err != nil {
					return fmt.Errorf("rank %d phase %d: %w", r.Rank, ph.Phase, err)
				}
			default:
				return fmt.Errorf("rank %d: unknown op %q", r.Rank, op.Kind)
			}
			key, global := resolve(s, op.Tensor, op.Dst, op.DstIndex, op.Global)
			d := next[key]
			if d == nil {
				return fmt.Errorf("rank %d phase %d: writes %s[%d], which it does not hold", r.Rank, ph.Phase, op.Dst, op.DstIndex)
			}
			if !slices.Equal(local(global, d.at), op.DstLocal) {
				return fmt.Errorf("rank %d phase %d: %s of %v writes %v of a buffer at %v", r.Rank, ph.Phase, op.Kind, op.Global, op.DstLocal, d.at)
			}
			if int64(len(cs)) != op.Global.elems() {
				return fmt.Errorf("rank %d phase %d: %s of %v brings %d elements", r.Rank, ph.Phase, op.Kind, op.Global, len(cs))
			}
			if err := d.write(op.DstLocal, cs, op.Reduce); err != nil {
				return fmt.Errorf("rank %d phase %d: %s %v from %d: %w", r.Rank, ph.Phase, op.Kind, op.Global, op.Peer, err)
			}
		}
		if s.Kind == "reshard" && !ph.Halo {
			for k := range next {
				if k.name == BufHalo {
					delete(next, k)
				}
			}
		}
		states[r.Rank] = next
	}
	for k := range msgs {
		return fmt.Errorf("phase: rank %d's message to %d (tag %d) is never received", k.from, k.to, k.tag)
	}
	return nil
}
