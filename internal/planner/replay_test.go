package planner

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// testModel is a fixed, topology-free model for planner tests: 1 µs per collective plus
// bytes at 100 GB/s, except all_to_all, whose V counts the whole group (B.0), so it
// divides by the group size like a switch would.
type testModel struct{}

func (testModel) Name() string { return "test" }
func (testModel) Estimate(c cost.Collective) cost.Estimate {
	if c.Bytes == 0 {
		return cost.Estimate{}
	}
	k := int64(sharding.Product(c.Axes))
	b := float64(c.Bytes)
	switch c.Kind {
	case cost.AllToAll:
		b = float64(c.Bytes) / float64(k) * float64(k-1) / float64(k)
	case cost.AllGather, cost.ReduceScatter:
		b = float64(c.Bytes) * float64(k-1) / float64(k)
	case cost.AllReduce:
		b = 2 * float64(c.Bytes) * float64(k-1) / float64(k)
	case cost.AllToAllV:
		// point-to-point exchanges set up more and run slower than tuned collectives
		bw := float64(c.Bytes) * 1.5 / 1e5
		return cost.Estimate{TimeUS: 3 + bw, LatencyUS: 3, BandwidthUS: bw, Link: "test"}
	}
	bw := b / 1e5
	return cost.Estimate{TimeUS: 1 + bw, LatencyUS: 1, BandwidthUS: bw, Link: "test"}
}

// box is a per-dim [start, end) range.
type box [][2]int64

func tileBox(l *sharding.Layout, id int) box {
	return box(l.TileOf(id).Ranges)
}

func (b box) empty() bool {
	for _, r := range b {
		if r[0] >= r[1] {
			return true
		}
	}
	return false
}

// covered reports whether b lies inside the union of boxes us, by splitting b along
// the boundaries of us into cells and checking each cell.
func covered(b box, us []box) bool {
	if b.empty() {
		return true
	}
	rank := len(b)
	cuts := make([][]int64, rank)
	for d := range rank {
		c := []int64{b[d][0], b[d][1]}
		for _, u := range us {
			for _, x := range u[d] {
				if x > b[d][0] && x < b[d][1] {
					c = append(c, x)
				}
			}
		}
		slices.Sort(c)
		cuts[d] = slices.Compact(c)
	}
	idx := make([]int, rank)
	for {
		inside := false
		for _, u := range us {
			ok := true
			for d := range rank {
				lo := cuts[d][idx[d]]
				if lo < u[d][0] || lo >= u[d][1] {
					ok = false
					break
				}
			}
			if ok {
				inside = true
				break
			}
		}
		if !inside {
			return false
		}
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
			return true
		}
	}
}

// groupOf lists the devices that differ from id only in their coordinates on axes.
func groupOf(m *sharding.Mesh, id int, axes []sharding.AxisRef) []int {
	base := m.Coords(m.PositionOf(id), nil)
	var out []int
	c := slices.Clone(base)
	var rec func(k int)
	rec = func(k int) {
		if k == len(axes) {
			out = append(out, m.DeviceAt(m.PositionOfCoords(c)))
			return
		}
		r := axes[k]
		ai := m.AxisIndex(r.Name)
		saved := c[ai]
		for v := 0; v < r.Size; v++ {
			c[ai] += (v - r.Coord(c[ai])) * r.Minor()
			rec(k + 1)
		}
		c[ai] = saved
	}
	rec(0)
	return out
}

// replay runs the plan on per-device boxes of global indices with each op's semantics
// and fails unless every step only uses data its group (or its senders) held, and every
// device ends with exactly its target tile. What a halo collective_permute brings a
// device stays with it (beside its tile) until the next step that is neither a halo
// exchange nor an all_gather; an all_gather hands every member what the group held.
func replay(t *testing.T, p *Plan) {
	t.Helper()
	r := p.Request
	m := r.Mesh
	n := m.NumDevices()
	require.True(t, len(p.Steps) == 0 || r.Source.SameLayout(p.Steps[0].Before), "first step starts at the source")
	cur := r.Source
	var extras map[int][]box // halo pieces each device holds beside its tile
	for i, st := range p.Steps {
		require.Truef(t, cur.SameLayout(st.Before), "step %d before %s != previous after %s", i, st.Before, cur)
		lb := sharding.NewLayout(m, r.Shape, st.Before)
		la := sharding.NewLayout(m, r.Shape, st.After)
		if st.Halo != nil {
			require.Equal(t, OpCollectivePermute, st.Op, "step %d: only a collective_permute exchanges halos", i)
			extras = replayHalo(t, i, st, lb, r.ElemBits, extras)
			cur = st.After
			continue
		}
		switch st.Op {
		case OpAllReduce, OpReduceScatter:
			require.Less(t, sharding.Product(st.After.Unreduced), sharding.Product(st.Before.Unreduced), "step %d reduces", i)
		default:
			require.Equal(t, fmt.Sprint(st.Before.Unreduced), fmt.Sprint(st.After.Unreduced), "step %d keeps partial sums", i)
		}
		var pairsFrom map[int]int
		var incoming map[int][]box
		switch st.Op {
		case OpCollectivePermute:
			pairsFrom = map[int]int{}
			sent := map[int]bool{}
			for _, pr := range Pairs(m, r.Shape, st.Before, st.After) {
				require.False(t, sent[pr[0]], "step %d: device %d sends twice", i, pr[0])
				sent[pr[0]] = true
				pairsFrom[pr[1]] = pr[0]
			}
		case OpAllToAllV:
			incoming = map[int][]box{}
			var most int64
			recv := map[int]int64{}
			for _, tr := range Transfers(m, r.Shape, r.ElemBits, st.Before, st.After, st.NearestHolders) {
				require.True(t, covered(box(tr.Ranges), []box{tileBox(lb, tr.From)}), "step %d: device %d sends %v it does not hold", i, tr.From, tr.Ranges)
				incoming[tr.To] = append(incoming[tr.To], box(tr.Ranges))
				recv[tr.To] += tr.Bytes
				most = max(most, recv[tr.To])
			}
			require.Equal(t, st.BytesPerDevice, most, "step %d: all_to_all_v bytes are the busiest receiver's", i)
		}
		var gathered map[int][]box
		if st.Op == OpAllGather && extras != nil {
			gathered = map[int][]box{}
		}
		for id := range n {
			after := tileBox(la, id)
			var have []box
			switch st.Op {
			case OpSlice:
				have = append([]box{tileBox(lb, id)}, extras[id]...)
			case OpCollectivePermute:
				from, ok := pairsFrom[id]
				require.True(t, ok, "step %d: device %d receives nothing", i, id)
				have = []box{tileBox(lb, from)}
			case OpAllToAllV:
				have = append([]box{tileBox(lb, id)}, incoming[id]...)
			default:
				for _, g := range groupOf(m, id, st.MeshAxes) {
					have = append(have, tileBox(lb, g))
					have = append(have, extras[g]...)
				}
			}
			require.Truef(t, covered(after, have), "step %d (%s over %v): device %d's new tile %v is not made of %v", i, st.Op, st.MeshAxes, id, after, have)
			if gathered != nil {
				gathered[id] = have
			}
		}
		extras = gathered
		cur = st.After
	}
	require.Truef(t, cur.SameLayout(r.Target), "plan ends at %s, want %s", cur, r.Target)
	require.GreaterOrEqual(t, p.Summary.BytesPerDevice, p.Summary.LowerBoundBytesPerDevice, "bytes below the lower bound")
}

// replayHalo checks one halo collective_permute: the sharding stays, every device sends
// at most one piece and receives at most one, each piece is data its sender holds (its
// tile or halo pieces it received earlier), and bytes_per_device is what each sender
// sends, at least the piece's data. It returns what every device holds beside its tile
// afterwards.
func replayHalo(t *testing.T, i int, st Step, lb *sharding.Layout, bits int, extras map[int][]box) map[int][]box {
	t.Helper()
	require.Truef(t, st.Before.SameLayout(st.After), "step %d: a halo exchange keeps the sharding", i)
	out := map[int][]box{}
	for id, bs := range extras {
		out[id] = slices.Clone(bs)
	}
	sent, recv := map[int]bool{}, map[int]bool{}
	ts := st.Halo.Transfers()
	require.NotEmpty(t, ts, "step %d: a halo exchange moves something", i)
	require.Equal(t, len(ts), st.Halo.Count(), "step %d: Count", i)
	for _, tr := range ts {
		require.Falsef(t, sent[tr.From], "step %d: device %d sends twice in one permute", i, tr.From)
		require.Falsef(t, recv[tr.To], "step %d: device %d receives twice in one permute", i, tr.To)
		require.NotEqual(t, tr.From, tr.To, "step %d: a halo comes from another device", i)
		sent[tr.From], recv[tr.To] = true, true
		b := box(tr.Ranges)
		require.Truef(t, covered(b, append([]box{tileBox(lb, tr.From)}, extras[tr.From]...)), "step %d: device %d sends %v it does not hold", i, tr.From, tr.Ranges)
		elems := int64(1)
		for _, rg := range tr.Ranges {
			elems *= max(0, rg[1]-rg[0])
		}
		require.GreaterOrEqual(t, tr.Bytes, sharding.BufferBytes(elems, bits), "step %d: the slice holds the piece", i)
		require.Equal(t, st.BytesPerDevice, tr.Bytes, "step %d: every sender sends the permute's slice", i)
		out[tr.To] = append(out[tr.To], b)
	}
	return out
}

func mustMesh(t testing.TB, s string) *sharding.Mesh {
	m, err := sharding.ParseMeshString(s, "mesh")
	require.NoError(t, err)
	return m
}

func mustSharding(t testing.TB, m *sharding.Mesh, shape []int64, js string) sharding.Sharding {
	s, err := sharding.Parse([]byte(js), m, shape, "s")
	require.NoError(t, err, js)
	return s
}

func plan(t testing.TB, mesh string, shape []int64, bits int, src, tgt string) *Plan {
	m := mustMesh(t, mesh)
	r := &Request{Mesh: m, Shape: shape, ElemBits: bits, Source: mustSharding(t, m, shape, src), Target: mustSharding(t, m, shape, tgt), Model: testModel{}}
	p, err := Reshard(context.Background(), r)
	require.NoError(t, err)
	return p
}

func ops(p *Plan) []Op {
	out := make([]Op, len(p.Steps))
	for i, s := range p.Steps {
		out[i] = s.Op
	}
	return out
}
