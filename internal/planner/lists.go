package planner

import (
	"cmp"
	"context"
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Range is a global or local [start, end) per dim.
type Range [][2]int64

// Transfer is one point-to-point move: the global ranges that go from device From to
// device To, and where they sit in the sender's and the receiver's local buffers.
type Transfer struct {
	From        int   `json:"from"`
	To          int   `json:"to"`
	Ranges      Range `json:"ranges"`
	SourceLocal Range `json:"source_local"`
	TargetLocal Range `json:"target_local"`
	Bytes       int64 `json:"bytes"`
}

// Pairs lists, for a collective_permute between before and after (equal shard counts
// per dim), the [from, to] device pairs: every device receives its new tile from one
// holder ([id, id] when it holds it already), and no device sends twice. The holders
// are the pattern's (pattern.go), so these are the transfers the cost model routes.
// Sorted by receiver. Cost: O(devices x rank).
func Pairs(m *sharding.Mesh, shape []int64, before, after sharding.Sharding) [][2]int {
	sp, ok := newSpace(m, shape, 8, before, after)
	if !ok {
		return pairsByScan(m, shape, before, after)
	}
	p := newPattern(sp, sp.stateOf(before), sp.stateOf(after), true, 1)
	if dp, ok := p.digitPermutation(); ok {
		return pairsByDigits(m, dp)
	}
	return pairsByPattern(m, p)
}

// pairsByPattern is Pairs from the pattern's walk, every device's transfer in turn.
func pairsByPattern(m *sharding.Mesh, p *pattern) [][2]int {
	p.withOwn = true
	out := make([][2]int, 0, m.NumDevices())
	p.eachDevice(func(from, to int, _ int64) bool {
		if p.curMine {
			from = to
		}
		out = append(out, [2]int{m.DeviceAt(from), m.DeviceAt(to)})
		return true
	})
	return ByColumn(out, 1)
}

// pairsByDigits is Pairs when the pattern is the digit permutation dp
// (pattern.digitPermutation): the holder of every receiver is the receiver with digit k
// replaced by its digit Src[k], without walking tiles (TestPairsByDigitsMatchThePattern).
func pairsByDigits(m *sharding.Mesh, dp cost.DigitPermutation) [][2]int {
	n := m.NumDevices()
	out := make([][2]int, n)
	coords := make([]int, len(m.Axes))
	digit := make([]int, len(dp.Digits))
	for pos := range n {
		m.Coords(pos, coords)
		for k, dg := range dp.Digits {
			digit[k] = coords[dg.Axis] / dg.Weight % dg.Size
		}
		for k, dg := range dp.Digits {
			coords[dg.Axis] += (digit[dp.Src[k]] - digit[k]) * dg.Weight
		}
		to := m.DeviceAt(pos)
		out[to] = [2]int{m.DeviceAt(m.PositionOfCoords(coords)), to}
	}
	return out
}

// ByColumn orders pairs by their column c (0 the sender, 1 the receiver). When that
// column is a permutation of 0..len-1 (every device once, as in a collective_permute's
// pairs) each pair is put in place in one pass; otherwise they are sorted, stably. The
// result may reuse pairs' array.
func ByColumn(pairs [][2]int, c int) [][2]int {
	n := len(pairs)
	placed := make([][2]int, n)
	seen := make([]bool, n)
	for _, pr := range pairs {
		k := pr[c]
		if k < 0 || k >= n || seen[k] {
			slices.SortStableFunc(pairs, func(a, b [2]int) int { return cmp.Compare(a[c], b[c]) })
			return pairs
		}
		seen[k] = true
		placed[k] = pr
	}
	return placed
}

// pairsByScan is Pairs for shardings that fit no common atom space: holders in device
// order, each sending once.
func pairsByScan(m *sharding.Mesh, shape []int64, before, after sharding.Sharding) [][2]int {
	lb := sharding.NewLayout(m, shape, before)
	la := sharding.NewLayout(m, shape, after)
	n := m.NumDevices()
	key := func(l *sharding.Layout, coords []int) string {
		b := make([]byte, 0, 8*len(shape))
		for d := range shape {
			v := l.ShardIndex(d, coords)
			b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		}
		return string(b)
	}
	holders := map[string][]int{}
	coords := make([]int, len(m.Axes))
	needs := make([]string, n)
	for pos := range n {
		m.Coords(pos, coords)
		id := m.DeviceAt(pos)
		holders[key(lb, coords)] = append(holders[key(lb, coords)], id)
		needs[id] = key(la, coords)
	}
	sent := make([]bool, n)
	from := make([]int, n)
	for i := range from {
		from[i] = -1
	}
	// Keep in place first.
	for pos := range n {
		m.Coords(pos, coords)
		id := m.DeviceAt(pos)
		if key(lb, coords) == needs[id] {
			from[id], sent[id] = id, true
		}
	}
	next := map[string]int{}
	for id := range n {
		if from[id] >= 0 {
			continue
		}
		hs := holders[needs[id]]
		for i := next[needs[id]]; i < len(hs); i++ {
			if !sent[hs[i]] {
				from[id], sent[hs[i]] = hs[i], true
				next[needs[id]] = i + 1
				break
			}
		}
	}
	out := make([][2]int, 0, n)
	for id := range n {
		if from[id] >= 0 {
			out = append(out, [2]int{from[id], id})
		}
	}
	return out
}

// Transfers lists, for every device, where each part of its tile in `after` comes from:
// the part it holds in `before` stays (not listed); every other part comes from one
// holder of the source tile that contains it, chosen as the pattern does (pattern.go;
// nearest: newPatternHolders' nearest holders, as Step.NearestHolders says), so these
// are the transfers the cost model routes. Ranges
// are global; SourceLocal and TargetLocal are the same data in the sender's and
// receiver's buffers. Sorted by receiver, then by range.
// Cost: O(devices x source tiles intersecting a target tile x rank); TransferCount
// (listsize.go) bounds its length beforehand.
func Transfers(m *sharding.Mesh, shape []int64, elemBits int, before, after sharding.Sharding, nearest bool) []Transfer {
	out, _ := TransfersContext(context.Background(), m, shape, elemBits, before, after, nearest)
	return out
}

// transferSlab is how many transfers' range lists eachTransfer allocates at once.
const transferSlab = 256

// ctxCheckEvery is how many transfers are built between two checks of the context.
const ctxCheckEvery = 1024

// TransfersContext is Transfers that stops with ctx's error once ctx is done (checked
// every ctxCheckEvery transfers, and per device).
func TransfersContext(ctx context.Context, m *sharding.Mesh, shape []int64, elemBits int, before, after sharding.Sharding, nearest bool) ([]Transfer, error) {
	var out []Transfer
	if n := TransferCount(m, shape, before, after); n > 0 {
		out = make([]Transfer, 0, min(n, 1<<21)) // at most a few too many: the kept tiles
	}
	if err := eachTransfer(ctx, m, shape, elemBits, before, after, nearest, true, func(t Transfer) bool {
		out = append(out, t)
		return true
	}); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return byReceiver(out, m.NumDevices()), nil
}

// byReceiver orders ts (receivers below n) by receiver, then by their ranges' starts:
// a stable counting sort by receiver, then each receiver's transfers (a few) by
// insertion. A comparison sort of the whole list took a fifth of the render of
// testgen.RandomSet. Two transfers to one receiver never start at the
// same place (they come from distinct source tiles, which do not overlap), so the order
// is total. The result may reuse ts' array.
func byReceiver(ts []Transfer, n int) []Transfer {
	start := make([]int32, n+1)
	sorted := true
	for i := range ts {
		start[ts[i].To+1]++
		sorted = sorted && (i == 0 || ts[i-1].To <= ts[i].To)
	}
	out := ts
	if !sorted {
		for d := 1; d <= n; d++ {
			start[d] += start[d-1]
		}
		out = make([]Transfer, len(ts))
		next := start[:n]
		for _, t := range ts {
			out[next[t.To]] = t
			next[t.To]++
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j-1].To == out[j].To && rangesBefore(out[j].Ranges, out[j-1].Ranges); j-- {
			out[j-1], out[j] = out[j], out[j-1]
		}
	}
	return out
}

// rangesBefore reports whether a's starts come before b's, dim by dim.
func rangesBefore(a, b Range) bool {
	for d := range a {
		if a[d][0] != b[d][0] {
			return a[d][0] < b[d][0]
		}
	}
	return false
}

// eachTransfer calls fn with every transfer of the exchange from before to after, in
// the pattern's order (receivers by atom digits), until fn returns false; it stops with
// ctx's error once ctx is done. fn may keep the transfer when keep is set; otherwise
// its range lists are reused for the next one (a consumer that keeps few of millions,
// TransferRunsContext, clones those).
func eachTransfer(ctx context.Context, m *sharding.Mesh, shape []int64, elemBits int, before, after sharding.Sharding, nearest, keep bool, fn func(Transfer) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sp, ok := newSpace(m, shape, elemBits, before, after)
	if !ok {
		list, err := transfersByHolder(ctx, m, shape, elemBits, before, after)
		for _, t := range list {
			if !fn(t) {
				break
			}
		}
		return err
	}
	lb := sharding.NewLayout(m, shape, before)
	la := sharding.NewLayout(m, shape, after)
	rank := len(shape)
	p := newPatternHolders(sp, sp.stateOf(before), sp.stateOf(after), false, 0, nearest)
	var err error
	n := 0
	var slab Range // the three range lists of transfers to come, carved in turn
	next := 8      // transfers in the next slab: doubling up to transferSlab
	p.eachDevice(func(from, to int, bytes int64) bool {
		if n++; n%ctxCheckEvery == 0 {
			if err = ctx.Err(); err != nil {
				return false
			}
		}
		if len(slab) < 3*rank {
			slab = make(Range, 3*rank*next)
			next = min(2*next, transferSlab)
		}
		t := Transfer{From: m.DeviceAt(from), To: m.DeviceAt(to), Bytes: bytes,
			Ranges: slab[:rank:rank], SourceLocal: slab[rank : 2*rank : 2*rank], TargetLocal: slab[2*rank : 3*rank : 3*rank]}
		if keep {
			slab = slab[3*rank:]
		}
		for d := range rank {
			ss, se := lb.Range(d, int(p.curS[d]))
			ts, te := la.Range(d, int(p.curT[d]))
			s, e := max(ss, ts), min(se, te)
			t.Ranges[d] = [2]int64{s, e}
			t.SourceLocal[d] = [2]int64{s - ss, e - ss}
			t.TargetLocal[d] = [2]int64{s - ts, e - ts}
		}
		return fn(t)
	})
	return err
}

// transfersByHolder is Transfers for shardings that fit no common atom space: the
// holder with the receiver's coordinates on the axes `before` replicates.
func transfersByHolder(ctx context.Context, m *sharding.Mesh, shape []int64, elemBits int, before, after sharding.Sharding) ([]Transfer, error) {
	lb := sharding.NewLayout(m, shape, before)
	la := sharding.NewLayout(m, shape, after)
	rank := len(shape)
	n := m.NumDevices()
	coords := make([]int, len(m.Axes))
	var out []Transfer
	for id := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.Coords(m.PositionOf(id), coords)
		tgt := la.TileOf(id)
		// Per dim, the source shard indices whose ranges meet the target range.
		lo := make([]int, rank)
		hi := make([]int, rank)
		empty := false
		for d := range rank {
			s, e := tgt.Ranges[d][0], tgt.Ranges[d][1]
			if s >= e {
				empty = true
				break
			}
			lo[d] = int(s / lb.Tile[d])
			hi[d] = int((e - 1) / lb.Tile[d])
		}
		if empty {
			continue
		}
		idx := make([]int, rank)
		copy(idx, lo)
		for {
			// Box of source shard idx intersected with the target tile.
			box := make(Range, rank)
			sameAsOwn := true
			elems := int64(1)
			for d := range rank {
				s, e := lb.Range(d, idx[d])
				s, e = max(s, tgt.Ranges[d][0]), min(e, tgt.Ranges[d][1])
				box[d] = [2]int64{s, e}
				elems *= max(0, e-s)
				sameAsOwn = sameAsOwn && lb.ShardIndex(d, coords) == idx[d]
			}
			if elems > 0 && !sameAsOwn {
				sender := holderOf(m, lb, idx, coords)
				t := Transfer{From: sender, To: id, Ranges: box, SourceLocal: make(Range, rank), TargetLocal: make(Range, rank), Bytes: sharding.BufferBytes(elems, elemBits)}
				for d := range rank {
					ss := int64(idx[d]) * lb.Tile[d]
					t.SourceLocal[d] = [2]int64{box[d][0] - ss, box[d][1] - ss}
					t.TargetLocal[d] = [2]int64{box[d][0] - tgt.Ranges[d][0], box[d][1] - tgt.Ranges[d][0]}
				}
				out = append(out, t)
			}
			d := rank - 1
			for d >= 0 {
				idx[d]++
				if idx[d] <= hi[d] {
					break
				}
				idx[d] = lo[d]
				d--
			}
			if d < 0 {
				break
			}
		}
	}
	return out, nil
}

// holderOf finds the device holding source shard idx (per dim) whose coordinates on the
// axes not fixed by the shard index equal like's.
func holderOf(m *sharding.Mesh, l *sharding.Layout, idx []int, like []int) int {
	c := append([]int(nil), like...)
	// Clear the digits the sharding fixes, then set them from idx.
	for d, ds := range l.Sharding.Dims {
		v := idx[d]
		for k := len(ds.Axes) - 1; k >= 0; k-- {
			r := ds.Axes[k]
			ai := m.AxisIndex(r.Name)
			digit := v % r.Size
			v /= r.Size
			cur := r.Coord(c[ai])
			c[ai] += (digit - cur) * r.Minor()
		}
	}
	return m.DeviceAt(m.PositionOfCoords(c))
}
