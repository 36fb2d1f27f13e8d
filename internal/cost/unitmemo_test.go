package cost

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TestRoutersOfAKeyShareUnits: two routers of one key in use at once (a request's search
// and its exact pass) compute a permutation's digit unit once between them, and a
// router of another key (another fabric, another mesh) does not see it.
func TestRoutersOfAKeyShareUnits(t *testing.T) {
	c := NewCaches(CacheLimits{})
	v5p, ok := Profile("tpu-v5p")
	require.True(t, ok)
	slow := mustResolve(t, `{"base":"tpu-v5p","links":{"ici":{"bandwidth_gbps":45,"latency_us":2,"topology":"torus","wrap":"cube"}}}`).(*Fabric)
	m, err := sharding.NewMesh("m", []sharding.Axis{{Name: "x", Size: 4}, {Name: "y", Size: 4}, {Name: "z", Size: 4}}, nil)
	require.NoError(t, err)
	p := DigitPermutation{Digits: binaryDigits(m), Bytes: 1 << 20}
	p.Src = []int{1, 0, 3, 2, 5, 4}

	a, b := v5p.AcquireRouter(c, m), v5p.AcquireRouter(c, m)
	other := slow.AcquireRouter(c, m)
	defer a.Release()
	defer b.Release()
	defer other.Release()
	require.NotSame(t, a, b)
	require.Same(t, a.memo, b.memo, "routers of one key share a memo")
	require.NotSame(t, a.memo, other.memo, "another fabric's figures: another memo")

	wantA, okA := a.PriceDigitPermutation(p)
	require.True(t, okA)
	require.Len(t, a.digitUnits, 1)
	require.Empty(t, b.digitUnits)
	wantB, okB := b.PriceDigitPermutation(p)
	require.True(t, okB)
	assert.Equal(t, wantA.Estimate, wantB.Estimate)
	assert.Equal(t, wantA.MaxLinkBytes, wantB.MaxLinkBytes)
	for k, u := range a.digitUnits {
		assert.Same(t, u, b.digitUnits[k], "b took a's unit from the shared memo, not a copy it computed")
	}
	assert.Len(t, a.memo.units, 1)

	_, okO := other.PriceDigitPermutation(p)
	require.True(t, okO)
	for k, u := range a.digitUnits {
		assert.NotSame(t, u, other.digitUnits[k], "another key computes its own")
	}
	st := c.Stats()
	assert.Equal(t, 2, st.UnitKeys)
	assert.Equal(t, len(a.memo.units)+len(a.memo.loads)+len(other.memo.units)+len(other.memo.loads), st.Units)
	assert.Positive(t, st.UnitHits, "b's lookups")
	assert.Positive(t, st.UnitMisses, "a's and other's lookups")
}

// TestSharedUnitsPriceAsFresh: goroutines price random digit permutations and exchanges
// with pooled routers of a few keys, acquired and released between calls (so units
// computed by one router serve the others), and every answer equals, bit for bit, a fresh
// router's. The race detector checks the memo's locking and that published units are
// not written.
func TestSharedUnitsPriceAsFresh(t *testing.T) {
	caches := NewCaches(CacheLimits{})
	v5p, ok := Profile("tpu-v5p")
	require.True(t, ok)
	ring := mustResolve(t, `{"links":{"ici":{"bandwidth_gbps":90,"latency_us":1,"topology":"ring_bidi"}}}`).(*Fabric)
	fabrics := []*Fabric{v5p, ring}
	var meshes []*sharding.Mesh
	for _, spec := range [][]sharding.Axis{
		{{Name: "x", Size: 4}, {Name: "y", Size: 4}, {Name: "z", Size: 4}},
		{{Name: "x", Size: 8}, {Name: "y", Size: 16}},
	} {
		m, err := sharding.NewMesh("m", spec, nil)
		require.NoError(t, err)
		meshes = append(meshes, m)
	}
	type call struct {
		f        *Fabric
		m        *sharding.Mesh
		p        DigitPermutation
		exchange int // the most peers of a device in a digit exchange (0: a permutation)
	}
	rng := rand.New(rand.NewPCG(13, 1))
	var calls []call
	for range 200 {
		c := call{f: fabrics[rng.IntN(len(fabrics))], m: meshes[rng.IntN(len(meshes))]}
		c.p = DigitPermutation{Digits: binaryDigits(c.m)}
		// Few distinct permutations, so that the goroutines meet on the same units.
		c.p.Src = rand.New(rand.NewPCG(uint64(rng.IntN(12)), 5)).Perm(len(c.p.Digits))
		c.p.Bytes = []int64{1, 4096, 1 << 20, 123456789}[rng.IntN(4)]
		if rng.IntN(3) == 0 {
			// An exchange: the holder's first digit is a free one (two transfers each).
			c.exchange = 2
			c.p.Digits = append(c.p.Digits, Digit{Axis: -1, Size: 2})
			c.p.Src = append(c.p.Src, len(c.p.Src))
			c.p.Src[0] = len(c.p.Src) - 1
		}
		calls = append(calls, c)
	}
	price := func(r *Router, c call) (TrafficEstimate, bool) {
		if c.exchange > 0 {
			return r.PriceDigitExchange(c.p, c.exchange, int64(c.m.NumDevices()))
		}
		return r.PriceDigitPermutation(c.p)
	}
	want := make([]TrafficEstimate, len(calls))
	wantOK := make([]bool, len(calls))
	for i, c := range calls {
		want[i], wantOK[i] = price(c.f.NewRouter(c.m), c)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range calls {
				i := (k*7 + g*101) % len(calls)
				c := calls[i]
				r := c.f.AcquireRouter(caches, c.m)
				got, ok := price(r, c)
				r.Release()
				if !assert.Equal(t, wantOK[i], ok, "call %d", i) {
					return
				}
				assert.Equal(t, want[i].Estimate, got.Estimate, "call %d", i)
				assert.Equal(t, want[i].MaxLinkBytes, got.MaxLinkBytes, "call %d", i)
				assert.Equal(t, want[i].MaxHops, got.MaxHops, "call %d", i)
			}
		})
	}
	wg.Wait()
}

// TestUnitMemoBounds: the shared memos never hold more than their Units limit
// together (a memo that finds the bound reached starts over), and past UnitKeys keys
// every memo starts over.
func TestUnitMemoBounds(t *testing.T) {
	const most, keys = 1 << 10, 16
	c := NewCaches(CacheLimits{Units: most, UnitKeys: keys})
	p := &c.units
	a, b := p.of(c, "a"), p.of(c, "b")
	for i := range most / 2 {
		b.putLoad(strconv.Itoa(i), axisLoadRes{calls: i})
	}
	for i := range most {
		a.putUnit(strconv.Itoa(i), &digitUnit{hops: i})
		require.LessOrEqual(t, p.total.Load(), int64(most))
	}
	assert.Len(t, b.loads, most/2, "b is left alone")
	assert.Less(t, len(a.units), most, "a started over")
	assert.Equal(t, int64(len(a.units)+len(b.loads)), p.total.Load())
	u, ok := a.unit([]byte(strconv.Itoa(most - 1)))
	require.True(t, ok, "the last unit is kept")
	assert.Equal(t, most-1, u.hops)
	a.putUnit(strconv.Itoa(most-1), &digitUnit{hops: -1}) // a replacement counts no entry
	assert.Equal(t, int64(len(a.units)+len(b.loads)), p.total.Load())
	assert.Equal(t, len(a.units)+len(b.loads), c.Stats().Units)

	for i := range keys {
		p.of(c, "k"+strconv.Itoa(i))
	}
	assert.LessOrEqual(t, c.Stats().UnitKeys, keys)
	assert.Empty(t, b.loads, "past the key bound every memo starts over")
	assert.Equal(t, int64(0), p.total.Load())
	assert.NotSame(t, a, p.of(c, "a"), "a key seen again gets a new memo")
}
