package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/transfer"
)

// randomTransfer is a random transfer on up to four nodes of 1, 2 or 4 GPUs: a source
// mesh and one to three disjoint target replicas anywhere on the fabric, one to three
// tensor entries (some repeated) of random shapes, widths and shardings.
func randomTransfer(t testing.TB, rng *rand.Rand) *transfer.Problem {
	g := []int{1, 2, 4}[rng.IntN(3)]
	n := g * (1 + rng.IntN(4))
	p := &transfer.Problem{Fabric: &transfer.Fabric{Name: "test", GPUsPerNode: g, NVLinkBW: 400, NICBW: 40, NVLinkLat: 0.5, NICLat: 2, Base: 5, Additive: true}, Devices: n}
	mesh := func(most int) *sharding.Mesh {
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
				require.NoError(t, err)
				return m
			}
		}
	}
	perm := rng.Perm(n)
	sm := mesh(n)
	p.Source = transfer.Placement{Name: "source", Field: "source", Mesh: sm, Devices: perm[:sm.NumDevices()]}
	tm := mesh(n)
	perm = rng.Perm(n)
	for r := range max(1, min(1+rng.IntN(3), n/tm.NumDevices())) {
		k := tm.NumDevices()
		p.Targets = append(p.Targets, transfer.Placement{Name: "replica", Field: fmt.Sprintf("targets[%d]", r), Mesh: tm, Devices: perm[r*k : (r+1)*k]})
	}
	shard := func(m *sharding.Mesh, shape []int64) sharding.Sharding {
		dims := make([][]string, len(shape))
		for _, a := range m.Axes {
			if d := rng.IntN(len(shape) + 1); d < len(shape) {
				dims[d] = append(dims[d], a.Name)
			}
		}
		raw, _ := json.Marshal(dims)
		s, err := sharding.Parse(raw, m, shape, "s")
		require.NoError(t, err)
		return s
	}
	for i := range 1 + rng.IntN(3) {
		shape := make([]int64, 1+rng.IntN(2))
		scale := []int64{1, 1, 16, 128}[rng.IntN(4)] // larger tensors take several buckets
		if len(shape) == 2 {
			scale = min(scale, 16)
		}
		for d := range shape {
			shape[d] = int64(1+rng.IntN(12)) * scale
		}
		p.Tensors = append(p.Tensors, transfer.Tensor{Name: fmt.Sprintf("t%d", i), Field: fmt.Sprintf("tensors[%d]", i), Shape: shape,
			ElemBits: []int{8, 16, 32}[rng.IntN(3)], Source: shard(sm, shape), Target: shard(tm, shape), Count: 1 + rng.IntN(3)})
	}
	require.NoError(t, p.Validate())
	return p
}

// runTransfer runs s on symbolic tensors: every target tile of every tensor ends whole
// and exact, each element written once.
func runTransfer(t *testing.T, s *Schedule) {
	t.Helper()
	states := map[int]state{}
	for _, r := range s.Ranks {
		st := state{}
		for _, b := range r.Buffers {
			require.Len(t, b.Global, len(s.Tensors[b.Tensor].Shape), "rank %d: buffer %s of tensor %d", r.Rank, b.Name, b.Tensor)
			k := bufKey{b.Tensor, b.Name, b.Index}
			switch f := s.Tensors[b.Tensor].Fused; {
			case b.Name == BufSource && f != nil:
				// A part's elements are numbered by their place in the fused tensor.
				st[k] = fill(shift(b.Global, f.Dim, f.Offset), s.Tensors[f.Tensor].Shape, 1)
				st[k].at = b.Global
			case b.Name == BufSource:
				st[k] = fill(b.Global, s.Tensors[b.Tensor].Shape, 1)
			default:
				st[k] = newBuf(b.Global)
			}
		}
		states[r.Rank] = st
	}
	for bk := range s.Buckets {
		for ph := range s.Phases {
			err := runPhase(s, states, func(r *Rank) *Phase {
				for i := range r.Phases {
					if r.Phases[i].Bucket == bk && r.Phases[i].Phase == ph {
						return &r.Phases[i]
					}
				}
				return nil
			})
			require.NoError(t, err, "bucket %d phase %d", bk, ph)
		}
	}
	targets := 0
	for _, r := range s.Ranks {
		for _, b := range r.Buffers {
			if b.Name != BufTarget {
				continue
			}
			targets++
			require.NoError(t, states[r.Rank][bufKey{b.Tensor, b.Name, b.Index}].check(s.Tensors[b.Tensor].Shape, 1, true),
				"rank %d: target tile %d of tensor %q", r.Rank, b.Index, s.Tensors[b.Tensor].Name)
		}
	}
	require.Positive(t, targets)
}

// schedules yields the schedule of case i, p, under every strategy that applies.
func schedules(t *testing.T, p *transfer.Problem, i int) iter.Seq2[string, *Schedule] {
	return func(yield func(string, *Schedule) bool) {
		for _, strategy := range transfer.Strategies {
			if (strategy == "chain" || strategy == "tree") && len(p.Targets) < 2 {
				continue
			}
			p.Strategy = strategy
			res, err := transfer.Plan(context.Background(), p)
			require.NoError(t, err)
			s, err := Transfer(context.Background(), p, res)
			require.NoError(t, err, "case %d %s", i, strategy)
			if !yield(strategy, s) {
				return
			}
		}
	}
}

// TestTransferReplay runs the schedules of random transfers, under every strategy, on
// symbolic tensors: every target device ends with exactly its tile of every tensor.
func TestTransferReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 2))
	n := 80
	if testing.Short() {
		n = 25
	}
	buckets, multi := 0, 0
	for i := range n {
		p := randomTransfer(t, rng)
		for strategy, s := range schedules(t, p, i) {
			buckets = max(buckets, s.Buckets)
			if s.Buckets > 1 {
				multi++
			}
			if !t.Run(fmt.Sprintf("%d/%s", i, strategy), func(t *testing.T) { runTransfer(t, s) }) {
				t.FailNow()
			}
		}
	}
	t.Logf("%d schedules of several buckets, at most %d", multi, buckets)
	require.Positive(t, multi, "no schedule of several buckets")
}

// addFused adds a fused target to p: 2 or 3 parts of uneven sizes along a random dim,
// repeated alike, each with its own source sharding, under one fused target sharding.
func addFused(t testing.TB, rng *rand.Rand, p *transfer.Problem) {
	rank := 1 + rng.IntN(2)
	dim := rng.IntN(rank)
	base := make([]int64, rank)
	for d := range base {
		base[d] = int64(1 + rng.IntN(10))
	}
	fused := slices.Clone(base)
	fused[dim] = 0
	bits, count := []int{8, 16, 32}[rng.IntN(3)], 1+rng.IntN(3)
	names, err := transfer.NewNames("fused{i}", count, 1, "fused[0].name")
	require.NoError(t, err)
	first := len(p.Tensors)
	for k := range 2 + rng.IntN(2) {
		shape := slices.Clone(base)
		shape[dim] = int64(1 + rng.IntN(9))
		p.Tensors = append(p.Tensors, transfer.Tensor{Name: fmt.Sprintf("part%d", k), Field: fmt.Sprintf("tensors[%d]", len(p.Tensors)), Shape: shape,
			ElemBits: bits, Source: randomSharding(rng, p.Source.Mesh, rank, false), Count: count,
			Fused: &transfer.FusedPart{Dim: dim, Offset: fused[dim], Entry: 0, Name: "fused{i}", Names: names}})
		fused[dim] += shape[dim]
	}
	target := randomSharding(rng, p.Targets[0].Mesh, rank, false)
	for i := first; i < len(p.Tensors); i++ {
		p.Tensors[i].Fused.Shape, p.Tensors[i].Target = fused, target
	}
	require.NoError(t, p.Validate())
}

// TestTransferFusedReplay runs the schedules of random transfers with a fused target
// beside plain tensors, under every strategy, on symbolic tensors: every target device
// lists one buffer per fused tensor, its fused tile, and ends with exactly that tile,
// element by element (runTransfer), the parts' receives writing at their offsets.
func TestTransferFusedReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 46))
	n := 80
	if testing.Short() {
		n = 25
	}
	paths := map[string]int{}
	defer func() {
		t.Logf("operations on fused buffers: %v", paths)
		// Stage copies into a fused buffer are logged, not required: these cases'
		// moves land inside a target tile.
		for _, k := range []string{"recv", "send from target"} {
			assert.Positive(t, paths[k], "no case takes the path %q", k)
		}
	}()
	for i := range n {
		p := randomTransfer(t, rng)
		addFused(t, rng, p)
		var fp *transfer.Tensor
		for ti := range p.Tensors {
			if p.Tensors[ti].Fused != nil {
				fp = &p.Tensors[ti]
				break
			}
		}
		// The fused tiles every target device must hold, per placement.
		want := map[[2]int]Box{}
		for k, tp := range p.Targets {
			l := sharding.NewLayout(tp.Mesh, fp.Fused.Shape, fp.Target)
			for pos, g := range tp.Devices {
				if b := Box(l.TileOf(tp.Mesh.DeviceAt(pos)).Ranges); !b.empty() {
					want[[2]int{g, k}] = b
				}
			}
		}
		for strategy, s := range schedules(t, p, i) {
			fusedTensors := 0
			for fi, ft := range s.Tensors {
				if len(ft.Parts) == 0 {
					continue
				}
				fusedTensors++
				require.Equal(t, fp.Fused.Shape, ft.Shape)
				require.Equal(t, fp.Fused.Names.At(fusedTensors-1), ft.Name)
				off := int64(0)
				for _, pj := range ft.Parts {
					f := s.Tensors[pj].Fused
					require.NotNil(t, f)
					require.Equal(t, FusedIn{Tensor: fi, Dim: fp.Fused.Dim, Offset: off}, *f)
					off += s.Tensors[pj].Shape[f.Dim]
				}
				require.Equal(t, ft.Shape[fp.Fused.Dim], off)
				got := map[[2]int]Box{}
				for _, r := range s.Ranks {
					for _, b := range r.Buffers {
						if b.Tensor == fi {
							require.Equal(t, BufTarget, b.Name)
							key := [2]int{r.Rank, b.Index}
							require.NotContains(t, got, key, "rank %d lists fused tensor %d twice", r.Rank, fi)
							got[key] = b.Global
						}
					}
				}
				require.Equal(t, want, got, "case %d %s: the fused target buffers", i, strategy)
			}
			require.Equal(t, fp.Count, fusedTensors)
			// The paths into a fused buffer the cases take: a receive, a copy from a
			// stage piece, a send out of it (a relay passing on what it holds).
			for _, r := range s.Ranks {
				for _, ph := range r.Phases {
					for _, op := range ph.Ops {
						switch {
						case s.Tensors[op.Tensor].Fused == nil:
						case op.Kind == OpRecv && op.Dst == BufTarget:
							paths["recv"]++
						case op.Kind == OpCopy && op.Src == BufStage && op.Dst == BufTarget:
							paths["stage copy"]++
						case op.Kind == OpSend && op.Src == BufTarget:
							paths["send from target"]++
						}
					}
				}
			}
			if !t.Run(fmt.Sprintf("%d/%s", i, strategy), func(t *testing.T) { runTransfer(t, s) }) {
				t.FailNow()
			}
		}
	}
}
