package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// primeHogs are requests whose planning grows with the square of a prime axis's size
// (a prime axis has no sub-axes to move in parts), each made unique per copy so that
// none is answered from the cache: the kind of input that, sent in a steady trickle,
// keeps every core busy unless the work stops at each request's deadline.
var primeHogs = []func(i int) string{
	func(i int) string {
		return fmt.Sprintf(`{"mesh":"x=65521","shape":[%d],"dtype":"f32","source":[["x"]],"target":[null]}`, 196563+65521*i)
	},
	func(i int) string {
		return fmt.Sprintf(`{"mesh":"x=32749","shape":[%d],"dtype":"f32","source":[["x"]],"target":[null]}`, 65498+32749*i)
	},
	func(i int) string {
		return fmt.Sprintf(`{"mesh":"x=2,y=32749","shape":[%d],"dtype":"f32","source":[["x","y"]],"target":[["y","x"]]}`, 65498*(i+1))
	},
	func(i int) string {
		return fmt.Sprintf(`{"mesh":"x=65521","shape":[%d],"dtype":"f32","source":[["x"]],"target":[null],"effort":"fast"}`, 196563+65521*i)
	},
	func(i int) string {
		return fmt.Sprintf(`{"mesh":"x=32749","shape":[%d],"dtype":"f32","source":[["x"]],"target":[null],"full_rematerialization":"allow"}`, 65498+32749*i)
	},
}

// hogMix runs alongside the soak's load until ctx ends: n clients each send prime-axis
// hogs back to back, while /healthz is probed every 20 ms and a small uncached reshard
// every 50 ms. The report says what the hogs got, /healthz's latencies and how many
// small requests were refused 503 (timed out or overloaded behind the hogs).
type hogMix struct {
	mu       sync.Mutex
	hogs     map[int]int
	health   []time.Duration
	healthKO int
	small    map[int]int
	smallLat []time.Duration
	wait     func()
}

func runHogMix(ctx context.Context, base string, n int) *hogMix {
	m := &hogMix{hogs: map[int]int{}, small: map[int]int{}}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1))
				status, _, err := do(ctx, base, http.MethodPost, "/v1/reshard", []byte(primeHogs[i%len(primeHogs)](i)))
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					status = -1
				}
				m.mu.Lock()
				m.hogs[status]++
				m.mu.Unlock()
			}
		})
	}
	every := func(d time.Duration, fn func(k int)) {
		wg.Go(func() {
			tick := time.NewTicker(d)
			defer tick.Stop()
			for k := 0; ; k++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				fn(k)
			}
		})
	}
	every(20*time.Millisecond, func(int) {
		t0 := time.Now()
		status, _, err := do(ctx, base, http.MethodGet, "/healthz", nil)
		d := time.Since(t0)
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.health = append(m.health, d)
		if err != nil || status != http.StatusOK {
			m.healthKO++
		}
	})
	every(50*time.Millisecond, func(k int) {
		body := fmt.Appendf(nil, `{"mesh":"x=2,y=4","shape":[%d,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`, 8*(k+2000))
		t0 := time.Now()
		status, _, err := do(ctx, base, http.MethodPost, "/v1/reshard", body)
		d := time.Since(t0)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			status = -1
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.small[status]++
		m.smallLat = append(m.smallLat, d)
	})
	m.wait = wg.Wait
	return m
}

// print reports the mix; it returns how many answers were unexpected: a /healthz that was
// not 200, a hog or small request answered other than 200, 422 or 503.
func (m *hogMix) print(n int) int64 {
	m.wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	var bad int64
	fmt.Printf("hog mix: %d clients sending prime-axis reshards back to back\n", n)
	for _, s := range slices.Sorted(maps.Keys(m.hogs)) {
		fmt.Printf("  hogs status %d: %d\n", s, m.hogs[s])
		if s != http.StatusOK && s != http.StatusUnprocessableEntity && s != http.StatusServiceUnavailable {
			bad += int64(m.hogs[s])
		}
	}
	fmt.Printf("  /healthz       %s, not 200: %d\n", latencies(m.health), m.healthKO)
	bad += int64(m.healthKO)
	total := 0
	for _, c := range m.small {
		total += c
	}
	fmt.Printf("  small uncached %s\n", latencies(m.smallLat))
	fmt.Printf("  small uncached 503s: %d of %d\n", m.small[http.StatusServiceUnavailable], total)
	for _, s := range slices.Sorted(maps.Keys(m.small)) {
		if s != http.StatusOK && s != http.StatusServiceUnavailable {
			fmt.Printf("  small uncached status %d: %d\n", s, m.small[s])
			bad += int64(m.small[s])
		}
	}
	return bad
}
