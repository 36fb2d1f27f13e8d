package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
)

// box is a hyper-rectangle of global indices, [lo, hi) per dim.
type box [][2]int64

func (b box) empty() bool {
	for _, r := range b {
		if r[1] <= r[0] {
			return true
		}
	}
	return false
}

func (b box) within(o box) bool {
	for d := range b {
		if b[d][0] < o[d][0] || b[d][1] > o[d][1] {
			return false
		}
	}
	return true
}

// minus is b without o, as disjoint boxes.
func (b box) minus(o box) []box {
	for d := range b {
		if o[d][1] <= b[d][0] || o[d][0] >= b[d][1] {
			return []box{b} // disjoint
		}
	}
	var out []box
	rest := append(box(nil), b...)
	for d := range b {
		if rest[d][0] < o[d][0] {
			piece := append(box(nil), rest...)
			piece[d] = [2]int64{rest[d][0], o[d][0]}
			out = append(out, piece)
			rest[d][0] = o[d][0]
		}
		if rest[d][1] > o[d][1] {
			piece := append(box(nil), rest...)
			piece[d] = [2]int64{o[d][1], rest[d][1]}
			out = append(out, piece)
			rest[d][1] = o[d][1]
		}
	}
	return out
}

// covered reports whether the union of held covers b.
func covered(held []box, b box) bool {
	left := []box{b}
	for _, h := range held {
		var next []box
		for _, l := range left {
			next = append(next, l.minus(h)...)
		}
		left = next
		if len(left) == 0 {
			return true
		}
	}
	for _, l := range left {
		if !l.empty() {
			return false
		}
	}
	return true
}

// tileBox is the tile of mesh position pos under s.
func tileBox(m *sharding.Mesh, shape []int64, s sharding.Sharding, pos int) box {
	t := sharding.NewLayout(m, shape, s).TileOf(pos)
	return box(t.Ranges)
}

// targetBox is the box of t (in t's own index space) that the target tile at mesh
// position pos covers: the tile itself, or for a fused part the fused tile's overlap
// with the part, shifted to the part's indices (empty: lo >= hi on some dim).
func (t *Tensor) targetBox(m *sharding.Mesh, pos int) (lo, hi []int64) {
	if t.Fused == nil {
		r := sharding.NewLayout(m, t.Shape, t.Target).TileOf(pos).Ranges
		lo, hi = make([]int64, len(r)), make([]int64, len(r))
		for d := range r {
			lo[d], hi[d] = r[d][0], r[d][1]
		}
		return lo, hi
	}
	f := t.Fused
	r := sharding.NewLayout(m, f.Shape, t.Target).TileOf(pos).Ranges
	lo, hi = make([]int64, len(r)), make([]int64, len(r))
	for d := range r {
		lo[d], hi[d] = r[d][0], r[d][1]
	}
	lo[f.Dim] = min(max(lo[f.Dim]-f.Offset, 0), t.Shape[f.Dim])
	hi[f.Dim] = min(max(hi[f.Dim]-f.Offset, 0), t.Shape[f.Dim])
	return lo, hi
}

// replay checks res's moves for every class: each move sends what its sender held when
// its phase began (its source tile, or what earlier phases brought), and every target
// device ends with exactly its tile of the tensor: it holds all of it, and what it
// received outside it, it passed on (a relay).
func replay(p *Problem, res *Result) error {
	for ci, c := range res.Classes {
		t := &p.Tensors[c.Tensors[0]]
		held := map[int][]box{}
		for pos, d := range p.Source.Devices {
			if b := tileBox(p.Source.Mesh, t.Shape, t.Source, pos); !b.empty() {
				held[d] = append(held[d], b)
			}
		}
		received := map[int][]box{}
		receivedAt := map[int][]int{}
		phases := 0
		for _, m := range c.Moves {
			phases = max(phases, m.Phase+1)
		}
		for ph := range phases {
			var got []Move
			for _, m := range c.Moves {
				if m.Phase != ph {
					continue
				}
				if !covered(held[m.From], box(m.Ranges)) {
					return fmt.Errorf("class %d phase %d: device %d sends %v to %d without holding it", ci, ph, m.From, m.Ranges, m.To)
				}
				got = append(got, m)
			}
			for _, m := range got {
				held[m.To] = append(held[m.To], box(m.Ranges))
				received[m.To] = append(received[m.To], box(m.Ranges))
				receivedAt[m.To] = append(receivedAt[m.To], ph)
			}
		}
		for r, tp := range p.Targets {
			for pos, d := range tp.Devices {
				lo, hi := t.targetBox(tp.Mesh, pos)
				want := make(box, len(lo))
				for d := range lo {
					want[d] = [2]int64{lo[d], hi[d]}
				}
				if want.empty() {
					continue
				}
				if !covered(held[d], want) {
					return fmt.Errorf("class %d: targets[%d] device %d lacks part of its tile %v", ci, r, d, want)
				}
				for k, b := range received[d] {
					if !b.within(want) && !forwarded(c.Moves, d, receivedAt[d][k], b) {
						return fmt.Errorf("class %d: device %d received %v outside its tile %v and did not pass it on", ci, d, b, want)
					}
				}
			}
		}
	}
	return nil
}

// forwarded reports whether device d sends box b on in a phase after ph (a relay:
// what it fetched for others).
func forwarded(moves []Move, d, ph int, b box) bool {
	for _, m := range moves {
		if m.From == d && m.Phase > ph && box(m.Ranges).within(b) && b.within(box(m.Ranges)) {
			return true
		}
	}
	return false
}

// testFabric is a small GPU fabric: nodes of g GPUs, NVLink 10x the NIC.
func testFabric(g int) *Fabric {
	return &Fabric{Name: "test", GPUsPerNode: g, NVLinkBW: 400, NICBW: 40, NVLinkLat: 0.5, NICLat: 2, Base: 5, Additive: true}
}

// randomProblem is a random transfer on at most maxNodes nodes.
func randomProblem(t testing.TB, rng *rand.Rand, maxNodes int, scale int64) *Problem {
	g := []int{1, 2, 4}[rng.IntN(3)]
	nodes := 1 + rng.IntN(maxNodes)
	n := g * nodes
	p := &Problem{Fabric: testFabric(g), Devices: n}
	randMesh := func(most int) *sharding.Mesh {
		for {
			var axes []sharding.Axis
			size := 1
			for i := range 1 + rng.IntN(2) {
				s := 1 + rng.IntN(4)
				if size*s > most {
					break
				}
				size *= s
				axes = append(axes, sharding.Axis{Name: fmt.Sprintf("a%d", i), Size: s})
			}
			if len(axes) > 0 {
				m, err := sharding.NewMesh("mesh", axes, nil)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
	}
	perm := rng.Perm(n)
	sm := randMesh(n)
	p.Source = Placement{Name: "source", Field: "source", Mesh: sm, Devices: perm[:sm.NumDevices()]}
	tm := randMesh(n)
	reps := max(1, min(1+rng.IntN(3), n/tm.NumDevices()))
	// Targets: disjoint from each other, anywhere relative to the source.
	perm = rng.Perm(n)
	for r := range reps {
		k := tm.NumDevices()
		p.Targets = append(p.Targets, Placement{Name: "replica", Field: fmt.Sprintf("targets[%d]", r), Mesh: tm, Devices: perm[r*k : (r+1)*k]})
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
	for i := range 1 + rng.IntN(3) {
		shape := make([]int64, 1+rng.IntN(2))
		for d := range shape {
			shape[d] = int64(1+rng.IntN(12)) * scale
		}
		p.Tensors = append(p.Tensors, Tensor{Name: fmt.Sprintf("t%d", i), Field: fmt.Sprintf("tensors[%d]", i), Shape: shape,
			ElemBits: []int{8, 16, 32}[rng.IntN(3)], Source: randSharding(sm, shape), Target: randSharding(tm, shape), Count: 1 + rng.IntN(3)})
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReplayRandom replays every strategy's plan on random small transfers, and holds
// its price to the fabric's bound.
func TestReplayRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 39))
	for i := range 300 {
		p := randomProblem(t, rng, 4, 1)
		for _, s := range Strategies {
			if (s == "chain" || s == "tree") && len(p.Targets) < 2 {
				continue
			}
			p.Strategy = s
			res, err := Plan(context.Background(), p)
			if err != nil {
				t.Fatalf("case %d %s: %v", i, s, err)
			}
			if err := replay(p, res); err != nil {
				t.Fatalf("case %d %s: %v", i, s, err)
			}
			if res.TimeUS < res.Bound.TimeUS*(1-1e-9) {
				t.Fatalf("case %d %s: priced %.3f us below the bound %.3f us (%s)", i, s, res.TimeUS, res.Bound.TimeUS, res.Bound.Binding)
			}
			if res.NetworkBytes < int64(res.Bound.NetworkBytes)-1 {
				t.Fatalf("case %d %s: %d bytes cross the network, fewer than the %v that must", i, s, res.NetworkBytes, res.Bound.NetworkBytes)
			}
		}
	}
}

// TestBoundDirectMeetsIt: a single tensor sharded alike on source and target, with the target
// on other nodes, moves at exactly the rate of its receivers' NICs.
func TestBoundDirectMeetsIt(t *testing.T) {
	f := testFabric(2)
	m, _ := sharding.NewMesh("mesh", []sharding.Axis{{Name: "x", Size: 2}}, nil)
	s, _ := sharding.Parse(json.RawMessage(`["x"]`), m, []int64{1 << 20}, "s")
	p := &Problem{Fabric: f, Devices: 4, Strategy: "direct",
		Source:  Placement{Mesh: m, Devices: []int{0, 1}},
		Targets: []Placement{{Mesh: m, Devices: []int{2, 3}}},
		Tensors: []Tensor{{Name: "w", Shape: []int64{1 << 20}, ElemBits: 32, Source: s, Target: s, Count: 1}}}
	res, err := Plan(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	// Each receiver takes 2 MiB over its 40 B/us NIC: one bucket, one phase, takes
	// exactly the bound; the planner takes more buckets (less memory) within its slack.
	want := f.Base + f.NICLat + float64(2<<20)/f.NICBW
	if math.Abs(res.Bound.TimeUS-want) > 1e-6 || res.TimeUS < want-1e-6 || res.TimeUS > want*(1+bucketSlack)+1e-6 {
		t.Fatalf("time %.3f, bound %.3f, want the bound %.3f and a time within %.0f%% of it", res.TimeUS, res.Bound.TimeUS, want, 100*bucketSlack)
	}
	if res.Buckets < 2 || res.PeakBytesPerDevice >= 3*(2<<20) {
		t.Fatalf("%d buckets, peak %d bytes: want the memory the slack buys", res.Buckets, res.PeakBytesPerDevice)
	}
}

// TestPlanStopsAtDeadline: a context that has ended stops planning with its error.
func TestPlanStopsAtDeadline(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 39))
	p := randomProblem(t, rng, 4, 64)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Plan(ctx, p); err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestIdleNodesChangeNothing: nodes no placement uses change neither the plan's price
// nor its moves (shifted by the nodes put before the placements).
func TestIdleNodesChangeNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 39))
	for i := range 40 {
		p := randomProblem(t, rng, 3, 16)
		base, err := Plan(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		g := p.Fabric.GPUsPerNode
		shift := 2 * g
		q := *p
		q.Devices = p.Devices + 5*g
		move := func(pl Placement) Placement {
			ds := make([]int, len(pl.Devices))
			for k, d := range pl.Devices {
				ds[k] = d + shift
			}
			pl.Devices = ds
			return pl
		}
		q.Source = move(p.Source)
		q.Targets = nil
		for _, tp := range p.Targets {
			q.Targets = append(q.Targets, move(tp))
		}
		got, err := Plan(context.Background(), &q)
		if err != nil {
			t.Fatal(err)
		}
		if got.TimeUS != base.TimeUS || got.Bound.TimeUS != base.Bound.TimeUS || got.Strategy != base.Strategy {
			t.Fatalf("case %d: %s %.3f us (bound %.3f) with idle nodes, %s %.3f us (bound %.3f) without", i, got.Strategy, got.TimeUS, got.Bound.TimeUS, base.Strategy, base.TimeUS, base.Bound.TimeUS)
		}
		if err := replay(&q, got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		for ci := range base.Classes {
			for k, m := range base.Classes[ci].Moves {
				if gm := got.Classes[ci].Moves[k]; gm.From != m.From+shift || gm.To != m.To+shift {
					t.Fatalf("case %d: move %d is %d -> %d with idle nodes, %d -> %d without", i, k, gm.From, gm.To, m.From, m.To)
				}
			}
		}
	}
}
