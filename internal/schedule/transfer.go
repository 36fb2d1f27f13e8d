package schedule

import (
	"context"
	"fmt"
	"slices"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/transfer"
)

// Transfer is the schedule of res, the plan of p: the ranks are the fabric's global
// device ids that hold or receive something. Every tensor (a repeated entry counts
// as many tensors, named name[i] unless the entry names them) runs its class's moves
// in the bucket its first byte falls in (Result.BucketBytes each), phase by phase;
// the phases of a bucket run in order, and the buckets one after the other (a runtime
// may pipeline them: bucket b+1's phase k only reads what bucket b+1's earlier phases
// brought). A device copies what its own source tile holds of its target tile in the
// first phase of the tensor's bucket; a move lands in the receiver's target tile where
// it is inside it, else in a stage piece (a relay's), which the receiver then copies
// into its target tile where they meet. A fused target's tensors follow the moved ones:
// a part's target tile is its share of the fused tile, and its operations write the
// fused tensor's target buffer at the part's offset (the package comment, Buffers).
func Transfer(ctx context.Context, p *transfer.Problem, res *transfer.Result) (*Schedule, error) {
	s := &Schedule{Kind: "transfer", Buckets: max(1, res.Buckets)}
	type inst struct {
		class int
		entry int
	}
	classOf := map[int]int{}
	for ci, c := range res.Classes {
		for _, ti := range c.Tensors {
			classOf[ti] = ci
		}
	}
	var insts []inst
	var offset int64
	for ti := range p.Tensors {
		t := &p.Tensors[ti]
		ci, ok := classOf[ti]
		if !ok {
			return nil, errorf("tensor %q is in no class of the plan", t.Name)
		}
		for k := range max(1, t.Count) {
			name := instName(t.Name, &t.Names, t.Count, k)
			bytes := sharding.BufferBytes(elements(t.Shape), t.ElemBits)
			bucket := 0
			if res.BucketBytes > 0 {
				bucket = int(min(int64(s.Buckets-1), offset/res.BucketBytes))
			}
			offset += bytes
			s.Tensors = append(s.Tensors, Tensor{Name: name, Shape: t.Shape, ElemBits: t.ElemBits, Bucket: bucket, Bytes: bytes})
			insts = append(insts, inst{class: ci, entry: ti})
		}
	}
	// The fused target tensors, after the moved ones: the k-th of an entry takes the
	// k-th tensor of each of its parts.
	fusedAt := map[[2]int]int{} // (fused entry, k) -> tensor
	j := 0
	for ti := range p.Tensors {
		t := &p.Tensors[ti]
		for k := range max(1, t.Count) {
			f := t.Fused
			if f == nil {
				j++
				continue
			}
			key := [2]int{f.Entry, k}
			fi, ok := fusedAt[key]
			if !ok {
				name := instName(f.Name, &f.Names, t.Count, k)
				fi = len(s.Tensors)
				fusedAt[key] = fi
				s.Tensors = append(s.Tensors, Tensor{Name: name, Shape: f.Shape, ElemBits: t.ElemBits, Bucket: s.Tensors[j].Bucket,
					Bytes: sharding.BufferBytes(elements(f.Shape), t.ElemBits)})
			}
			ft := &s.Tensors[fi]
			ft.Parts = append(ft.Parts, j)
			ft.Bucket = min(ft.Bucket, s.Tensors[j].Bucket)
			s.Tensors[j].Fused = &FusedIn{Tensor: fi, Dim: f.Dim, Offset: f.Offset}
			j++
		}
	}
	phases := len(res.Phases)
	for _, c := range res.Classes {
		for _, m := range c.Moves {
			phases = max(phases, m.Phase+1)
		}
	}
	phases = max(phases, 1) // the local copies run in the first phase
	s.Phases = phases

	ranks := map[int]*Rank{}
	rank := func(g int) *Rank {
		r := ranks[g]
		if r == nil {
			r = &Rank{Rank: g}
			ranks[g] = r
		}
		return r
	}
	// The tiles of every tensor on every device.
	type tiles struct {
		source  Box
		targets map[int]Box // target placement -> tile
		// Where each target buffer sits (a fused part: the fused tile in the part's
		// indices, which may reach past the part), and the fused tile itself.
		at    map[int]Box
		fused map[int]Box
	}
	layouts := map[int][2]*sharding.Layout{} // per entry: source, target
	for ti := range p.Tensors {
		t := &p.Tensors[ti]
		layouts[ti] = [2]*sharding.Layout{sharding.NewLayout(p.Source.Mesh, t.Shape, t.Source), nil}
	}
	tileBoxes := func(ti int) map[int]*tiles {
		t := &p.Tensors[ti]
		out := map[int]*tiles{}
		get := func(g int) *tiles {
			if out[g] == nil {
				out[g] = &tiles{targets: map[int]Box{}, at: map[int]Box{}, fused: map[int]Box{}}
			}
			return out[g]
		}
		sl := layouts[ti][0]
		for pos, g := range p.Source.Devices {
			if b := tileBox(sl, p.Source.Mesh.DeviceAt(pos)); !b.empty() {
				get(g).source = b
			}
		}
		whole := make(Box, len(t.Shape))
		for d, n := range t.Shape {
			whole[d] = [2]int64{0, n}
		}
		for k, tp := range p.Targets {
			if f := t.Fused; f != nil {
				tl := sharding.NewLayout(tp.Mesh, f.Shape, t.Target)
				for pos, g := range tp.Devices {
					fb := tileBox(tl, tp.Mesh.DeviceAt(pos))
					if fb.empty() {
						continue
					}
					at := slices.Clone(fb)
					at[f.Dim] = [2]int64{fb[f.Dim][0] - f.Offset, fb[f.Dim][1] - f.Offset}
					if b := intersect(at, whole); !b.empty() {
						tg := get(g)
						tg.targets[k], tg.at[k], tg.fused[k] = b, at, fb
					}
				}
				continue
			}
			tl := sharding.NewLayout(tp.Mesh, t.Shape, t.Target)
			for pos, g := range tp.Devices {
				if b := tileBox(tl, tp.Mesh.DeviceAt(pos)); !b.empty() {
					tg := get(g)
					tg.targets[k], tg.at[k] = b, b
				}
			}
		}
		return out
	}

	// builders[bucket][phase]
	builders := make([][]*builder, s.Buckets)
	created := make([][]map[int][]Buffer, s.Buckets)
	for b := range builders {
		builders[b] = make([]*builder, phases)
		created[b] = make([]map[int][]Buffer, phases)
		for ph := range phases {
			builders[b][ph] = newBuilder(8, 0)
			created[b][ph] = map[int][]Buffer{}
		}
	}
	tileCache := map[int]map[int]*tiles{}
	listed := map[[3]int]bool{} // (fused tensor, device, placement) -> its buffer is listed
	for j, in := range insts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tt := tileCache[in.entry]
		if tt == nil {
			tt = tileBoxes(in.entry)
			tileCache[in.entry] = tt
		}
		bucket := s.Tensors[j].Bucket
		bits := s.Tensors[j].ElemBits
		// The buffers every device holds of tensor j, and what it has written.
		targetKeys := func(g int) []int {
			ks := make([]int, 0, len(tt[g].targets))
			for k := range tt[g].targets {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			return ks
		}
		written := map[[2]int][]Box{} // (device, placement) -> boxes of its target tile written
		stages := map[int][]Box{}     // device -> stage pieces
		for _, g := range sortedKeys(tt) {
			ti := tt[g]
			r := rank(g)
			if ti.source != nil {
				r.Buffers = append(r.Buffers, Buffer{Tensor: j, Name: BufSource, Global: ti.source})
			}
			for _, k := range targetKeys(g) {
				if f := s.Tensors[j].Fused; f != nil {
					// The fused tensor's buffer, listed with its first part.
					if key := [3]int{f.Tensor, g, k}; !listed[key] {
						listed[key] = true
						r.Buffers = append(r.Buffers, Buffer{Tensor: f.Tensor, Name: BufTarget, Index: k, Global: ti.fused[k]})
					}
				} else {
					r.Buffers = append(r.Buffers, Buffer{Tensor: j, Name: BufTarget, Index: k, Global: ti.targets[k]})
				}
				if ti.source == nil {
					continue
				}
				if in := intersect(ti.targets[k], ti.source); !in.empty() {
					// What the device holds already, copied in the first phase.
					b := builders[bucket][0]
					b.tensor, b.bits = j, bits
					b.move(piece{from: holding{rank: g, buf: BufSource, global: ti.source}, box: in}, g, BufTarget, k, ti.at[k], false)
					written[[2]int{g, k}] = append(written[[2]int{g, k}], in)
				}
			}
		}
		moves := res.Classes[in.class].Moves
		for ph := range phases {
			b := builders[bucket][ph]
			b.tensor, b.bits = j, bits
			// What each device may send: as the phase began.
			heldAt := func(g int) []holding {
				var hs []holding
				ti := tt[g]
				if ti != nil && ti.source != nil {
					hs = append(hs, holding{rank: g, buf: BufSource, global: ti.source})
				}
				for k, st := range stages[g] {
					hs = append(hs, holding{rank: g, buf: BufStage, index: k, global: st})
				}
				if ti != nil {
					for _, k := range targetKeys(g) {
						for _, w := range written[[2]int{g, k}] {
							hs = append(hs, holding{rank: g, buf: BufTarget, index: k, global: w, at: ti.at[k]})
						}
					}
				}
				return hs
			}
			type sent struct {
				to     int
				box    Box
				pieces []piece
			}
			var out []sent
			for _, m := range moves {
				if m.Phase != ph {
					continue
				}
				want := Box(m.Ranges)
				pieces, ok := cover(want, heldAt(m.From))
				if !ok {
					return nil, errorf("tensor %q phase %d: device %d sends %v without holding it", s.Tensors[j].Name, ph, m.From, m.Ranges)
				}
				out = append(out, sent{to: m.To, box: want, pieces: pieces})
			}
			for _, o := range out {
				g := o.to
				rank(g)
				ti := tt[g]
				// Where it lands: the target tile when it is inside one and nothing of it
				// is there yet, else a stage piece copied into the target tiles it meets.
				direct := -1
				if ti != nil {
					for _, k := range targetKeys(g) {
						if contains(ti.targets[k], o.box) && !overlapsAny(o.box, written[[2]int{g, k}]) {
							direct = k
							break
						}
					}
				}
				if direct >= 0 {
					for _, pc := range o.pieces {
						b.move(pc, g, BufTarget, direct, ti.at[direct], false)
					}
					written[[2]int{g, direct}] = append(written[[2]int{g, direct}], o.box)
					continue
				}
				si := len(stages[g])
				stages[g] = append(stages[g], o.box)
				created[bucket][ph][g] = append(created[bucket][ph][g], Buffer{Tensor: j, Name: BufStage, Index: si, Global: o.box})
				for _, pc := range o.pieces {
					b.move(pc, g, BufStage, si, o.box, false)
				}
				if ti == nil {
					continue
				}
				for _, k := range targetKeys(g) {
					fresh := []Box{intersect(o.box, ti.targets[k])}
					for _, w := range written[[2]int{g, k}] {
						var next []Box
						for _, f := range fresh {
							next = append(next, subtract(f, w)...)
						}
						fresh = next
					}
					for _, f := range fresh {
						if f.empty() {
							continue
						}
						b.move(piece{from: holding{rank: g, buf: BufStage, index: si, global: o.box}, box: f}, g, BufTarget, k, ti.at[k], false)
						written[[2]int{g, k}] = append(written[[2]int{g, k}], f)
					}
				}
			}
		}
		// Every target tile is whole.
		for _, g := range sortedKeys(tt) {
			for _, k := range targetKeys(g) {
				rest := []Box{tt[g].targets[k]}
				for _, w := range written[[2]int{g, k}] {
					var next []Box
					for _, f := range rest {
						next = append(next, subtract(f, w)...)
					}
					rest = next
				}
				for _, f := range rest {
					if !f.empty() {
						return nil, errorf("tensor %q: device %d's target tile %v lacks %v after the plan's moves", s.Tensors[j].Name, g, tt[g].targets[k], f)
					}
				}
			}
		}
	}
	for _, g := range sortedKeys(ranks) {
		r := ranks[g]
		for bk := range s.Buckets {
			for ph := range phases {
				ops := builders[bk][ph].ops[g]
				if len(ops) == 0 {
					continue
				}
				r.Phases = append(r.Phases, Phase{Phase: ph, Bucket: bk, NewBuffers: created[bk][ph][g], Ops: ops})
			}
		}
		s.Ranks = append(s.Ranks, *r)
	}
	return s, nil
}

// instName names the k-th of the count tensors an entry called name stands for: by
// names when they name them all, else name[k] when there are several.
func instName(name string, names *transfer.Names, count, k int) string {
	switch {
	case names.Count() == count && count > 0:
		return names.At(k)
	case count > 1:
		return fmt.Sprintf("%s[%d]", name, k)
	}
	return name
}

func overlapsAny(b Box, bs []Box) bool {
	for _, o := range bs {
		if !intersect(b, o).empty() {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
