// Package schedule turns a plan into what every rank runs: per rank, its ordered
// operations phase by phase (and bucket by bucket for a transfer). A reshard plan's
// step becomes one phase; a transfer's moves become one phase per transfer phase in
// every bucket.
//
// # Operations
//
//	send  the piece Global of a buffer (Src, SrcIndex, at SrcLocal) to Peer
//	recv  the piece Global from Peer into a buffer (Dst, DstIndex, at DstLocal),
//	      added to what is there when Reduce
//	copy  a piece from one local buffer to another
//
// Ranges are per-dim [start, end): Global in the tensor, the local ones in the buffer
// (a tile's local ranges count from the tile's first element; its padding is at the
// end, so they are also offsets into a padded buffer). Bytes is the piece's size;
// Offset is where it sits in the rank's packed send (or receive) staging area of the
// phase, the operations of one kind laid end to end in list order. Tag numbers the
// messages between one sender and one receiver in a phase, in order.
//
// # Buffers
//
//	tile    (reshard) the rank's tile: a source reads the tile held when the phase
//	        began, a destination writes the phase's new tile (Phase.Tile), which
//	        starts zeroed; a phase that KeepsTile leaves the tile as it was
//	halo    (reshard) a piece a halo exchange brought (DstIndex numbers them per
//	        rank); the pieces live until the end of the next phase that is not a
//	        halo exchange
//	source  (transfer) the rank's source tile of a tensor
//	target  (transfer) the rank's target tile of a tensor in target placement
//	        DstIndex, zeroed at the start. A part of a fused target has none: its
//	        operations on "target" read and write the fused tensor's target buffer
//	        (Tensor.Fused), their Global ranges the part's own, their local ranges
//	        inside the fused tile (the part's index plus Offset along Dim, minus the
//	        tile's start)
//	stage   (transfer) a piece received to be forwarded (DstIndex numbers them per
//	        rank and tensor); it lives until the transfer ends
//
// # Running a phase
//
// Every send of a phase reads the buffers as they were when the phase began; then every
// receive completes; then the receives and copies are applied in list order (a copy
// after a receive may read what it brought). A runtime may post all of a phase's
// messages at once; within a pair of ranks they match by Tag.
package schedule

import (
	"fmt"
	"slices"
)

// Buffer names.
const (
	BufTile   = "tile"
	BufHalo   = "halo"
	BufSource = "source"
	BufTarget = "target"
	BufStage  = "stage"
)

// Operation kinds.
const (
	OpSend = "send"
	OpRecv = "recv"
	OpCopy = "copy"
)

// Box is a per-dim [start, end) range.
type Box [][2]int64

// Op is one operation of a rank.
type Op struct {
	Kind     string `json:"op" enums:"send,recv,copy"`
	Peer     int    `json:"peer"` // -1 for a copy
	Tensor   int    `json:"tensor"`
	Global   Box    `json:"global"`
	Src      string `json:"src,omitempty"`
	SrcIndex int    `json:"src_index,omitempty"`
	SrcLocal Box    `json:"src_local,omitempty"`
	Dst      string `json:"dst,omitempty"`
	DstIndex int    `json:"dst_index,omitempty"`
	DstLocal Box    `json:"dst_local,omitempty"`
	Reduce   bool   `json:"reduce,omitempty"`
	Bytes    int64  `json:"bytes"`
	Offset   int64  `json:"offset"`
	Tag      int    `json:"tag"`
}

// Phase is one rank's part of one phase.
type Phase struct {
	Phase  int `json:"phase"`
	Bucket int `json:"bucket"`
	// Collective is the reshard step's op (slice, all_gather, ...), empty for a transfer.
	Collective string `json:"collective,omitempty"`
	// Halo marks a collective_permute that exchanges halos.
	Halo bool `json:"halo,omitempty"`
	// Dims are the step's tensor dims (slice: the dims sliced; all_gather,
	// reduce_scatter, halo: the dim; all_to_all: split then concat).
	Dims []int `json:"dims,omitempty"`
	// Group is the rank's collective group, its members in group order (all_gather,
	// all_to_all, reduce_scatter, all_reduce); empty for slices, permutes and
	// all_to_all_v, whose peers are in the operations.
	Group []int `json:"group,omitempty"`
	// Tile is the rank's tile (global ranges) after the phase (reshard).
	Tile      Box  `json:"tile,omitempty"`
	KeepsTile bool `json:"keeps_tile,omitempty"`
	// NewBuffers are the buffers the phase's receives create (halo and stage pieces),
	// zeroed at its start.
	NewBuffers []Buffer `json:"new_buffers,omitempty"`
	Ops        []Op     `json:"ops"`
}

// Buffer is a buffer a rank holds from the start: its tile in a reshard, its source and
// target tiles of every tensor in a transfer.
type Buffer struct {
	Tensor int    `json:"tensor"`
	Name   string `json:"buffer"`
	Index  int    `json:"index"`
	Global Box    `json:"global"`
}

// Rank is one rank's schedule.
type Rank struct {
	Rank    int      `json:"rank"`
	Buffers []Buffer `json:"buffers"`
	Phases  []Phase  `json:"phases"`
}

// Tensor is one tensor a transfer schedule moves, or a fused target tensor its parts
// are moved into.
type Tensor struct {
	Name     string  `json:"name"`
	Shape    []int64 `json:"shape"`
	ElemBits int     `json:"elem_bits"`
	Bucket   int     `json:"bucket"`
	Bytes    int64   `json:"bytes"`
	// Fused (a part of a fused target) places the tensor in the fused tensor
	// Fused.Tensor: its target buffers are that tensor's.
	Fused *FusedIn `json:"fused,omitempty"`
	// Parts (a fused target) are the tensors concatenated into it, in order; it has
	// target buffers only and no operations of its own.
	Parts []int `json:"parts,omitempty"`
}

// FusedIn is where a part sits in its fused tensor: at [Offset, Offset+Shape[Dim]) of
// dim Dim.
type FusedIn struct {
	Tensor int   `json:"tensor"`
	Dim    int   `json:"dim"`
	Offset int64 `json:"offset"`
}

// Schedule is every rank's schedule.
type Schedule struct {
	Kind    string   `json:"kind" enums:"reshard,transfer"`
	Phases  int      `json:"phases"`
	Buckets int      `json:"buckets"`
	Tensors []Tensor `json:"tensors"`
	Ranks   []Rank   `json:"ranks"`
}

// Ops counts every operation of s.
func (s *Schedule) Ops() int {
	n := 0
	for _, r := range s.Ranks {
		for _, p := range r.Phases {
			n += len(p.Ops)
		}
	}
	return n
}

// Error says why a plan has no schedule.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func errorf(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

// elems is the number of elements of b (0 when empty).
func (b Box) elems() int64 {
	n := int64(1)
	for _, r := range b {
		n *= max(0, r[1]-r[0])
	}
	return n
}

func (b Box) empty() bool { return b.elems() == 0 }

// intersect is a ∩ b (possibly empty).
func intersect(a, b Box) Box {
	out := make(Box, len(a))
	for d := range a {
		out[d] = [2]int64{max(a[d][0], b[d][0]), min(a[d][1], b[d][1])}
		if out[d][0] > out[d][1] {
			out[d][1] = out[d][0]
		}
	}
	return out
}

// contains reports whether b lies in a.
func contains(a, b Box) bool {
	for d := range a {
		if b[d][0] < a[d][0] || b[d][1] > a[d][1] {
			return false
		}
	}
	return true
}

// subtract is a minus b as disjoint boxes.
func subtract(a, b Box) []Box {
	in := intersect(a, b)
	if in.empty() {
		return []Box{a}
	}
	var out []Box
	rest := slices.Clone(a)
	for d := range a {
		if rest[d][0] < in[d][0] {
			p := slices.Clone(rest)
			p[d] = [2]int64{rest[d][0], in[d][0]}
			out = append(out, p)
		}
		if in[d][1] < rest[d][1] {
			p := slices.Clone(rest)
			p[d] = [2]int64{in[d][1], rest[d][1]}
			out = append(out, p)
		}
		rest[d] = in[d]
	}
	return out
}

// local is g in the coordinates of a buffer holding at: g minus at's start.
func local(g, at Box) Box {
	out := make(Box, len(g))
	for d := range g {
		out[d] = [2]int64{g[d][0] - at[d][0], g[d][1] - at[d][0]}
	}
	return out
}

// holding is a buffer of a rank that may give data: where it sits.
type holding struct {
	rank   int
	buf    string
	index  int
	global Box // what it gives
	at     Box // where its buffer sits (nil: global)
}

// origin is where h's buffer sits.
func (h holding) origin() Box {
	if h.at != nil {
		return h.at
	}
	return h.global
}

// piece is part of a wanted box and the holding it comes from.
type piece struct {
	from holding
	box  Box
}

// cover splits want into pieces from the first holdings that hold them, in order; ok
// is false when some part is held by none.
func cover(want Box, from []holding) (pieces []piece, ok bool) {
	if want.empty() {
		return nil, true
	}
	rest := []Box{want}
	for _, h := range from {
		if len(rest) == 0 {
			break
		}
		var next []Box
		for _, r := range rest {
			in := intersect(r, h.global)
			if in.empty() {
				next = append(next, r)
				continue
			}
			pieces = append(pieces, piece{from: h, box: in})
			next = append(next, subtract(r, in)...)
		}
		rest = next
	}
	return pieces, len(rest) == 0
}

// builder collects the operations of one phase for every rank.
type builder struct {
	bits    int
	tensor  int
	ops     map[int][]Op
	sendOff map[int]int64
	recvOff map[int]int64
	tags    map[[2]int]int
}

func newBuilder(bits, tensor int) *builder {
	return &builder{bits: bits, tensor: tensor, ops: map[int][]Op{}, sendOff: map[int]int64{}, recvOff: map[int]int64{}, tags: map[[2]int]int{}}
}

// bytes is the size of n elements.
func (b *builder) bytes(n int64) int64 { return (n*int64(b.bits) + 7) / 8 }

// move moves piece p to rank to's buffer dst (index di, holding at), added when reduce:
// a copy when p's holder is to, else a send and a receive.
func (b *builder) move(p piece, to int, dst string, di int, at Box, reduce bool) {
	n := b.bytes(p.box.elems())
	src := p.from
	if src.rank == to {
		b.ops[to] = append(b.ops[to], Op{Kind: OpCopy, Peer: -1, Tensor: b.tensor, Global: p.box,
			Src: src.buf, SrcIndex: src.index, SrcLocal: local(p.box, src.origin()),
			Dst: dst, DstIndex: di, DstLocal: local(p.box, at), Reduce: reduce, Bytes: n})
		return
	}
	k := [2]int{src.rank, to}
	tag := b.tags[k]
	b.tags[k]++
	b.ops[src.rank] = append(b.ops[src.rank], Op{Kind: OpSend, Peer: to, Tensor: b.tensor, Global: p.box,
		Src: src.buf, SrcIndex: src.index, SrcLocal: local(p.box, src.origin()), Bytes: n, Offset: b.sendOff[src.rank], Tag: tag})
	b.sendOff[src.rank] += n
	b.ops[to] = append(b.ops[to], Op{Kind: OpRecv, Peer: src.rank, Tensor: b.tensor, Global: p.box,
		Dst: dst, DstIndex: di, DstLocal: local(p.box, at), Reduce: reduce, Bytes: n, Offset: b.recvOff[to], Tag: tag})
	b.recvOff[to] += n
}
