package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

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
			if b.Name == BufSource {
				st[k] = fill(b.Global, s.Tensors[b.Tensor].Shape, 1)
			} else {
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
		for _, strategy := range transfer.Strategies {
			if (strategy == "chain" || strategy == "tree") && len(p.Targets) < 2 {
				continue
			}
			p.Strategy = strategy
			res, err := transfer.Plan(context.Background(), p)
			require.NoError(t, err)
			s, err := Transfer(context.Background(), p, res)
			require.NoError(t, err, "case %d %s", i, strategy)
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
