package planner

import (
	"slices"

	"github.com/shardplan/shardplan/internal/sharding"
)

// The cut bound. Cut a torus axis of n (even) positions into the halves [0, n/2) and
// [n/2, n): a device is in the low half when the digit of the axis' major atom (size q,
// even) is below q/2. Data one half needs and none of its devices holds must cross the
// cut, each element at least once (inside a half it can be forwarded), so every path
// from st to the goal moves at least that many bytes over the links that cross into
// the half, and no step of it is priced below the bytes it moves across the cut over
// the cut's bandwidth (cost.Fabric.HalfCut; TestPropertyPlansAtOrAbovePhysics holds
// every plan to the request's cut bound). The steps run one after another, so the path
// costs at least those bytes over that bandwidth, combined with one step's latency.
//
// Copies. The search's moves never move data between devices that differ only in the
// digits of mesh axes (or parts of axes) outside the space: collectives run over groups
// of atoms, and a permute maps a device to one with the same digits elsewhere. So the
// devices fall into copies of the problem, one per combination of those digits, each of
// which must move its own data across its own part of the cut: the bytes above are per
// copy, and the copies share the cut's links.
//
// Which elements cross follows from the atom's place. An element is held, in st, by the
// devices whose digits of the atoms st uses match the element's shard indices, so only
// by one half (the one its major-atom digit h names) when st uses the atom, and by both
// otherwise (nothing crosses). It is needed by the half its goal digit t names when the
// goal uses the atom, by both otherwise. So the low half lacks the elements with h high
// (and t low, when the goal uses the atom), and the high half the converse: fractions
// of the tensor computed per dim, exactly, from the flat ceil tiles (independent across
// dims; within one dim, by walking the two tilings' intervals).

// addCuts records the half-cuts of r's model for the axes whose major atom is in the
// space.
func (b *bound) addCuts(r *Request) {
	tb, ok := r.Model.(timeBounder)
	if !ok {
		return
	}
	sp := b.sp
	// The tensor's bytes, times the copies: the devices over the product of the atoms.
	b.totalBytes = b.elemBytes * float64(sp.mesh.NumDevices())
	for _, a := range sp.atoms {
		b.totalBytes /= float64(a.Size)
	}
	for _, D := range sp.shape {
		b.totalBytes *= float64(D)
	}
	for a, ref := range sp.atoms {
		if ref.Pre != 1 || ref.Size%2 != 0 {
			continue
		}
		bw, ok := tb.HalfCut(sp.mesh, sp.mesh.AxisIndex(ref.Name))
		if !ok || bw <= 0 {
			continue
		}
		c := halfCut{atom: uint8(a), bw: bw, goalDim: -1}
		for d, ids := range b.goal {
			if i := slices.Index(ids, uint8(a)); i >= 0 {
				c.goalDim, c.goalPos = d, i
				c.goalLow = b.lowFraction(d, ids, i)
			}
		}
		b.cuts = append(b.cuts, c)
	}
	if len(b.cuts) > 0 {
		b.combine = tb.Combine
		b.cross = crossPool.get()
	}
}

// cutBytes is the larger of the bytes either half of c lacks in st (the goal's data).
func (b *bound) cutBytes(st state, c *halfCut) float64 {
	return b.crossBytes(st, c, b.goal, c.goalDim, c.goalPos, true)
}

// moveTime is the cut bound of one move from st to nx: the least time, in µs, of any
// step that turns st into nx (the heuristic's argument with nx as the goal). The
// search prices lazy permutes from below with it.
func (b *bound) moveTime(st, nx state) float64 {
	t := 0.0
	b.inSt.set(st)
	b.inNx.set(nx)
	for i := range b.cuts {
		c := &b.cuts[i]
		e, epos := b.inNx.at(c.atom)
		d, pos := b.inSt.at(c.atom)
		if x := b.crossAt(st, c, nx, e, epos, false, d, pos); x > 0 {
			t = max(t, b.combine(b.latMin, x/c.bw))
		}
	}
	return t
}

// crossBytes is the larger of the bytes either half of c lacks in st of the data tgt
// needs, c's atom being at position epos of tgt's dim e (e < 0: tgt does not use it);
// goal says tgt is the goal (whose fractions addCuts computed once).
func (b *bound) crossBytes(st state, c *halfCut, tgt state, e, epos int, goal bool) float64 {
	d, pos := atomAt(st, c.atom)
	return b.crossAt(st, c, tgt, e, epos, goal, d, pos)
}

// crossAt is crossBytes with c's atom at position pos of st's dim d (d < 0: unused).
func (b *bound) crossAt(st state, c *halfCut, tgt state, e, epos int, goal bool, d, pos int) float64 {
	if d < 0 {
		return 0 // both halves hold everything
	}
	var toLow, toHigh float64
	switch {
	case e < 0:
		low := b.lowFraction(d, st[d], pos)
		toLow, toHigh = 1-low, low
	case e != d:
		low, tlow := b.lowFraction(d, st[d], pos), c.goalLow
		if !goal {
			tlow = b.lowFraction(e, tgt[e], epos)
		}
		toLow, toHigh = (1-low)*tlow, low*(1-tlow)
	default:
		f := b.jointCross(d, st[d], pos, tgt[d], epos, c.atom, goal)
		toLow, toHigh = f[0], f[1]
	}
	return max(toLow, toHigh) * b.totalBytes
}

// atomPlaces is where each atom of a state sits, filled once per state for the cuts'
// lookups (one pass over the state instead of a scan per cut).
type atomPlaces struct {
	dim, pos []uint8 // per atom: its dim plus one (0: unused) and position there
}

func (p *atomPlaces) set(st state) {
	clear(p.dim)
	for d, ids := range st {
		for i, a := range ids {
			p.dim[a], p.pos[a] = uint8(d+1), uint8(i)
		}
	}
}

// at is atomAt from the places set.
func (p *atomPlaces) at(a uint8) (int, int) {
	if d := p.dim[a]; d > 0 {
		return int(d) - 1, int(p.pos[a])
	}
	return -1, 0
}

// atomAt is the dim and position of atom a in st (-1, 0: unused).
func atomAt(st state, a uint8) (int, int) {
	for d, ids := range st {
		if i := slices.Index(ids, a); i >= 0 {
			return d, i
		}
	}
	return -1, 0
}

// lowFraction is the fraction of dim d's elements whose shard index under ids has the
// atom at position pos in its low half.
func (b *bound) lowFraction(d int, ids []uint8, pos int) float64 {
	sp := b.sp
	D, c := sp.shape[d], int64(sp.count(ids))
	q := int64(sp.atoms[ids[pos]].Size)
	if D%c == 0 {
		return 0.5 // even tiles: every digit value covers the same share
	}
	stride := int64(sp.count(ids[pos+1:]))
	ts := sharding.CeilDiv(D, c)
	var low int64
	for x := range c {
		if (x/stride)%q < q/2 {
			low += max(0, min((x+1)*ts, D)-min(x*ts, D))
		}
	}
	return float64(low) / float64(D)
}

// jointCross is, for an atom at position pos of ids and position tpos of tgt, both in
// dim d, the fractions of the elements the low half lacks (held high, needed low) and
// the high half lacks. Walks are memoized; goal says tgt is the goal's list (the memo
// key then leaves it out).
func (b *bound) jointCross(d int, ids []uint8, pos int, tgt []uint8, tpos int, atom uint8, goal bool) [2]float64 {
	sp := b.sp
	D := sp.shape[d]
	cs, ct := int64(sp.count(ids)), int64(sp.count(tgt))
	sStride, tStride := int64(sp.count(ids[pos+1:])), int64(sp.count(tgt[tpos+1:]))
	q := int64(sp.atoms[atom].Size)
	if out, ok := nestedCross(D, cs, ct, sStride, tStride, q); ok {
		return out
	}
	b.buf = append(append(b.buf[:0], byte(d), atom, byte(pos)), ids...)
	if !goal {
		b.buf = append(append(b.buf, 0xff), tgt...)
	}
	if v, ok := b.cross[string(b.buf)]; ok {
		return v
	}
	var out [2]float64 // past 2^16 shards: nothing counted (a weaker bound)
	if cs <= 1<<16 && ct <= 1<<16 {
		out = walkCross(D, cs, ct, sStride, tStride, q)
	}
	b.cross[string(b.buf)] = out
	return out
}

// nestedCross is jointCross in closed form for even tilings whose two digits of the
// atom are equal or nested; ok is false otherwise.
//
// Why it is exact. With cs and ct dividing D, an element's shard indices are x = z /
// (L/cs) and y = z / (L/ct) for z, its index among L = lcm(cs, ct) equal blocks, which
// is uniform over [0, L). The atom's digit is then h = (z / A) % q in the source list
// and t = (z / B) % q in the goal's, with A = sStride·L/cs and B = tStride·L/ct. A = B:
// h = t and nothing crosses. A·q divides B: over each block of B consecutive z (one t)
// h runs through whole periods, so h and t are independent and uniform, and each half
// lacks (q/2)/q x (q - q/2)/q of the elements; B·q dividing A is the same.
func nestedCross(D, cs, ct, sStride, tStride, q int64) ([2]float64, bool) {
	if D%cs != 0 || D%ct != 0 {
		return [2]float64{}, false
	}
	L := cs / gcd(cs, ct) * ct
	A, B := sStride*(L/cs), tStride*(L/ct)
	switch {
	case A == B:
		return [2]float64{}, true
	case B%(A*q) == 0 || A%(B*q) == 0:
		lo, hi := float64(q/2)/float64(q), float64(q-q/2)/float64(q)
		return [2]float64{hi * lo, lo * hi}, true
	}
	return [2]float64{}, false
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// walkCross is jointCross by walking the two flat ceil tilings of a dim of length D
// (cs and ct shards; the atom is the digit of stride sStride in the first and tStride
// in the second): O(cs + ct) pairs of overlapping ranges.
func walkCross(D, cs, ct, sStride, tStride, q int64) [2]float64 {
	ts, tt := sharding.CeilDiv(D, cs), sharding.CeilDiv(D, ct)
	var toLow, toHigh int64
	for x := range cs {
		s0 := min(x*ts, D)
		s1 := min(s0+ts, D)
		hLow := (x/sStride)%q < q/2
		for y := s0 / tt; y < ct && y*tt < s1; y++ {
			ov := min(s1, y*tt+tt, D) - max(s0, y*tt)
			if ov <= 0 {
				continue
			}
			switch tLow := (y/tStride)%q < q/2; {
			case !hLow && tLow:
				toLow += ov
			case hLow && !tLow:
				toHigh += ov
			}
		}
	}
	return [2]float64{float64(toLow) / float64(D), float64(toHigh) / float64(D)}
}
