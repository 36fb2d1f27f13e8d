package cost

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// randomDigitMap draws a digit map shaped like the planner's exchanges and permutes: real
// digits (on axis 0) of sizes 2, 3 or 4, each reading itself, another real digit of its
// size, or a free digit of its own; and a random set of them above the node boundary.
func randomDigitMap(rng *rand.Rand) (DigitPermutation, []bool) {
	n := 1 + rng.IntN(6)
	var p DigitPermutation
	for range n {
		p.Digits = append(p.Digits, Digit{Axis: 0, Size: 2 + rng.IntN(3)})
	}
	p.Src = make([]int, n)
	for k := range n {
		p.Src[k] = k
		switch rng.IntN(3) {
		case 0:
			if j := rng.IntN(n); p.Digits[j].Size == p.Digits[k].Size {
				p.Src[k] = j
			}
		case 1:
			p.Src[k] = len(p.Digits)
			p.Digits = append(p.Digits, Digit{Axis: -1, Size: p.Digits[k].Size})
			p.Src = append(p.Src, len(p.Digits)-1)
		}
	}
	high := make([]bool, len(p.Digits))
	for k := range n {
		high[k] = rng.IntN(2) == 0
	}
	return p, high
}

// TestSwitchLoadsClosedFormIsTheEnumeration: the closed-form port and NIC loads of a digit
// map equal counting every assignment of its digits, on 3,000 random maps (free digits,
// ties, self-reads, any set of high digits, a low fill); every count the closed form
// takes a maximum over is reached.
func TestSwitchLoadsClosedFormIsTheEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 77))
	seen := map[string]int{}
	checked := 0
	for i := range 3000 {
		p, high := randomDigitMap(rng)
		fill := int64(1 + rng.IntN(3))
		want, ok := switchLoadsEnum(p, high, fill)
		if !ok {
			continue // more assignments than the enumeration takes
		}
		checked++
		got, ok := switchLoadsClosed(p, high, fill)
		require.True(t, ok)
		require.Equal(t, want, got, "%d %+v high %v", i, p, high)
		for name, v := range map[string]int64{"portIn": got.portIn, "portOut": got.portOut, "nicIn": got.nicIn, "nicOut": got.nicOut} {
			if v > 0 {
				seen[name]++
			}
		}
	}
	t.Logf("%d maps, with a load: %v", checked, seen)
	require.Greater(t, checked, 2000)
	for _, name := range []string{"portIn", "portOut", "nicIn", "nicOut"} {
		require.Greater(t, seen[name], 500, name)
	}
}

// TestSwitchLoadsClosedFormDeclines: a free digit read twice, or a transfer left out
// (Same), is not the closed form's; the enumeration counts them.
func TestSwitchLoadsClosedFormDeclines(t *testing.T) {
	twice := DigitPermutation{Digits: []Digit{{Axis: 0, Size: 2}, {Axis: 0, Size: 2}, {Axis: -1, Size: 2}}, Src: []int{2, 2, 2}}
	same := DigitPermutation{Digits: []Digit{{Axis: 0, Size: 2}, {Axis: 0, Size: 2}}, Src: []int{1, 0}, Same: []int{1, -1}}
	for i, p := range []DigitPermutation{twice, same} {
		high := make([]bool, len(p.Digits))
		high[0] = true
		_, ok := switchLoadsClosed(p, high, 1)
		require.False(t, ok, fmt.Sprint(i))
		_, ok = switchLoadsOf(p, high, 1)
		require.True(t, ok, fmt.Sprint(i))
	}
}

// digitTraffic lists every transfer of digit map p on m, for Price: each device is a
// receiver, each assignment of the free digits one transfer (unless Same leaves it
// out), from the device whose digit k is the value of digit Src[k] and whose
// coordinates no digit covers are the receiver's.
func digitTraffic(m *sharding.Mesh, p DigitPermutation, kind Kind) *Traffic {
	return &Traffic{Kind: kind, Mesh: m, Each: func(yield func(from, to []int, bytes int64) bool) {
		var free []int
		for k, d := range p.Digits {
			if d.Axis < 0 {
				free = append(free, k)
			}
		}
		val := make([]int, len(p.Digits))
		from := make([]int, len(m.Axes))
		for pos := range m.NumDevices() {
			to := m.Coords(pos, nil)
			for k, d := range p.Digits {
				if d.Axis >= 0 {
					val[k] = to[d.Axis] / d.Weight % d.Size
				}
			}
			for c := 0; ; c++ {
				x := c
				for _, f := range free {
					val[f] = x % p.Digits[f].Size
					x /= p.Digits[f].Size
				}
				if x > 0 {
					break
				}
				left := p.Same != nil
				for k, j := range p.Same {
					if j >= 0 && val[k] != val[j] {
						left = false
					}
				}
				if left {
					continue
				}
				copy(from, to)
				for k, d := range p.Digits {
					if d.Axis >= 0 {
						from[d.Axis] += (val[p.Src[k]] - val[k]) * d.Weight
					}
				}
				if !yield(from, to, p.Bytes) {
					return
				}
			}
		}
	}}
}

// TestSwitchedDigitsPriceAsRouted: on GPU models, PriceDigitExchange and
// PriceDigitPermutation equal routing every transfer (digitTraffic) on random digit maps
// over random meshes of power-of-two axes, some positions no digit covers (below and
// above the node boundary), 2 to 8 GPUs a node; maps whose node boundary falls inside a
// digit are declined.
func TestSwitchedDigitsPriceAsRouted(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 31))
	var models []*Fabric
	for _, g := range []int{2, 4, 8} {
		models = append(models, mustResolve(t, fmt.Sprintf(`{"base":"h100","gpus_per_node":%d}`, g)).(*Fabric))
	}
	checked, filled, straddled, declined := 0, 0, 0, 0
	for i := range 2500 {
		m := randomMeshOf(t, rng, 1, 4, []int{1, 2, 4, 8})
		// Digits: each axis split in one or two factors, a factor left out now and then.
		var p DigitPermutation
		for a, ax := range m.Axes {
			w := 1
			split := []int{ax.Size}
			if ax.Size >= 4 && rng.IntN(2) == 0 {
				split = []int{2, ax.Size / 2}
			}
			for _, s := range split {
				if s > 1 && rng.IntN(5) != 0 {
					p.Digits = append(p.Digits, Digit{Axis: a, Size: s, Weight: w})
				}
				w *= s
			}
		}
		n := len(p.Digits)
		if n == 0 {
			continue
		}
		p.Src = make([]int, n)
		exchange := i%2 == 0
		perm := rng.Perm(n)
		for k := range n {
			p.Src[k] = k
			if j := perm[k]; !exchange && p.Digits[j].Size == p.Digits[k].Size && p.Src[j] == j && j != k {
				p.Src[k], p.Src[j] = j, k // a swap keeps it a permutation
			}
			if exchange {
				switch rng.IntN(3) {
				case 0:
					if p.Digits[perm[k]].Size == p.Digits[k].Size {
						p.Src[k] = perm[k]
					}
				case 1:
					p.Src[k] = len(p.Digits)
					p.Digits = append(p.Digits, Digit{Axis: -1, Size: p.Digits[k].Size})
					p.Src = append(p.Src, len(p.Digits)-1)
				}
			}
		}
		if exchange && rng.IntN(3) == 0 {
			p.Same = make([]int, len(p.Digits))
			for k := range p.Same {
				p.Same[k] = -1
				if k < n && p.Src[k] != k {
					p.Same[k] = p.Src[k]
				}
			}
		}
		p.Bytes = int64(1 + rng.IntN(1<<20))
		kind := CollectivePermute
		if exchange {
			kind = AllToAllV
		}
		f := models[rng.IntN(len(models))]
		name := fmt.Sprintf("%d %s %s %+v", i, f.Name(), m, p)
		want := f.NewRouter(m).Price(digitTraffic(m, p, kind))
		var got TrafficEstimate
		var ok bool
		if exchange {
			got, ok = f.NewRouter(m).PriceDigitExchange(p, want.MaxPeers, want.Bytes/p.Bytes)
		} else {
			got, ok = f.NewRouter(m).PriceDigitPermutation(p)
		}
		if want.Bytes == 0 {
			require.Zero(t, got.TimeUS, name)
			continue
		}
		if !ok {
			// Declined: the node boundary inside a mixed radix digit cannot be, so it is
			// the enumeration's cap (a transfer left out, past 2^16 assignments).
			q, _, _, _, aligned := f.NewRouter(m).nodeDigits(p)
			require.True(t, aligned, name)
			total := 1
			for _, d := range q.Digits {
				total *= d.Size
			}
			require.True(t, q.Same != nil && total > maxDigitEnum, name)
			declined++
			continue
		}
		require.InDelta(t, want.TimeUS, got.TimeUS, 1e-9*want.TimeUS, name)
		require.InDelta(t, want.LatencyUS, got.LatencyUS, 1e-9*want.LatencyUS, name)
		require.InDelta(t, want.BandwidthUS, got.BandwidthUS, 1e-9*want.BandwidthUS, name)
		require.Equal(t, want.Bytes, got.Bytes, name)
		require.Equal(t, want.MaxPeers, got.MaxPeers, name)
		require.Equal(t, want.MaxHops, got.MaxHops, name)
		require.Equal(t, want.Link, got.Link, name)
		_, _, fill, split, _ := f.NewRouter(m).nodeDigits(p)
		if fill > 1 {
			filled++
		}
		if split {
			straddled++
		}
		checked++
	}
	t.Logf("%d maps checked, %d with uncovered positions inside a node, %d with a digit across the node boundary, %d declined", checked, filled, straddled, declined)
	require.Greater(t, checked, 700)
	require.Greater(t, filled, 50)
	require.Greater(t, straddled, 100)
}
