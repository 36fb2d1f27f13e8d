package cost

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countedA2A is the all_to_all_v of every device to every other on a one-axis mesh of n,
// counting the transfers it yields in *yielded.
func countedA2A(n int, yielded *int) *Traffic {
	return &Traffic{Kind: AllToAllV, Each: func(yield func(from, to []int, bytes int64) bool) {
		a, b := []int{0}, []int{0}
		for i := range n {
			for j := range n {
				if i == j {
					continue
				}
				a[0], b[0] = i, j
				*yielded++
				if !yield(a, b, 64) {
					return
				}
			}
		}
	}}
}

// TestRouterWatchStops: a router watching a closed channel routes at most pollEvery
// transfers of a step before it stops, says so, and stops every later step as fast; one
// watching an open channel (or none) prices exactly as an unwatched one; a released
// router forgets what it watched.
func TestRouterWatchStops(t *testing.T) {
	const n = 509 // prime: 258,572 transfers
	for _, topo := range []string{"ring_bidi", "switch", "h100"} {
		t.Run(topo, func(t *testing.T) {
			f, ok := Profile(topo) // h100: GPU nodes, routeSwitched
			if !ok {
				f = oneLinkModel(t, topo)
			}
			m := testMesh(t, fmt.Sprintf("x=%d", n))
			var all int
			tr := countedA2A(n, &all)
			tr.Mesh = m
			want := f.NewRouter(m).Price(tr)
			require.Equal(t, n*(n-1), all)

			open := f.NewRouter(m)
			open.Watch(make(chan struct{}))
			assert.Equal(t, want.Estimate, open.Price(tr).Estimate)
			assert.False(t, open.Stopped())

			done := make(chan struct{})
			close(done)
			rt := f.NewRouter(m)
			rt.Watch(done)
			for range 3 {
				var k int
				st := countedA2A(n, &k)
				st.Mesh = m
				rt.Price(st)
				assert.True(t, rt.Stopped())
				assert.LessOrEqual(t, k, pollEvery+1, "transfers routed after the channel closed")
			}
		})
	}
	t.Run("release forgets", func(t *testing.T) {
		f := oneLinkModel(t, "ring_bidi")
		m := testMesh(t, fmt.Sprintf("x=%d", n))
		c := NewCaches(DefaultCacheLimits)
		done := make(chan struct{})
		close(done)
		rt := f.AcquireRouter(c, m)
		rt.Watch(done)
		var k int
		tr := countedA2A(n, &k)
		tr.Mesh = m
		rt.Price(tr)
		require.True(t, rt.Stopped())
		rt.Release()
		again := f.AcquireRouter(c, m)
		require.Same(t, rt, again, "the pool gives the router back")
		assert.False(t, again.Stopped())
		k = 0
		got := again.Price(tr)
		assert.Equal(t, n*(n-1), k)
		assert.Equal(t, f.NewRouter(m).Price(tr).Estimate, got.Estimate)
	})
}

// BenchmarkRouterPrice routes the direct all_to_all_v of a 509-device ring (258,572
// transfers) unwatched and watching an open channel (a request's context with a
// deadline): what poll costs routing. cpu-ns/op is the process's CPU time per op, which
// a machine shared with other work disturbs less than ns/op.
func BenchmarkRouterPrice(b *testing.B) {
	const n = 509
	f := oneLinkModel(b, "ring_bidi")
	m := testMesh(b, fmt.Sprintf("x=%d", n))
	var k int
	tr := countedA2A(n, &k)
	tr.Mesh = m
	for _, watch := range []bool{false, true} {
		b.Run(fmt.Sprintf("watched=%v", watch), func(b *testing.B) {
			rt := f.NewRouter(m)
			if watch {
				rt.Watch(make(chan struct{}))
			}
			c0 := cpuTime()
			for b.Loop() {
				rt.Price(tr)
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
