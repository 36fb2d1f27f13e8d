package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
)

// fusedCase is a fused target: parts[k] (indices into Problem.Tensors) concatenated
// along dim into a tensor of shape.
type fusedCase struct {
	shape  []int64
	dim    int
	parts  []int
	target sharding.Sharding
}

// flatIndex is the row-major index of idx in shape.
func flatIndex(shape, idx []int64) int64 {
	f := int64(0)
	for d := range shape {
		f = f*shape[d] + idx[d]
	}
	return f
}

// eachIndex calls fn with every index of box b.
func eachIndex(b box, fn func(idx []int64)) {
	if b.empty() {
		return
	}
	idx := make([]int64, len(b))
	for d := range b {
		idx[d] = b[d][0]
	}
	for {
		fn(idx)
		d := len(b) - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < b[d][1] {
				break
			}
			idx[d] = b[d][0]
			d--
		}
		if d < 0 {
			return
		}
	}
}

// replayFused replays res element by element for fused target f: every move sends
// elements its sender held when its phase began, and every target device ends holding
// every element of its tile of the fused tensor (each from the part and index that the
// concatenation puts there), and passes on whatever it received outside that tile.
func replayFused(p *Problem, res *Result, f fusedCase) error {
	type elem struct {
		part int
		idx  int64
	}
	held := map[int]map[elem]bool{}
	hold := func(d int, e elem) {
		if held[d] == nil {
			held[d] = map[elem]bool{}
		}
		held[d][e] = true
	}
	type receipt struct {
		e     elem
		phase int
	}
	received := map[int][]receipt{}
	sent := map[[2]int]map[elem]bool{} // (device, phase) -> elements sent
	moves := make([][]Move, len(f.parts))
	for k, ti := range f.parts {
		t := &p.Tensors[ti]
		for _, c := range res.Classes {
			if slices.Contains(c.Tensors, ti) {
				moves[k] = c.Moves
			}
		}
		for pos, d := range p.Source.Devices {
			eachIndex(tileBox(p.Source.Mesh, t.Shape, t.Source, pos), func(idx []int64) { hold(d, elem{k, flatIndex(t.Shape, idx)}) })
		}
	}
	phases := 0
	for _, ms := range moves {
		for _, m := range ms {
			phases = max(phases, m.Phase+1)
		}
	}
	for ph := range phases {
		type arrival struct {
			to int
			e  elem
		}
		var arrivals []arrival
		for k, ms := range moves {
			shape := p.Tensors[f.parts[k]].Shape
			for _, m := range ms {
				if m.Phase != ph {
					continue
				}
				var err error
				eachIndex(box(m.Ranges), func(idx []int64) {
					e := elem{k, flatIndex(shape, idx)}
					if !held[m.From][e] && err == nil {
						err = fmt.Errorf("phase %d: device %d sends part %d index %v to %d without holding it", ph, m.From, k, idx, m.To)
					}
					if sent[[2]int{m.From, ph}] == nil {
						sent[[2]int{m.From, ph}] = map[elem]bool{}
					}
					sent[[2]int{m.From, ph}][e] = true
					arrivals = append(arrivals, arrival{m.To, e})
				})
				if err != nil {
					return err
				}
			}
		}
		for _, a := range arrivals {
			hold(a.to, a.e)
			received[a.to] = append(received[a.to], receipt{a.e, ph})
		}
	}
	// fusedElem is the part element at fused index idx.
	fusedElem := func(idx []int64) elem {
		x := idx[f.dim]
		for k, ti := range f.parts {
			shape := p.Tensors[ti].Shape
			if x < shape[f.dim] {
				pi := slices.Clone(idx)
				pi[f.dim] = x
				return elem{k, flatIndex(shape, pi)}
			}
			x -= shape[f.dim]
		}
		panic("index outside the fused tensor")
	}
	for r, tp := range p.Targets {
		for pos, d := range tp.Devices {
			want := map[elem]bool{}
			var err error
			eachIndex(tileBox(tp.Mesh, f.shape, f.target, pos), func(idx []int64) {
				e := fusedElem(idx)
				want[e] = true
				if !held[d][e] && err == nil {
					err = fmt.Errorf("targets[%d] device %d lacks fused index %v (part %d element %d)", r, d, idx, e.part, e.idx)
				}
			})
			if err != nil {
				return err
			}
			for _, rc := range received[d] {
				if want[rc.e] {
					continue
				}
				passed := false
				for ph := rc.phase + 1; ph < phases && !passed; ph++ {
					passed = sent[[2]int{d, ph}][rc.e]
				}
				if !passed {
					return fmt.Errorf("device %d received part %d element %d outside its fused tile and did not pass it on", d, rc.e.part, rc.e.idx)
				}
			}
		}
	}
	return nil
}

// randomFused adds a random fused target to p: 2 or 3 parts of uneven sizes along dim,
// each with its own source sharding, and a fused target sharding.
func randomFused(t testing.TB, rng *rand.Rand, p *Problem) fusedCase {
	rank := 1 + rng.IntN(2)
	f := fusedCase{dim: rng.IntN(rank)}
	base := make([]int64, rank)
	for d := range base {
		base[d] = int64(1 + rng.IntN(8))
	}
	randSharding := func(m *sharding.Mesh, shape []int64) sharding.Sharding {
		dims := make([][]string, len(shape))
		for _, a := range m.Axes {
			if d := rng.IntN(len(shape) + 1); d < len(shape) {
				dims[d] = append(dims[d], a.Name)
			}
		}
		raw, _ := json.Marshal(dims)
		s, err := sharding.Parse(raw, m, shape, "s")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f.shape = slices.Clone(base)
	f.shape[f.dim] = 0
	bits := []int{8, 16, 32}[rng.IntN(3)]
	var parts []Tensor
	for k := range 2 + rng.IntN(2) {
		shape := slices.Clone(base)
		shape[f.dim] = int64(1 + rng.IntN(9))
		parts = append(parts, Tensor{Name: fmt.Sprintf("part%d", k), Field: fmt.Sprintf("tensors[%d]", len(p.Tensors)+k), Shape: shape, ElemBits: bits,
			Source: randSharding(p.Source.Mesh, shape), Count: 1 + rng.IntN(2), Fused: &FusedPart{Dim: f.dim, Offset: f.shape[f.dim]}})
		f.shape[f.dim] += shape[f.dim]
	}
	f.target = randSharding(p.Targets[0].Mesh, f.shape)
	for k := range parts {
		parts[k].Fused.Shape, parts[k].Target = f.shape, f.target
		f.parts = append(f.parts, len(p.Tensors))
		p.Tensors = append(p.Tensors, parts[k])
	}
	return f
}

// TestFusedReplayRandom plans random transfers with a fused target beside plain
// tensors under every strategy: every target device ends with exactly its fused tile,
// element by element, and the plain tensors still replay.
func TestFusedReplayRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 46))
	for i := range 200 {
		p := randomProblem(t, rng, 3, 1)
		f := randomFused(t, rng, p)
		for _, s := range Strategies {
			if (s == "chain" || s == "tree") && len(p.Targets) < 2 {
				continue
			}
			p.Strategy = s
			res, err := Plan(context.Background(), p)
			if err != nil {
				t.Fatalf("case %d %s: %v", i, s, err)
			}
			if err := replayFused(p, res, f); err != nil {
				t.Fatalf("case %d %s (fused %v on dim %d, target %s): %v", i, s, f.shape, f.dim, f.target.Body(), err)
			}
			if err := replay(p, res); err != nil {
				t.Fatalf("case %d %s: %v", i, s, err)
			}
		}
	}
}

// TestFusedOnePartIsPlain: a fused target of one part (a rename) plans exactly the
// moves of the plain tensor with the same target, under every strategy.
func TestFusedOnePartIsPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 46))
	for i := range 100 {
		p := randomProblem(t, rng, 3, 1)
		q := *p
		q.Tensors = slices.Clone(p.Tensors)
		for k := range q.Tensors {
			tk := &q.Tensors[k]
			tk.Fused = &FusedPart{Shape: tk.Shape, Dim: rng.IntN(len(tk.Shape))}
		}
		for _, s := range Strategies {
			if (s == "chain" || s == "tree") && len(p.Targets) < 2 {
				continue
			}
			p.Strategy, q.Strategy = s, s
			want, err := Plan(context.Background(), p)
			if err != nil {
				t.Fatalf("case %d %s: %v", i, s, err)
			}
			got, err := Plan(context.Background(), &q)
			if err != nil {
				t.Fatalf("case %d %s fused: %v", i, s, err)
			}
			if len(got.Classes) != len(want.Classes) || got.TimeUS != want.TimeUS || got.NetworkBytes != want.NetworkBytes {
				t.Fatalf("case %d %s: fused %d classes %.2f us %d B, plain %d classes %.2f us %d B", i, s,
					len(got.Classes), got.TimeUS, got.NetworkBytes, len(want.Classes), want.TimeUS, want.NetworkBytes)
			}
			for c := range want.Classes {
				if !slices.EqualFunc(got.Classes[c].Moves, want.Classes[c].Moves, func(a, b Move) bool {
					return a.Phase == b.Phase && a.From == b.From && a.To == b.To && a.Bytes == b.Bytes && slices.Equal(a.Ranges, b.Ranges)
				}) {
					t.Fatalf("case %d %s class %d: fused moves differ from the plain tensor's", i, s, c)
				}
			}
		}
	}
}
