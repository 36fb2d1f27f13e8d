package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// fullTraffic is the exact reference of a pattern: every transfer of every device of
// the mesh, listed explicitly (no offsets): the atoms enumerated in full, and every
// coordinate of the axes without atoms.
func fullTraffic(p *pattern, kind cost.Kind) *cost.Traffic {
	m := p.sp.mesh
	return &cost.Traffic{Kind: kind, Mesh: m, Each: func(yield func(from, to []int, bytes int64) bool) {
		from := make([]int, len(m.Axes))
		to := make([]int, len(m.Axes))
		p.eachDevice(func(f, t int, bytes int64) bool {
			return yield(m.Coords(f, from), m.Coords(t, to), bytes)
		})
	}}
}

// TestPropertyPatternPricingIsExact: the pattern priced from its representative
// transfers and offsets equals the pattern priced from every transfer listed, within
// 1e-9, on random reshards up to 4,096 devices, as all_to_all_v and (where the shard
// counts agree) as collective_permute; and the listed transfers are the ones
// Transfers and Pairs return.
func TestPropertyPatternPricingIsExact(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	rng := rand.New(rand.NewPCG(12, 34))
	models := []cost.Model{}
	for _, name := range []string{"tpu-v5p", "h100", "tpu-v5e"} {
		f, _ := cost.Profile(name)
		models = append(models, f)
	}
	checked, big := 0, 0
	cases := underRace(200, 100)
	for i := range cases {
		minDev, maxDev := 2, 64
		if i%8 == 0 {
			minDev, maxDev = 1025, 4096
		}
		m, shape, src, tgt := randomReshard(t, rng, minDev, maxDev, []int64{1, 16, 64})
		if rng.IntN(3) == 0 { // a permute: the same counts, atoms moved around
			tgt = shuffleAtoms(rng, m, src)
		}
		sp, ok := newSpace(m, shape, 32, src, tgt)
		if !ok {
			continue
		}
		b, a := sp.stateOf(src), sp.stateOf(tgt)
		permute := true
		for d := range b {
			permute = permute && sp.count(b[d]) == sp.count(a[d])
		}
		name := fmt.Sprintf("%d %s %v %s->%s", i, m, shape, src, tgt)
		for _, md := range models {
			f := md.(*cost.Fabric)
			for _, asPermute := range []bool{false, true} {
				if asPermute && !permute {
					continue
				}
				kind := cost.AllToAllV
				if asPermute {
					kind = cost.CollectivePermute
				}
				p := newPattern(sp, b, a, asPermute, sp.bytes(sp.tileElems(b)))
				got := f.NewRouter(m).Price(p.traffic(kind))
				want := f.NewRouter(m).Price(fullTraffic(p, kind))
				msg := fmt.Sprintf("%s %s permute=%v fixed=%b", name, f.Name(), asPermute, p.fixed)
				require.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*max(1, want.BandwidthUS), msg)
				require.InDelta(t, want.LatencyUS, got.LatencyUS, 1e-9*max(1, want.LatencyUS), msg)
				require.Equal(t, want.Bytes, got.Bytes, msg)
				require.Equal(t, want.MaxPeers, got.MaxPeers, msg)
				checked++
				if m.NumDevices() > 1000 {
					big++
				}
			}
		}
		// The lists a response gives are the routed transfers.
		if m.NumDevices() <= 256 {
			p := newPattern(sp, b, a, false, 0)
			var total int64
			fullTraffic(p, cost.AllToAllV).Each(func(from, to []int, bytes int64) bool {
				if m.PositionOfCoords(from) != m.PositionOfCoords(to) {
					total += bytes
				}
				return true
			})
			var listed int64
			for _, tr := range Transfers(m, shape, 32, src, tgt, false) {
				listed += tr.Bytes
				require.NotEqual(t, tr.From, tr.To, name)
			}
			require.Equal(t, total, listed, "%s: listed transfer bytes", name)
			if permute {
				pairs := Pairs(m, shape, src, tgt)
				senders := map[int]bool{}
				for i, pr := range pairs {
					require.False(t, senders[pr[0]], "%s: device %d sends twice", name, pr[0])
					senders[pr[0]] = true
					require.Equal(t, i, pr[1], "%s: pairs by receiver, each device once", name)
				}
			}
		}
	}
	// Per 200 cases: over 300 pricings, over 20 of them on more than 1,024 devices.
	require.Greater(t, checked, 300*cases/200)
	require.Greater(t, big, 20*cases/200, "pricings on meshes of more than 1,024 devices")
}

// randomMeshPow draws meshes of power-of-two and small odd axes (sub-axes need
// factors).
func randomMeshPow(t testing.TB, rng *rand.Rand, minDevices, maxDevices int) *sharding.Mesh {
	sizes := []int{1, 2, 3, 4, 6, 8, 16}
	for {
		n := 1 + rng.IntN(4)
		axes := make([]sharding.Axis, n)
		total := 1
		for i := range axes {
			axes[i] = sharding.Axis{Name: fmt.Sprintf("a%d", i), Size: sizes[rng.IntN(len(sizes))]}
			total *= axes[i].Size
		}
		if total > maxDevices || total < minDevices {
			continue
		}
		m, err := sharding.NewMesh("mesh", axes, nil)
		require.NoError(t, err)
		return m
	}
}

// shuffleAtoms returns s with the same shard count per dim but its axes moved: each dim's
// refs reversed and, when two dims have the same count, swapped.
func shuffleAtoms(rng *rand.Rand, m *sharding.Mesh, s sharding.Sharding) sharding.Sharding {
	out := s.Clone()
	for d := range out.Dims {
		ax := out.Dims[d].Axes
		for i, j := 0, len(ax)-1; i < j; i, j = i+1, j-1 {
			ax[i], ax[j] = ax[j], ax[i]
		}
	}
	if len(out.Dims) > 1 && rng.IntN(2) == 0 {
		a, b := 0, len(out.Dims)-1
		if sharding.Product(out.Dims[a].Axes) == sharding.Product(out.Dims[b].Axes) {
			out.Dims[a], out.Dims[b] = out.Dims[b], out.Dims[a]
		}
	}
	return out
}

// TestPropertyPlansAtOrAbovePhysics: every plan on tpu-v5p, h100 and a 2-node h100 mesh
// is priced at or above the time lower bound of the data it moves, and every
// point-to-point step at or above the bound of its own traffic (its bytes over the
// device's ingress).
func TestPropertyPlansAtOrAbovePhysics(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	var models []*cost.Fabric
	for _, name := range []string{"tpu-v5p", "h100", "tpu-v5e"} {
		f, _ := cost.Profile(name)
		models = append(models, f)
	}
	n := 200
	if !*long {
		n = 40
	}
	problems := randomProblems(t, n)
	extra := []struct{ mesh, src, tgt string }{
		{"node=2,gpu=8", `["gpu", null]`, `["node", "gpu"]`},
		{"node=2,gpu=8", `[["node","gpu"], null]`, `[null, ["gpu","node"]]`},
		{"d=256", `["d", null]`, `[null, "d"]`},
	}
	for _, e := range extra {
		m := mustMesh(t, e.mesh)
		shape := []int64{4096, 4096}
		problems = append(problems, problem{m, shape, mustSharding(t, m, shape, e.src), mustSharding(t, m, shape, e.tgt)})
	}
	for i, pb := range problems {
		for _, f := range models {
			name := fmt.Sprintf("%d %s %s %v %s->%s", i, f.Name(), pb.mesh, pb.shape, pb.src, pb.tgt)
			r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f}
			p, err := Reshard(context.Background(), r)
			require.NoError(t, err, name)
			if pb.mesh.NumDevices() <= 64 {
				replay(t, p) // the routed holders, the pairs and the transfers move the right data
			}
			s := p.Summary
			assert.GreaterOrEqual(t, s.TimeUS*(1+1e-9), s.TimeLowerBoundUS, "%s: %s", name, describe(p))
			if s.TimeUS > 0 {
				assert.InDelta(t, s.TimeLowerBoundUS/s.TimeUS, s.TimeEfficiency, 1e-12, name)
				assert.LessOrEqual(t, s.TimeEfficiency, 1+1e-9, name)
			}
			peak := f.PeakDeviceIngress(pb.mesh)
			for k, st := range p.Steps {
				if st.Op == OpCollectivePermute || st.Op == OpAllToAllV {
					assert.GreaterOrEqual(t, st.Cost.BandwidthUS*(1+1e-9), float64(st.BytesPerDevice)/peak, "%s: step %d", name, k)
				}
			}
		}
	}
}

func TestTimeLowerBoundWithoutLinks(t *testing.T) {
	m := mustMesh(t, "x=4")
	shape := []int64{64}
	r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: mustSharding(t, m, shape, `["x"]`), Target: mustSharding(t, m, shape, `[null]`), Model: testModel{}}
	_, ok := TimeLowerBound(r)
	assert.False(t, ok, "the test model has no links to bound by")
	f, _ := cost.Profile("tpu-v5p")
	r.Model = f
	tb, ok := TimeLowerBound(r)
	require.True(t, ok)
	// x=4 is a line on v5p (no wrap): 48 of 64 f32 elements must reach each device; the
	// cut of the line carries half the array one way over one link.
	assert.Greater(t, tb, 0.0)
}

// TestPartialReduceScatter: the target keeps a sub-axis of a source unreduced axis as
// partial sums; the planner reduces only the rest, scattering it onto the dim it
// shards (x=4,y=2, source unreduced x, target [[y],[x:(1)2]] unreduced
// x:(2)2 was a 400).
func TestPartialReduceScatter(t *testing.T) {
	m := mustMesh(t, "x=4,y=2")
	shape := []int64{64, 64}
	src := mustSharding(t, m, shape, `{"dims":[{"axes":["y"]},{"axes":[]}],"unreduced":["x"]}`)
	tgt := mustSharding(t, m, shape, `{"dims":[{"axes":["y"]},{"axes":["x:(1)2"]}],"unreduced":["x:(2)2"]}`)
	for _, strategy := range []string{"optimal", "xla"} {
		f, _ := cost.Profile("tpu-v5p")
		r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: src, Target: tgt, Model: f}
		var p *Plan
		var err error
		if strategy == "xla" {
			p, _, err = ReshardXLA(context.Background(), r)
		} else {
			p, err = Reshard(context.Background(), r)
		}
		require.NoError(t, err, strategy)
		require.NotEmpty(t, p.Steps, strategy)
		first := p.Steps[0]
		assert.Contains(t, []Op{OpReduceScatter, OpAllReduce}, first.Op, strategy)
		assert.Equal(t, "x:(1)2", sharding.MergeAdjacent(first.MeshAxes)[0].String(), "%s: only the part the target does not keep is reduced", strategy)
		last := p.Steps[len(p.Steps)-1].After
		assert.True(t, last.SameLayout(tgt), "%s: ends at the target, %s", strategy, last)
		assert.Equal(t, tgt.Unreduced, last.Unreduced, strategy)
	}
	if p, err := Reshard(context.Background(), &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: src, Target: tgt, Model: testModel{}}); assert.NoError(t, err) {
		assert.Equal(t, OpReduceScatter, p.Steps[0].Op, "the kept part needs no all-reduce: %s", describe(p))
		assert.Equal(t, 1, p.Steps[0].Dim)
	}
	// Still refused: partial sums the source does not hold.
	bad := mustSharding(t, m, shape, `{"dims":[{"axes":[]},{"axes":[]}],"unreduced":["y"]}`)
	_, err := Reshard(context.Background(), &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: src, Target: bad, Model: testModel{}})
	var fe *sharding.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "target.unreduced[0]", fe.Field)
}

// randomReshard draws a mesh of minDev..maxDev devices (randomMeshPow), a rank 1-3 shape
// whose dims are 1-40 times one of scales, and two shardings over the same axis pieces.
func randomReshard(t testing.TB, rng *rand.Rand, minDev, maxDev int, scales []int64) (*sharding.Mesh, []int64, sharding.Sharding, sharding.Sharding) {
	m := randomMeshPow(t, rng, minDev, maxDev)
	rank := 1 + rng.IntN(3)
	shape := make([]int64, rank)
	for d := range shape {
		shape[d] = int64(1+rng.IntN(40)) * scales[rng.IntN(len(scales))]
	}
	pieces := randomPieces(rng, m)
	return m, shape, randomSharding(rng, m, rank, pieces, false), randomSharding(rng, m, rank, pieces, false)
}

// TestDigitPermutationPricingIsExact: the closed form for digit permutations
// (cost.Router.PriceDigitPermutation) equals routing every transfer, on random permutes
// up to 4,096 devices and on the 65,536-device swap of the benchmark grid.
func TestDigitPermutationPricingIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 34))
	var models []*cost.Fabric
	for _, name := range []string{"tpu-v5p", "tpu-v5e", "tpu-v4"} {
		f, _ := cost.Profile(name)
		models = append(models, f)
	}
	checked := 0
	for i := range 300 {
		minDev, maxDev := 2, 64
		if i%10 == 0 {
			minDev, maxDev = 256, 4096
		}
		m, shape, src, _ := randomReshard(t, rng, minDev, maxDev, []int64{1, 16})
		tgt := shuffleAtoms(rng, m, src)
		sp, ok := newSpace(m, shape, 32, src, tgt)
		if !ok {
			continue
		}
		b, a := sp.stateOf(src), sp.stateOf(tgt)
		p := newPattern(sp, b, a, true, 4096)
		dp, ok := p.digitPermutation()
		if !ok {
			continue
		}
		if src, ok := sp.digitSrc(b, a); ok {
			// The search builds it from the mapping alone (space.digitPermutation).
			require.Equal(t, dp, sp.digitPermutation(src, 4096), "%d", i)
		}
		// The search memoizes digit permutations by digitSrc and bytes alone: the same
		// mapping between other states (here, the dims rotated in both) has the same
		// mapping and the same price, routed transfer by transfer.
		rb, ra := slices.Clone(b[1:]), slices.Clone(a[1:])
		rb, ra = append(rb, b[0]), append(ra, a[0])
		s1, ok1 := sp.digitSrc(b, a)
		s1 = slices.Clone(s1)
		s2, ok2 := sp.digitSrc(rb, ra)
		require.True(t, ok1 && ok2)
		require.Equal(t, s1, s2)
		rp := newPattern(sp, rb, ra, true, 4096)
		rw := models[0].NewRouter(m).Price(fullTraffic(rp, cost.CollectivePermute))
		ow := models[0].NewRouter(m).Price(fullTraffic(p, cost.CollectivePermute))
		require.InDelta(t, ow.TimeUS, rw.TimeUS, 1e-9*max(1, ow.TimeUS), "%d rotated dims", i)
		for _, f := range models {
			name := fmt.Sprintf("%d %s %s %v %s->%s", i, f.Name(), m, shape, src, tgt)
			got, ok := f.NewRouter(m).PriceDigitPermutation(dp)
			require.True(t, ok, name)
			want := f.NewRouter(m).Price(fullTraffic(p, cost.CollectivePermute))
			require.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*max(1, want.BandwidthUS), name)
			require.InDelta(t, want.LatencyUS, got.LatencyUS, 1e-9*max(1, want.LatencyUS), name)
			require.Equal(t, want.Bytes, got.Bytes, name)
			require.Equal(t, want.MaxHops, got.MaxHops, name)
			if want.Bytes > 0 {
				require.Equal(t, want.MaxPeers, got.MaxPeers, name)
			}
			checked++
		}
	}
	require.Greater(t, checked, 200)
	// Replacements: one used atom replaced by one the state does not use, of the same
	// size (then a swap of two more atoms), as the search's towardGoal and replace moves
	// make them.
	replaced := 0
	for i := range 400 {
		m, shape, src, tgt := randomReshard(t, rng, 4, 1024, []int64{1, 16})
		sp, ok := newSpace(m, shape, 32, src, tgt)
		if !ok {
			continue
		}
		b := sp.stateOf(src)
		a := b.clone()
		used := b.used()
		var done bool
		for d := range a {
			for k, x := range a[d] {
				for u := range sp.atoms {
					if !done && used&(1<<u) == 0 && sp.atoms[u].Size == sp.atoms[x].Size {
						a[d][k], done = uint8(u), true
					}
				}
			}
		}
		if !done {
			continue
		}
		if d := rng.IntN(len(a)); len(a[d]) >= 2 && sp.atoms[a[d][0]].Size == sp.atoms[a[d][1]].Size {
			a[d][0], a[d][1] = a[d][1], a[d][0]
		}
		p := newPattern(sp, b, a, true, 4096)
		dp, ok := p.digitPermutation()
		require.True(t, ok, "%d %s %v %v->%v: a one-for-one replacement is a digit permutation", i, m, shape, b, a)
		f := models[i%len(models)]
		got, ok := f.NewRouter(m).PriceDigitPermutation(dp)
		require.True(t, ok)
		want := f.NewRouter(m).Price(fullTraffic(p, cost.CollectivePermute))
		name := fmt.Sprintf("%d %s %s %v %v->%v", i, f.Name(), m, shape, b, a)
		require.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*max(1, want.BandwidthUS), name)
		require.InDelta(t, want.LatencyUS, got.LatencyUS, 1e-9*max(1, want.LatencyUS), name)
		require.Equal(t, want.Bytes, got.Bytes, name)
		require.Equal(t, want.MaxHops, got.MaxHops, name)
		replaced++
	}
	require.Greater(t, replaced, 100)
	// The grid's 65,536-device swap: [(a,b),(c,d)] -> [(c,d),(a,b)].
	m := mustMesh(t, "a=16,b=16,c=16,d=16")
	shape := []int64{4096, 4096}
	src, tgt := mustSharding(t, m, shape, `[["a","b"],["c","d"]]`), mustSharding(t, m, shape, `[["c","d"],["a","b"]]`)
	sp, ok := newSpace(m, shape, 32, src, tgt)
	require.True(t, ok)
	p := newPattern(sp, sp.stateOf(src), sp.stateOf(tgt), true, 1<<16)
	dp, ok := p.digitPermutation()
	require.True(t, ok)
	f, _ := cost.Profile("tpu-v5p")
	got, ok := f.NewRouter(m).PriceDigitPermutation(dp)
	require.True(t, ok)
	want := f.NewRouter(m).Price(p.traffic(cost.CollectivePermute))
	assert.Contains(t, got.Resource(), "ici link ")
	assert.Contains(t, want.Resource(), "ici link ")
	assert.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*want.BandwidthUS)
	assert.InDelta(t, want.LatencyUS, got.LatencyUS, 1e-9*want.LatencyUS)
	assert.Equal(t, want.Bytes, got.Bytes)
}

// TestLowerBoundBetweenFastPath: where disjointBetween answers (even tiles, one dim split
// over disjoint refs in both shardings), it equals the enumeration over every device,
// on random reshards (shapes a multiple of 16, so most tile evenly).
func TestLowerBoundBetweenFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	fast := 0
	for i := range 1500 {
		m, shape, src, tgt := randomReshard(t, rng, 2, 512, []int64{16, 1})
		r := &Request{Mesh: m, Shape: shape, ElemBits: []int{8, 16, 32, 4}[i%4], Source: src, Target: tgt}
		want := enumerateBetween(r, src, tgt)
		if got, ok := disjointBetween(r, src, tgt); ok {
			fast++
			require.Equal(t, want, got, "%d %s %v %s->%s", i, m, shape, src, tgt)
		}
		require.Equal(t, want, LowerBoundBetween(r, src, tgt))
	}
	t.Logf("fast path answered %d of 1500", fast)
	require.Greater(t, fast, 50)
}

// TestDigitSrcMatchesPattern: the search's digit permutation of a permute, computed from
// the two states alone (digitSrc, which keys its price memo), is the one the pattern
// builds (pattern.digitPermutation, which the lists and the exactness test use), and
// each finds one exactly when the other does: on random permutes that reorder atoms,
// swap them between dims and replace some by unused atoms of the same size.
func TestDigitSrcMatchesPattern(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 77))
	both, replacements := 0, 0
	for i := range 600 {
		m, shape, src, _ := randomReshard(t, rng, 2, 256, []int64{1, 16})
		sp, ok := newSpace(m, shape, 32, src, sharding.Replicated(len(shape)))
		if !ok || len(sp.atoms) == 0 {
			continue
		}
		b := sp.stateOf(src)
		// after: the same count per dim, each position refilled by an atom of the same
		// size, drawn from all atoms (so some come from outside before: replacements).
		a := make(state, len(b))
		var taken uint64
		ok = true
		for d := range b {
			for _, x := range b[d] {
				// Half the time only atoms before does not use, when there are some.
				var pick, fresh []uint8
				for y := range sp.atoms {
					if taken&(1<<y) == 0 && sp.atoms[y].Size == sp.atoms[x].Size {
						pick = append(pick, uint8(y))
						if b.used()&(1<<y) == 0 {
							fresh = append(fresh, uint8(y))
						}
					}
				}
				if len(fresh) > 0 && rng.IntN(2) == 0 {
					pick = fresh
				}
				if len(pick) == 0 {
					ok = false
					break
				}
				y := pick[rng.IntN(len(pick))]
				taken |= 1 << y
				a[d] = append(a[d], y)
			}
		}
		if !ok {
			continue
		}
		name := fmt.Sprintf("%d %s %v %v -> %v", i, m, shape, b, a)
		dp, okP := newPattern(sp, b, a, true, 4096).digitPermutation()
		s, okS := sp.digitSrc(b, a)
		require.Equal(t, okP, okS, name)
		if !okP {
			continue
		}
		both++
		if b.used() != a.used() {
			replacements++
		}
		require.Equal(t, dp, sp.digitPermutation(s, 4096), name)
	}
	t.Logf("digit permutations %d, with replacements %d", both, replacements)
	require.Greater(t, replacements, 30)

	// A replacement with a choice of partners: c:(1)2 pairs with c:(2)2 (same axis)
	// though a comes first, and e:(1)2 then takes a.
	m := mustMesh(t, "a=2,c=4,e=4")
	shape := []int64{16, 16}
	src := mustSharding(t, m, shape, `[["a", "e:(2)2"], "c:(2)2"]`)
	tgt := mustSharding(t, m, shape, `[["c:(1)2", "e:(1)2"], "e:(2)2"]`)
	sp, ok := newSpace(m, shape, 32, src, tgt)
	require.True(t, ok)
	b, a := sp.stateOf(src), sp.stateOf(tgt)
	dp, okP := newPattern(sp, b, a, true, 4096).digitPermutation()
	sd, okS := sp.digitSrc(b, a)
	require.True(t, okP && okS)
	require.Equal(t, dp, sp.digitPermutation(sd, 4096))
	atom := func(name string, pre int) int {
		for i, r := range sp.atoms {
			if r.Name == name && r.Pre == pre {
				return i
			}
		}
		t.Fatalf("no atom %s:%d in %v", name, pre, sp.atoms)
		return -1
	}
	assert.Equal(t, atom("c", 2), dp.Src[atom("c", 1)], "same axis first")
	assert.Equal(t, atom("a", 1), dp.Src[atom("e", 1)])
}

// TimeLowerBound is the least time, in µs, any schedule can take on r's model to move
// the data r's reshard must move (API.md summary.time_lower_bound_us): the busiest
// device's missing bytes over everything that can flow into one device, or, on each
// torus axis, the distinct data one half of the ring needs and does not hold over the
// links that cross into it, whichever is larger; plus the partial sums' reduction bytes
// over the device's ingress; plus, when anything moves, the least per-step latency or,
// on models that count hops, the hop latency some lacking byte must travel (hopBound),
// whichever is larger. ok is false for models that do not describe their links.
func TimeLowerBound(r *Request) (float64, bool) {
	between := LowerBoundBetween(r, r.Source, r.Target)
	return timeLowerBound(r, between, lowerBoundWith(r, between))
}
