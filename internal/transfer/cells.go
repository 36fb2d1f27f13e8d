package transfer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// class is the tensors of one shape, element width and sharding pair: they share cells
// and moves.
type class struct {
	key      string
	shape    []int64
	elemBits int
	// moveBits are the bits a moved element takes (the source's, or the target's with
	// its scales when the sender casts); dstBits a target tile's element.
	moveBits, dstBits float64
	source            sharding.Sharding
	target            sharding.Sharding
	tensors           []int // indices into Problem.Tensors
	count             int   // tensors it stands for
	cells             []cell
	// srcTile and dstTile are one device's padded tile bytes under each sharding.
	srcTile, dstTile int64
	// fused places the class's tensors inside a fused target tensor (nil: none).
	fused *FusedPart
}

// cell is a box of the tensor inside one source tile and one target tile.
type cell struct {
	lo, hi  []int64
	elems   int64
	holders []int32 // global ids of source devices holding it
	needers []int32 // global ids of target devices (every replica) needing it
}

// maxCellsPerClass bounds one class's cells (a request over it is a limit error).
const maxCellsPerClass = 1 << 20

// maxCells is the cells every class together may have.
func (p *Problem) maxCells() int {
	if p.MaxCells > 0 {
		return p.MaxCells
	}
	return DefaultMaxCells
}

// bytesOf is the size of n elements of the class's dtype.
func (c *class) bytesOf(n int64) float64 { return float64(n) * c.moveBits / 8 }

// classes groups p's tensors by shape, width and shardings.
func (p *Problem) classes() []*class {
	byKey := map[string]*class{}
	var out []*class
	for i := range p.Tensors {
		t := &p.Tensors[i]
		key := fmt.Sprint(t.Shape, t.ElemBits, "|", t.Source.Body(), "|", t.Target.Body(), "|", t.TargetBits, t.ScaleBits, t.CastAfter)
		if f := t.Fused; f != nil {
			key += fmt.Sprint("|fused", f.Shape, f.Dim, f.Offset)
		}
		c := byKey[key]
		if c == nil {
			c = &class{key: key, shape: t.Shape, elemBits: t.ElemBits, source: t.Source, target: t.Target,
				moveBits: float64(t.ElemBits), dstBits: float64(t.ElemBits), fused: t.Fused}
			if t.TargetBits > 0 {
				c.dstBits = float64(t.TargetBits) + t.ScaleBits
				if !t.CastAfter {
					c.moveBits = c.dstBits
				}
			}
			byKey[key] = c
			out = append(out, c)
		}
		c.tensors = append(c.tensors, i)
		c.count += t.Count
	}
	return out
}

// build computes c's cells on p's placements, counted before they are made and charged
// to budget (the cells every class may still have).
func (c *class) build(ctx context.Context, p *Problem, field string, budget *int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	src := sharding.NewLayout(p.Source.Mesh, c.shape, c.source)
	// A fused part's target tiling is the fused tensor's, seen from the part: target
	// index x of the part is fused index x+off[d].
	dstShape, off := c.shape, make([]int64, len(c.shape))
	if f := c.fused; f != nil {
		dstShape = f.Shape
		off[f.Dim] = f.Offset
	}
	dst := sharding.NewLayout(p.Targets[0].Mesh, dstShape, c.target)
	c.srcTile = sharding.BufferBytes(src.TileElements(), c.elemBits)
	dstElems := float64(dst.TileElements())
	if f := c.fused; f != nil {
		// The part's share of the fused tile.
		dstElems = dstElems * float64(c.shape[f.Dim]) / float64(f.Shape[f.Dim])
	}
	c.dstTile = int64(math.Ceil(dstElems * c.dstBits / 8))
	rank := len(c.shape)
	// Per dim, the cut points of both tilings.
	cuts := make([][]int64, rank)
	n := int64(1)
	for d := range rank {
		pts := []int64{0, c.shape[d]}
		for i := range src.Counts[d] {
			s, _ := src.Range(d, i)
			pts = append(pts, s)
		}
		for i := range dst.Counts[d] {
			s, _ := dst.Range(d, i)
			pts = append(pts, min(max(s-off[d], 0), c.shape[d]))
		}
		slices.Sort(pts)
		pts = slices.Compact(pts)
		cuts[d] = pts
		n *= int64(max(len(pts)-1, 1))
		if n > maxCellsPerClass {
			return limitErrorf(field, "the source and target tilings cut this tensor into more than %d boxes; plan fewer shards per dim", maxCellsPerClass)
		}
	}
	if *budget -= int(n); *budget < 0 {
		return limitErrorf("tensors", "the tensor groups are cut into more than %d boxes together; move fewer distinct tensors (shape, dtype, shardings) per request", p.maxCells())
	}
	c.cells = make([]cell, 0, n)
	// Shard index tuples -> devices.
	holders := shardDevices(src, p.Source.Devices, nil)
	needers := map[string][]int32{}
	for _, t := range p.Targets {
		shardDevices(dst, t.Devices, needers)
	}
	idx := make([]int, rank)
	si := make([]int, rank)
	ti := make([]int, rank)
	for k := int64(0); ; k++ {
		if k&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		lo, hi := make([]int64, rank), make([]int64, rank)
		elems := int64(1)
		for d := range rank {
			lo[d], hi[d] = cuts[d][idx[d]], cuts[d][idx[d]+1]
			elems *= hi[d] - lo[d]
			si[d] = shardOf(src, d, lo[d])
			ti[d] = shardOf(dst, d, lo[d]+off[d])
		}
		if elems > 0 {
			c.cells = append(c.cells, cell{lo: lo, hi: hi, elems: elems, holders: holders[tupleKey(si)], needers: needers[tupleKey(ti)]})
		}
		// Odometer.
		d := rank - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < len(cuts[d])-1 {
				break
			}
			idx[d] = 0
			d--
		}
		if d < 0 {
			break
		}
	}
	return nil
}

// shardOf is the shard index along dim d holding global index x.
func shardOf(l *sharding.Layout, d int, x int64) int {
	if l.Counts[d] == 1 {
		return 0
	}
	return int(x / l.Tile[d])
}

// shardDevices maps every device's shard-index tuple to its global ids (into into, or
// a new map).
func shardDevices(l *sharding.Layout, devices []int, into map[string][]int32) map[string][]int32 {
	if into == nil {
		into = map[string][]int32{}
	}
	m := l.Mesh
	coords := make([]int, len(m.Axes))
	tuple := make([]int, len(l.Shape))
	for pos, id := range devices {
		m.Coords(pos, coords)
		for d := range tuple {
			tuple[d] = l.ShardIndex(d, coords)
		}
		k := tupleKey(tuple)
		into[k] = append(into[k], int32(id))
	}
	return into
}

func tupleKey(t []int) string {
	var b strings.Builder
	for _, v := range t {
		fmt.Fprintf(&b, "%d,", v)
	}
	return b.String()
}
