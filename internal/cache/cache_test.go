package cache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backend builds a Cache for a named backend: "memory" (an LRU) or "redis"
// (the shared test Redis, with a per-test key prefix).
type backend struct {
	name string
	open func(t *testing.T, cfg Config) *Cache
}

func backends() []backend {
	return []backend{
		{BackendMemory, func(t *testing.T, cfg Config) *Cache {
			return newTestCache(t, NewLRU(cfg.MaxBytes), cfg)
		}},
		{BackendRedis, func(t *testing.T, cfg Config) *Cache {
			shared := sharedRedis(t)
			cfg.RedisURL, cfg.Prefix = shared.RedisURL, shared.Prefix
			// These tests are about what the cache answers, not about its deadlines (the
			// fault tests are): a call slowed by a loaded machine must not turn a miss
			// into an error.
			if cfg.Timeout == 0 {
				cfg = withSlowClient(cfg)
				cfg.Timeout = callBudget
			}
			if cfg.TTL == 0 {
				cfg.TTL = time.Minute // keep the shared Redis clean
			}
			r, err := NewRedis(cfg)
			require.NoError(t, err)
			return newTestCache(t, r, cfg)
		}},
	}
}

func newTestCache(t testing.TB, s Store, cfg Config) *Cache {
	t.Helper()
	c, err := New(s, cfg, prometheus.NewRegistry())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// counter returns a compute function that counts its calls and returns
// value after delay.
func counter(calls *atomic.Int64, value string, delay time.Duration) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		calls.Add(1)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []byte(value), nil
	}
}

func TestHitAfterMissAndPermalink(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c := b.open(t, Config{Version: "v1"})
			assert.Equal(t, b.name, c.Backend())

			id := PlanID([]byte(`{"canonical":"request"}`))
			key := c.Key(id)
			var calls atomic.Int64

			v, hit, err := c.GetOrCompute(ctx, key, counter(&calls, "plan-1", 0))
			require.NoError(t, err)
			assert.False(t, hit)
			assert.Equal(t, "plan-1", string(v))

			v, hit, err = c.GetOrCompute(ctx, key, counter(&calls, "other", 0))
			require.NoError(t, err)
			assert.True(t, hit, "second call hits")
			assert.Equal(t, "plan-1", string(v), "a hit returns the stored bytes")
			assert.Equal(t, int64(1), calls.Load(), "a hit does not compute")

			got, ok, err := c.Lookup(ctx, id)
			require.NoError(t, err)
			require.True(t, ok, "the plan id finds the memoized plan")
			assert.Equal(t, "plan-1", string(got))

			_, ok, _ = c.Lookup(ctx, PlanID([]byte("never stored")))
			assert.False(t, ok, "absent plan")
			_, ok, _ = c.Lookup(ctx, "../../etc/passwd")
			assert.False(t, ok, "invalid plan id")

			assert.Equal(t, 1.0, testutil.ToFloat64(c.m.hit))
			assert.Equal(t, 1.0, testutil.ToFloat64(c.m.miss))
			assert.Equal(t, 0.0, testutil.ToFloat64(c.m.lookupErr))

			st := c.Status(ctx)
			assert.True(t, st.OK, "status: %+v", st)
			assert.Equal(t, b.name, st.Backend)
			assert.Empty(t, st.Error)
		})
	}
}

func TestVersionSeparatesEntries(t *testing.T) {
	ctx := t.Context()
	store := NewLRU(0)
	v1, err := New(store, Config{Version: "v1"}, nil)
	require.NoError(t, err)
	v2, err := New(store, Config{Version: "v2"}, nil)
	require.NoError(t, err)

	id := PlanID([]byte("req"))
	_, _, err = v1.GetOrCompute(ctx, v1.Key(id), func(context.Context) ([]byte, error) { return []byte("old"), nil })
	require.NoError(t, err)

	_, ok, _ := v2.Lookup(ctx, id)
	assert.False(t, ok, "another planner version does not see the plan")
	v, hit, err := v2.GetOrCompute(ctx, v2.Key(id), func(context.Context) ([]byte, error) { return []byte("new"), nil })
	require.NoError(t, err)
	assert.False(t, hit)
	assert.Equal(t, "new", string(v))
}

func TestTTLExpiry(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c := b.open(t, Config{TTL: time.Second})
			key := c.Key(PlanID([]byte("ttl")))
			var calls atomic.Int64

			_, hit, err := c.GetOrCompute(ctx, key, counter(&calls, "x", 0))
			require.NoError(t, err)
			require.False(t, hit)
			_, hit, err = c.GetOrCompute(ctx, key, counter(&calls, "x", 0))
			require.NoError(t, err)
			require.True(t, hit, "alive before the TTL")

			time.Sleep(1200 * time.Millisecond)
			_, hit, err = c.GetOrCompute(ctx, key, counter(&calls, "x", 0))
			require.NoError(t, err)
			assert.False(t, hit, "expired after the TTL")
			assert.Equal(t, int64(2), calls.Load())
		})
	}
}

func TestConcurrentMissesComputeOnce(t *testing.T) {
	const n = 50
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c := b.open(t, Config{})
			key := c.Key(PlanID([]byte("hot")))
			var calls atomic.Int64
			compute := counter(&calls, "plan", 300*time.Millisecond)

			start := make(chan struct{})
			var wg sync.WaitGroup
			results := make([]string, n)
			errs := make([]error, n)
			hits := make([]bool, n)
			for i := range n {
				wg.Go(func() {
					<-start
					v, hit, err := c.GetOrCompute(ctx, key, compute)
					results[i], hits[i], errs[i] = string(v), hit, err
				})
			}
			close(start)
			wg.Wait()

			assert.Equal(t, int64(1), calls.Load(), "identical concurrent misses compute once")
			for i := range n {
				require.NoError(t, errs[i])
				assert.Equal(t, "plan", results[i])
				assert.False(t, hits[i])
			}
			assert.Equal(t, float64(n-1), testutil.ToFloat64(c.m.coalesced))
			assert.Equal(t, float64(n), testutil.ToFloat64(c.m.miss))

			_, hit, err := c.GetOrCompute(ctx, key, compute)
			require.NoError(t, err)
			assert.True(t, hit)
			assert.Equal(t, int64(1), calls.Load())
		})
	}
}

func TestComputeErrorsAndPanics(t *testing.T) {
	ctx := t.Context()
	c := newTestCache(t, NewLRU(0), Config{})
	key := c.Key(PlanID([]byte("e")))

	boom := errors.New("boom")
	_, _, err := c.GetOrCompute(ctx, key, func(context.Context) ([]byte, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	_, ok, _ := c.Lookup(ctx, PlanID([]byte("e")))
	assert.False(t, ok, "errors are not memoized")

	_, _, err = c.GetOrCompute(ctx, key, func(context.Context) ([]byte, error) { panic("planner bug") })
	pe, ok := errors.AsType[*PanicError](err)
	require.True(t, ok, "got %v", err)
	assert.Equal(t, "planner bug", pe.Value)
	assert.NotEmpty(t, pe.Stack)
}

func TestCallerCancellation(t *testing.T) {
	c := newTestCache(t, NewLRU(0), Config{})
	key := c.Key(PlanID([]byte("c")))
	var calls atomic.Int64
	compute := counter(&calls, "v", 200*time.Millisecond)

	// The leader leaves early; a follower still gets the value, and the
	// value is memoized.
	leaderCtx, cancelLeader := context.WithCancel(t.Context())
	leaderDone := make(chan error, 1)
	go func() {
		_, _, err := c.GetOrCompute(leaderCtx, key, compute)
		leaderDone <- err
	}()
	require.Eventually(t, func() bool { return calls.Load() == 1 }, time.Second, time.Millisecond)
	followerDone := make(chan string, 1)
	go func() {
		v, _, err := c.GetOrCompute(t.Context(), key, compute)
		if err != nil {
			followerDone <- "error: " + err.Error()
			return
		}
		followerDone <- string(v)
	}()
	time.Sleep(20 * time.Millisecond)
	cancelLeader()
	assert.ErrorIs(t, <-leaderDone, context.Canceled, "the leader returns promptly with its ctx error")
	assert.Equal(t, "v", <-followerDone, "the leader leaving does not fail the follower")
	_, ok, _ := c.Lookup(t.Context(), PlanID([]byte("c")))
	assert.True(t, ok, "the write survives the leader's cancellation")
	assert.Equal(t, int64(1), calls.Load())

	// An already-cancelled context neither computes nor counts.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := c.GetOrCompute(done, c.Key(PlanID([]byte("d"))), compute)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), calls.Load())
}

// TestNestedMissRunsInline: a miss met inside another compute runs its compute on the
// calling goroutine (its stack holds the outer compute), is memoized, and a later miss
// outside any compute runs on a goroutine of its own again.
func TestNestedMissRunsInline(t *testing.T) {
	c := newTestCache(t, NewLRU(0), Config{})
	outer, inner := c.Key(PlanID([]byte("outer"))), c.Key(PlanID([]byte("inner")))
	stackOf := func() string {
		buf := make([]byte, 64<<10)
		return string(buf[:runtime.Stack(buf, false)])
	}
	var innerStack string
	innerCompute := func(context.Context) ([]byte, error) {
		innerStack = stackOf()
		return []byte("in"), nil
	}
	v, _, err := c.GetOrCompute(t.Context(), outer, func(ctx context.Context) ([]byte, error) {
		v, hit, err := c.GetOrCompute(ctx, inner, innerCompute)
		require.NoError(t, err)
		require.False(t, hit)
		return append([]byte("out+"), v...), nil
	})
	require.NoError(t, err)
	assert.Equal(t, "out+in", string(v))
	assert.Contains(t, innerStack, "TestNestedMissRunsInline.func3", "the nested compute ran on the outer compute's goroutine")
	_, ok, _ := c.Lookup(t.Context(), PlanID([]byte("inner")))
	assert.True(t, ok, "the nested value is memoized")

	_, _, err = c.GetOrCompute(t.Context(), c.Key(PlanID([]byte("alone"))), innerCompute)
	require.NoError(t, err)
	assert.NotContains(t, innerStack, "TestNestedMissRunsInline.func3", "a top-level miss computes on a goroutine of its own")
	assert.Contains(t, innerStack, "created by github.com/shardplan/shardplan/internal/cache.(*Cache).GetOrCompute")
}

// TestNestedFollowerLeavesAtDeadline: a nested miss on a key another caller is
// computing waits for that compute only until its own deadline; the leader's value is
// still memoized.
func TestNestedFollowerLeavesAtDeadline(t *testing.T) {
	c := newTestCache(t, NewLRU(0), Config{})
	key := c.Key(PlanID([]byte("slow")))
	var calls atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		_, _, err := c.GetOrCompute(t.Context(), key, func(context.Context) ([]byte, error) {
			calls.Add(1)
			close(started)
			<-release // the leader computes until the test lets it finish
			return []byte("v"), nil
		})
		leaderDone <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	nestedErr := make(chan error, 1)
	_, _, err := c.GetOrCompute(ctx, c.Key(PlanID([]byte("outer"))), func(ctx context.Context) ([]byte, error) {
		_, _, err := c.GetOrCompute(ctx, key, counter(&calls, "w", 0))
		nestedErr <- err
		return nil, err
	})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, <-nestedErr, context.DeadlineExceeded, "the nested follower left at its deadline")
	select {
	case err := <-leaderDone:
		t.Fatalf("the leader finished (%v) before it was released", err)
	default:
	}
	close(release)
	require.NoError(t, <-leaderDone)
	assert.Equal(t, int64(1), calls.Load(), "the nested follower did not compute")
	_, ok, _ := c.Lookup(t.Context(), PlanID([]byte("slow")))
	assert.True(t, ok)
}

// TestComputeGoexit: a compute that ends its goroutine instead of returning fails its
// callers rather than leaving them waiting, and a later miss computes again.
func TestComputeGoexit(t *testing.T) {
	c := newTestCache(t, NewLRU(0), Config{})
	key := c.Key(PlanID([]byte("g")))
	_, _, err := c.GetOrCompute(t.Context(), key, func(context.Context) ([]byte, error) {
		runtime.Goexit()
		return nil, nil
	})
	require.ErrorIs(t, err, errComputeExited)
	v, hit, err := c.GetOrCompute(t.Context(), key, func(context.Context) ([]byte, error) { return []byte("x"), nil })
	require.NoError(t, err)
	assert.False(t, hit)
	assert.Equal(t, "x", string(v))
}

// TestBlackholeRedis: a server that accepts connections and never answers
// must cost each request at most about the deadline, never an error.
func TestBlackholeRedis(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn) // hold it open, never reply
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})

	const deadline = 100 * time.Millisecond
	cfg := withSlowClient(Config{RedisURL: "redis://" + l.Addr().String(), Timeout: deadline})
	r, err := NewRedis(cfg)
	require.NoError(t, err)
	c := newTestCache(t, r, cfg)

	for i := range 5 {
		start := time.Now()
		v, hit, err := c.GetOrCompute(t.Context(), c.Key(PlanID(fmt.Appendf(nil, "%d", i))), func(context.Context) ([]byte, error) {
			return []byte("computed"), nil
		})
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.False(t, hit)
		assert.Equal(t, "computed", string(v))
		// A lookup and the synchronous write, each cut at the deadline; a call left to
		// the client's own timeouts would take a minute.
		assert.Less(t, elapsed, callBudget, "call %d took %s", i, elapsed)
	}
	assert.Equal(t, 5.0, testutil.ToFloat64(c.m.lookupErr))
	st := c.Status(t.Context())
	assert.False(t, st.OK)
	assert.NotEmpty(t, st.Error)
}

func TestMetricsRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(NewLRU(0), Config{}, reg)
	require.NoError(t, err)
	_, err = New(NewLRU(0), Config{}, reg)
	assert.ErrorContains(t, err, "already registered", "a second cache on one registry is refused, not a panic")

	_, _, err = c.GetOrCompute(t.Context(), "k", func(context.Context) ([]byte, error) { return []byte("v"), nil })
	require.NoError(t, err)

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)

	n, err := testutil.GatherAndCount(reg, "shardplan_cache_requests_total", "shardplan_cache_operation_duration_seconds")
	require.NoError(t, err)
	assert.Equal(t, 3+3, n, "three results and three operations are pre-declared")

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP shardplan_cache_requests_total Plan cache lookups by result: hit, miss, or error (a store failure served as a miss).
# TYPE shardplan_cache_requests_total counter
shardplan_cache_requests_total{result="error"} 0
shardplan_cache_requests_total{result="hit"} 0
shardplan_cache_requests_total{result="miss"} 1
`), "shardplan_cache_requests_total"))
}

func TestPlanID(t *testing.T) {
	id := PlanID([]byte("abc"))
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", id)
	assert.True(t, ValidPlanID(id))
	for _, bad := range []string{"", "abc", strings.ToUpper(id), id + "0", id[:63] + "g"} {
		assert.False(t, ValidPlanID(bad), "%q", bad)
	}
	c := newTestCache(t, NewLRU(0), Config{Prefix: "p:", Version: "v9"})
	assert.Equal(t, "p:v9:"+id, c.Key(id))
}

func TestCloseWaitsForWrites(t *testing.T) {
	store := NewLRU(0)
	c, err := New(store, Config{}, nil)
	require.NoError(t, err)
	key := c.Key(PlanID([]byte("w")))
	_, _, err = c.GetOrCompute(t.Context(), key, func(context.Context) ([]byte, error) { return []byte("v"), nil })
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")

	// After Close, calls still answer; nothing is written.
	v, hit, err := c.GetOrCompute(t.Context(), "other", func(context.Context) ([]byte, error) { return []byte("v2"), nil })
	require.NoError(t, err)
	assert.False(t, hit)
	assert.Equal(t, "v2", string(v))
}

func TestDoKeysByPlanID(t *testing.T) {
	store := NewLRU(0)
	c := newTestCache(t, store, Config{Prefix: "p:", Version: "v1"})
	id := PlanID([]byte("canonical"))
	v, hit, err := c.Do(t.Context(), id, func(context.Context) ([]byte, error) { return []byte("plan"), nil })
	require.NoError(t, err)
	assert.False(t, hit)
	assert.Equal(t, "plan", string(v))
	raw, ok, err := store.Get(t.Context(), "p:v1:"+id)
	require.NoError(t, err)
	require.True(t, ok, "Do stores under Key(planID)")
	assert.Equal(t, []byte("plan"), raw, "an LRU keeps the payload itself (Redis gets sealed entries: entry_test.go)")
	assert.Same(t, &v[0], &raw[0], "kept without a copy")
	v, hit, err = c.Do(t.Context(), id, func(context.Context) ([]byte, error) { return []byte("other"), nil })
	require.NoError(t, err)
	assert.True(t, hit)
	assert.Equal(t, "plan", string(v))
	got, ok, err := c.Lookup(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "plan", string(got))
}
