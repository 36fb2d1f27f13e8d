package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// hog is a request that used to keep its compute slot long after its answer was due
// (the service now bounds its work), with the status it must get.
type hog struct {
	name   string
	path   string
	status int
	body   func(i int) string // the i-th copy, uncached: it differs from every other
}

// hogs are the slot-hogging requests of testdata/hostile, each made unique per copy.
var hogs = []hog{
	{"hop table x=65536", "/v1/reshard", http.StatusOK, func(i int) string {
		return fmt.Sprintf(`{"mesh":"x=65536","shape":[%d],"dtype":"f32","source":[["x"]],"target":[null]}`, 65536*(i+1))
	}},
	{"concatenate of 20,000", "/v1/graph", http.StatusOK, func(i int) string {
		var ts, ops strings.Builder
		for k := range 20000 {
			fmt.Fprintf(&ts, `"t%d_%d":{"shape":[4,8],"dtype":"f32","sharding":[["x"],null]},`, i, k)
			if k > 0 {
				ops.WriteByte(',')
			}
			fmt.Fprintf(&ops, `"t%d_%d"`, i, k)
		}
		return `{"mesh":"x=2","tensors":{` + ts.String() + `"out":{"shape":[80000,8],"dtype":"f32"}},"ops":[{"name":"c","op":"concatenate","operands":[` + ops.String() + `],"results":["out"],"attrs":{"dimension":0}}]}`
	}},
	{"40 tensors of 100,000 axes", "/v1/graph", http.StatusBadRequest, func(i int) string {
		axes := strings.Repeat(`"x",`, 99999) + `"x"`
		var ts []string
		for k := range 40 {
			ts = append(ts, fmt.Sprintf(`"b%d_%d":{"shape":[4],"dtype":"f32","sharding":[[%s]]}`, i, k, axes))
		}
		return `{"mesh":"x=2","tensors":{` + strings.Join(ts, ",") + `},"ops":[]}`
	}},
	{"mesh nested 9,000 deep", "/v1/reshard", http.StatusBadRequest, func(i int) string {
		return `{"mesh":` + strings.Repeat(`{"a":`, 9000) + strconv.Itoa(i) + strings.Repeat("}", 9000) + `,"shape":[4],"dtype":"f32","source":[null],"target":[null]}`
	}},
}

// hogRun sends n of the slot-hogging requests at once (round robin over hogs) while
// probing, every 20 ms, /healthz, a cached hit and a small uncached plan. It prints the
// hogs' answers by status, the probes' latencies and how long the compute slots took
// to be free after the last hog's answer; it returns how many answers were unexpected
// (a hog's status other than its own, a probe that is not 200 with the right bytes, a
// /healthz p99 of 50 ms or more).
func hogRun(ctx context.Context, srv *server, reqs []*request, n int) int64 {
	var hit *request
	for _, r := range reqs {
		if r.status == http.StatusOK && r.path == "/v1/reshard" {
			hit = r
			break
		}
	}
	bodies := make([][]byte, n) // built before the clock starts
	for i := range n {
		bodies[i] = []byte(hogs[i%len(hogs)].body(i))
	}
	var bad atomic.Int64
	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		h := hogs[i%len(hogs)]
		wg.Go(func() {
			status, _, err := do(ctx, srv.base, http.MethodPost, h.path, bodies[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				status = -1
			}
			statuses[fmt.Sprintf("%s: %d", h.name, status)]++
			if status != h.status {
				bad.Add(1)
			}
		})
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	var health, hits, small []time.Duration
	var probes sync.WaitGroup
	// Each probe runs on its own, every 20 ms: a slow one does not thin out the others.
	probe := func(into *[]time.Duration, method, path string, body func(k int) []byte, want []byte) {
		probes.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for k := 0; ; k++ {
				select {
				case <-probeCtx.Done():
					return
				case <-tick.C:
				}
				t0 := time.Now()
				status, got, err := do(probeCtx, srv.base, method, path, body(k))
				if probeCtx.Err() != nil {
					return
				}
				*into = append(*into, time.Since(t0))
				if err != nil || status != http.StatusOK || want != nil && !bytes.Equal(got, want) {
					bad.Add(1)
				}
			}
		})
	}
	probe(&health, http.MethodGet, "/healthz", func(int) []byte { return nil }, nil)
	probe(&hits, hit.method, hit.path, func(int) []byte { return hit.body }, hit.want)
	probe(&small, http.MethodPost, "/v1/reshard", func(k int) []byte {
		return fmt.Appendf(nil, `{"mesh":"x=2,y=4","shape":[%d,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`, 8*(k+1000))
	}, nil)
	wg.Wait()
	took := time.Since(start)
	freed := slotsFree(ctx, srv.base)
	stopProbes()
	probes.Wait()
	fmt.Printf("hogs: %d slot-hogging requests at once, all answered in %s; compute slots free %s after the last answer\n", n, took.Round(time.Millisecond), freed)
	for _, k := range slices.Sorted(maps.Keys(statuses)) {
		fmt.Printf("  %s: %d\n", k, statuses[k])
	}
	p99 := quantile(health, 0.99)
	fmt.Printf("  /healthz       %s\n", latencies(health))
	fmt.Printf("  cached hit     %s\n", latencies(hits))
	fmt.Printf("  small uncached %s\n", latencies(small))
	if p99 >= 50*time.Millisecond {
		fmt.Printf("  /healthz p99 %s is 50 ms or more\n", p99)
		bad.Add(1)
	}
	if freed < 0 {
		fmt.Println("  compute slots still taken 1 s after the last answer")
		bad.Add(1)
	}
	fmt.Printf("  unexpected     %d\n", bad.Load())
	return bad.Load()
}

// slotsFree polls shardplan_computing_requests until no request holds a compute slot,
// and returns how long that took (-1: still taken after a second).
func slotsFree(ctx context.Context, base string) time.Duration {
	start := time.Now()
	for time.Since(start) < time.Second {
		status, body, err := do(ctx, base, http.MethodGet, "/metrics", nil)
		if err == nil && status == http.StatusOK {
			sc := bufio.NewScanner(bytes.NewReader(body))
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "shardplan_computing_requests "); ok && strings.TrimSpace(v) == "0" {
					return time.Since(start).Round(time.Millisecond)
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return -1
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

func latencies(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 %s  p99 %s  max %s (%d probes)", quantile(ds, 0.5), quantile(ds, 0.99), slices.Max(ds), len(ds))
}
