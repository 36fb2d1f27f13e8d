package planner

import (
	"cmp"
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Halo exchanges (strategy xla on uneven dims).
//
// XLA pads every sharded dim to a multiple of its shard count, so a device's buffer is
// ceil(n/k) long whatever it holds. When a partially replicated tensor is sliced to a
// finer tiling (ReshardFromPartialReplicateWithDynamicSlice) or a tiled one is gathered
// to a coarser partially replicated tiling (ReshardToPartialReplicateWithAllGather), the
// padded tiles of the two sides need not nest: size 6 is 3+3 on 2 shards but 2+2+2+0
// (padded to 8) on 4. XLA then gives each shard a window of the dim padded for the
// other side (PadFromPartialReplicateShape: window i is [i*D, (i+1)*D), D the target
// tile times the expansion; TileToPartialReplicateHaloExchange: window i = g*f+k is
// [g*Q + k*S, g*Q + (k+1)*S), Q the target tile, S the source tile, f the factor) and
// fills it by exchanging halos with the other shards of the dim (ExchangeHaloCompact in
// spmd_partitioner_util.cc): every piece of a window that lies on another shard is sent
// by that shard, and the pieces are packed into collective-permutes in which every
// device sends at most one piece and receives at most one, each permute carrying one
// slice of the senders' buffers. The slice or all-gather that follows then reads the
// windows instead of the tiles.
//
// The emulation emits each of those collective-permutes as a collective_permute step
// whose Halo lists its transfers. Before and After of such a step are the same
// sharding: the receivers keep the pieces next to their tiles for the step that follows.

// Kinds of halo exchange (move.dim2 of an opHalo move).
const (
	haloPad    = iota // PadFromPartialReplicateShape, before a dynamic-slice
	haloGather        // TileToPartialReplicateHaloExchange, before an all-gather
)

// opHalo marks an emulation move that stands for a halo exchange along move.dim: before
// is the sharding it runs on, after the tiling it prepares (the slice's or the
// all-gather's result); steps() turns it into zero or more collective_permute steps.
const opHalo Op = "halo"

// haloWindows is the window every shard of one dim holds after a halo exchange.
type haloWindows struct {
	dim   int
	kind  int
	size  int64 // the dim's length
	shard int64 // S: the padded tile of the sharding the exchange runs on
	n, c  int   // shard counts of that sharding and of the other side
}

func newHaloWindows(sp *space, dim, kind int, before, after state) haloWindows {
	n, c := sp.count(before[dim]), sp.count(after[dim])
	return haloWindows{dim: dim, kind: kind, size: sp.shape[dim], shard: sharding.CeilDiv(sp.shape[dim], int64(n)), n: n, c: c}
}

// needed reports whether XLA exchanges halos at all: the target side's padded tiles
// per source shard are longer than the source's (pad), or the source's padded tiles per
// target shard are longer than the target's (gather).
func (w haloWindows) needed() bool {
	switch w.kind {
	case haloPad:
		return w.n > 1 && w.c > w.n && w.shard < w.length()
	default:
		q := sharding.CeilDiv(w.size, int64(w.c))
		return w.c > 1 && w.n > w.c && w.shard*int64(w.n/w.c) > q
	}
}

// length is the window's length: the buffer along the dim after the exchange.
func (w haloWindows) length() int64 {
	if w.kind == haloPad {
		return sharding.CeilDiv(w.size, int64(w.c)) * int64(w.c/w.n)
	}
	return w.shard
}

// window is shard i's window [lo, hi) in the padded dim.
func (w haloWindows) window(i int) (int64, int64) {
	if w.kind == haloPad {
		l := w.length()
		return int64(i) * l, int64(i+1) * l
	}
	f := w.n / w.c
	q := sharding.CeilDiv(w.size, int64(w.c))
	lo := int64(i/f)*q + int64(i%f)*w.shard
	return lo, lo + w.shard
}

// haloPiece is one piece of a window that lies on another shard: shard from sends
// [start, limit) of its buffer (offsets in its padded tile) to shard to, where it lands
// at offset of to's window.
type haloPiece struct {
	from, to     int
	start, limit int64
	offset       int64
}

// haloRound is one collective-permute: its pieces and the slice [lo, hi) of every
// sender's buffer it carries.
type haloRound struct {
	pieces []haloPiece
	lo, hi int64
}

// rounds packs the window pieces into collective-permutes as ExchangeHaloCompact does:
// each receiver's pieces in window order (pieces past the dim's end are padding, a
// receiver's own data is a local slice); each sender's pieces sorted by where they land
// in the receiver's window; then round after round every sender, in shard order, sends
// its next piece unless the receiver already gets one in this round, or the piece would
// pair a small left halo with a small right halo (which would widen the slice).
func (w haloWindows) rounds() []haloRound {
	type listed struct {
		pos   int
		piece haloPiece
	}
	var all []listed
	for i := range w.n {
		lo, hi := w.window(i)
		pos := 0
		for next := lo; next < hi; pos++ {
			if next >= w.size { // padding up to the window's end
				break
			}
			src := int(next / w.shard)
			off := next % w.shard
			sz := min(w.shard-off, hi-next)
			if src != i {
				all = append(all, listed{pos, haloPiece{from: src, to: i, start: off, limit: off + sz, offset: next - lo}})
			}
			next += sz
		}
	}
	// Round-robin order over the receivers' lists, then a stable sort per sender.
	slices.SortStableFunc(all, func(a, b listed) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return cmp.Compare(a.piece.to, b.piece.to)
	})
	bySender := make([][]haloPiece, w.n)
	for _, l := range all {
		bySender[l.piece.from] = append(bySender[l.piece.from], l.piece)
	}
	for _, ps := range bySender {
		slices.SortStableFunc(ps, func(a, b haloPiece) int { return cmp.Compare(a.offset, b.offset) })
	}
	next := make([]int, w.n)
	var out []haloRound
	for {
		rd := haloRound{lo: w.shard, hi: 0}
		seen := make([]bool, w.n)
		for src := range w.n {
			if next[src] >= len(bySender[src]) {
				continue
			}
			h := bySender[src][next[src]]
			if len(rd.pieces) > 0 && (seen[h.to] ||
				(rd.lo > h.limit && rd.hi == w.shard && h.start == 0) ||
				(rd.hi < h.start && rd.lo == 0 && h.limit == w.shard)) {
				continue
			}
			rd.pieces = append(rd.pieces, h)
			seen[h.to] = true
			rd.lo, rd.hi = min(rd.lo, h.start), max(rd.hi, h.limit)
			next[src]++
		}
		if len(rd.pieces) == 0 {
			return out
		}
		out = append(out, rd)
	}
}

// Halo is one collective-permute of a halo exchange along Dim (strategy xla on uneven
// dims): devices that differ only in their shard along Dim send each other slices of
// their padded buffers. A device sends at most one slice and receives at most one; the
// step's Before and After are the same sharding, and the receivers keep what they
// receive next to their tiles for the step that follows (a slice or an all-gather).
type Halo struct {
	// Dim is the tensor dim whose windows the exchange fills.
	Dim int

	layout   *sharding.Layout // the sharding the exchange runs on
	elemBits int
	refs     []sharding.AxisRef // the axes sharding Dim, major to minor
	byTo     []int              // per receiver shard: index into pieces, or -1
	pieces   []haloPiece
	win      haloWindows   // this exchange's windows
	prior    []haloWindows // earlier exchanges of the same run, on other dims
	bytes    int64         // what every sender sends
}

// BytesPerPair is what each sender sends: the permute's slice of its padded buffer.
func (h *Halo) BytesPerPair() int64 { return h.bytes }

func newHalo(l *sharding.Layout, elemBits int, w haloWindows, rd haloRound, prior []haloWindows) *Halo {
	h := &Halo{Dim: w.dim, layout: l, elemBits: elemBits, refs: l.Sharding.Dims[w.dim].Axes, pieces: rd.pieces, win: w, prior: prior}
	h.byTo = make([]int, w.n)
	for i := range h.byTo {
		h.byTo[i] = -1
	}
	for k, p := range rd.pieces {
		h.byTo[p.to] = k
	}
	elems := rd.hi - rd.lo
	for d := range l.Shape {
		if d != w.dim {
			elems *= h.extent(d)
		}
	}
	h.bytes = sharding.BufferBytes(elems, elemBits)
	return h
}

// extent is the buffer length along dim d (d != Dim): a window's after an earlier
// exchange of the run, else the padded tile.
func (h *Halo) extent(d int) int64 {
	for _, w := range h.prior {
		if w.dim == d {
			return w.length()
		}
	}
	return h.layout.Tile[d]
}

// held is the global range along d (d != Dim) of the buffer of a device whose shard
// along d is idx, and where the buffer starts.
func (h *Halo) held(d, idx int) (lo, hi, start int64) {
	n := h.layout.Shape[d]
	for _, w := range h.prior {
		if w.dim == d {
			s, e := w.window(idx)
			return min(s, n), min(e, n), s
		}
	}
	s, e := h.layout.Range(d, idx)
	return s, e, s
}

// Each calls yield with every transfer of the permute (receivers in mesh position
// order) until it returns false. Ranges are the valid data of the piece (the slice may
// extend into the padding); Bytes is the slice every sender sends.
func (h *Halo) Each(yield func(Transfer) bool) {
	l := h.layout
	m := l.Mesh
	rank := len(l.Shape)
	coords := make([]int, len(m.Axes))
	from := make([]int, len(m.Axes))
	for pos := range m.NumDevices() {
		m.Coords(pos, coords)
		b := l.ShardIndex(h.Dim, coords)
		k := h.byTo[b]
		if k < 0 {
			continue
		}
		p := h.pieces[k]
		copy(from, coords)
		setShardIndex(m, h.refs, from, p.from)
		t := Transfer{From: m.DeviceAt(m.PositionOfCoords(from)), To: m.DeviceAt(pos), Bytes: h.bytes,
			Ranges: make(Range, rank), SourceLocal: make(Range, rank), TargetLocal: make(Range, rank)}
		for d := range rank {
			if d == h.Dim {
				n := l.Shape[d]
				base := int64(p.from) * h.win.shard
				s, e := min(base+p.start, n), min(base+p.limit, n)
				t.Ranges[d] = [2]int64{s, e}
				t.SourceLocal[d] = [2]int64{s - base, e - base}
				t.TargetLocal[d] = [2]int64{p.offset, p.offset + e - s}
				continue
			}
			s, e, start := h.held(d, l.ShardIndex(d, coords))
			t.Ranges[d] = [2]int64{s, e}
			t.SourceLocal[d] = [2]int64{s - start, e - start}
			t.TargetLocal[d] = t.SourceLocal[d]
		}
		if !yield(t) {
			return
		}
	}
}

// Transfers lists the permute's transfers, sorted by receiver.
func (h *Halo) Transfers() []Transfer {
	var out []Transfer
	h.Each(func(t Transfer) bool { out = append(out, t); return true })
	slices.SortFunc(out, func(a, b Transfer) int { return cmp.Compare(a.To, b.To) })
	return out
}

// Pairs lists the permute's [from, to] device pairs, sorted by sender.
func (h *Halo) Pairs() [][2]int {
	var out [][2]int
	h.Each(func(t Transfer) bool { out = append(out, [2]int{t.From, t.To}); return true })
	slices.SortFunc(out, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	return out
}

// PairRuns is Pairs as runs (receivers in mesh position order); complete is false (and
// runs nil) when more than maxRuns would be needed.
func (h *Halo) PairRuns(maxRuns int) (runs []PairRun, complete bool) {
	b := pairRuns{max: maxRuns}
	h.Each(func(t Transfer) bool { return b.add(t.From, t.To) })
	return b.result()
}

// TransferRuns is the transfers as runs (receivers in mesh position order); complete
// is false (and runs nil) when more than maxRuns would be needed.
func (h *Halo) TransferRuns(maxRuns int) (runs []TransferRun, complete bool) {
	b := transferRuns{max: maxRuns}
	h.Each(b.add)
	return b.result()
}

// Count is the number of pairs (and transfers) of the permute.
func (h *Halo) Count() int {
	groups := h.layout.Mesh.NumDevices() / max(1, h.win.n)
	return groups * len(h.pieces)
}

// setShardIndex sets the digits of coords on refs (major to minor) to shard index idx.
func setShardIndex(m *sharding.Mesh, refs []sharding.AxisRef, coords []int, idx int) {
	for k := len(refs) - 1; k >= 0; k-- {
		r := refs[k]
		ai := m.AxisIndex(r.Name)
		digit := idx % r.Size
		idx /= r.Size
		coords[ai] += (digit - r.Coord(coords[ai])) * r.Minor()
	}
}

// haloSteps turns one halo exchange into its collective_permute steps (none when every
// window lies on its own shard and the padding). prior are the exchanges on other dims
// since the last other step.
func (e *xlaEmu) haloSteps(m move, w haloWindows, prior []haloWindows) []Step {
	sp, r := e.sp, e.r
	s := sp.sharding(m.before, m.unrBefore)
	l := sharding.NewLayout(r.Mesh, r.Shape, s)
	axes := sp.refs(sortedAtoms(sp, m.before[w.dim]))
	var out []Step
	for _, rd := range w.rounds() {
		h := newHalo(l, r.ElemBits, w, rd, prior)
		st := Step{Op: OpCollectivePermute, Dim: w.dim, SplitDim: -1, ConcatDim: -1, Before: s, After: s,
			LocalShapeBefore: localShape(r, s), LocalShapeAfter: localShape(r, s), MeshAxes: axes,
			BytesPerDevice: h.bytes, Halo: h, before: m.before, after: m.before}
		st.GroupSize = sharding.Product(axes)
		st.GroupCount = r.Mesh.NumDevices() / max(st.GroupSize, 1)
		st.Cost = priceHalo(r, h, axes)
		out = append(out, st)
	}
	return out
}

// priceHalo routes the permute's transfers when the model routes, else prices it as a
// collective_permute of its slice.
func priceHalo(r *Request, h *Halo, axes []sharding.AxisRef) cost.Estimate {
	tm, ok := r.Model.(trafficModel)
	if !ok {
		return r.Model.Estimate(cost.Collective{Kind: cost.CollectivePermute, Bytes: h.bytes, Mesh: r.Mesh, Axes: axes})
	}
	m := r.Mesh
	rt := r.watch(tm.AcquireRouter(r.Memos.costCaches(), m))
	defer rt.Release()
	return rt.Price(&cost.Traffic{Kind: cost.CollectivePermute, Mesh: m, Each: func(yield func(from, to []int, bytes int64) bool) {
		from := make([]int, len(m.Axes))
		to := make([]int, len(m.Axes))
		h.Each(func(t Transfer) bool {
			m.Coords(m.PositionOf(t.From), from)
			m.Coords(m.PositionOf(t.To), to)
			return yield(from, to, t.Bytes)
		})
	}}).Estimate
}
