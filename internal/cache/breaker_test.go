package cache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probeClock is a Clock that moves only when Advance says so.
type probeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newProbeClock() *probeClock { return &probeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *probeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock by d and fires the waiters it passes.
func (c *probeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

func (c *probeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// settle is how long a test waits for a probe goroutine to do what the fake clock let it
// do: generous, since a loaded machine may be slow to schedule it; nothing is timed.
const settle = 30 * time.Second

// awaitProbeWaiting waits until a probe sleeps on clk.
func awaitProbeWaiting(t *testing.T, clk *probeClock) {
	t.Helper()
	require.Eventually(t, func() bool { return clk.pending() > 0 }, settle, time.Millisecond, "no probe is waiting")
}

var errDial = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}

// TestBreakerStates walks one node's breaker through its states with a fake clock and a
// fake ping: failures below the threshold and failures broken by an answer leave it
// closed; misses, Redis error replies and callers that left are no failures; the
// threshold opens it; an open breaker skips calls; a probe that fails keeps it open and
// probes again; a probe that answers closes it.
func TestBreakerStates(t *testing.T) {
	clk := newProbeClock()
	bs := newBreakers(BreakerConfig{Failures: 3, ProbeInterval: time.Second, Clock: clk}, time.Second)
	t.Cleanup(bs.close)
	var pingErr atomic.Pointer[error]
	var pings atomic.Int64
	setPing := func(err error) { pingErr.Store(&err) }
	setPing(errDial)
	b := bs.node("n1:6379", func(context.Context) error { pings.Add(1); return *pingErr.Load() })
	ctx := context.Background()

	for _, err := range []error{errDial, errDial, nil, errDial, errDial, redis.Nil, errDial, errDial} {
		require.True(t, b.allow())
		b.record(ctx, err)
		require.False(t, b.isOpen(), "never 3 failures in a row yet")
	}
	b.record(ctx, redis.ErrClosed)
	assert.True(t, b.isOpen(), "the third failure in a row opens it")
	assert.Equal(t, breakerStats{Open: 1, Opened: 1}, bs.stats())

	// Open: calls are skipped, counted.
	for range 5 {
		assert.False(t, b.allow())
	}
	assert.Equal(t, uint64(5), bs.stats().Skipped)
	assert.Equal(t, []string{"n1:6379"}, bs.openNodes())

	// A probe that fails: still open, the next probe waits.
	awaitProbeWaiting(t, clk)
	clk.Advance(time.Second)
	require.Eventually(t, func() bool { return pings.Load() == 1 && clk.pending() > 0 }, settle, time.Millisecond)
	assert.True(t, b.isOpen())
	assert.False(t, b.allow())

	// Half the interval does not probe.
	clk.Advance(500 * time.Millisecond)
	assert.Equal(t, int64(1), pings.Load())

	// A probe that answers closes it: calls go through again.
	setPing(nil)
	clk.Advance(500 * time.Millisecond)
	require.Eventually(t, func() bool { return !b.isOpen() }, settle, time.Millisecond)
	assert.Equal(t, int64(2), pings.Load())
	assert.True(t, b.allow())
	assert.Equal(t, breakerStats{Open: 0, Opened: 1, Skipped: 6}, bs.stats())

	// It opens again on new failures, and its probe stops when the store closes.
	for range 3 {
		b.record(ctx, errDial)
	}
	assert.True(t, b.isOpen())
	bs.close() // returns only once every probe has stopped
}

// TestBreakerCounts: what counts as a node failure. A reply of any kind (a miss, an error
// reply such as MOVED or NOAUTH) and a caller that left are not; a dial, a timeout, a
// closed connection, any other error are.
func TestBreakerCounts(t *testing.T) {
	left, leave := context.WithCancel(context.Background())
	leave()
	cases := []struct {
		name   string
		ctx    context.Context
		err    error
		failed bool
	}{
		{"answer", context.Background(), nil, false},
		{"miss", context.Background(), redis.Nil, false},
		{"MOVED", context.Background(), proto("MOVED 3999 127.0.0.1:6381"), false},
		{"NOAUTH", context.Background(), fmt.Errorf("redis get: %w", proto("NOAUTH Authentication required.")), false},
		{"caller left", left, context.Canceled, false},
		{"dial refused", context.Background(), errDial, true},
		{"deadline", context.Background(), context.DeadlineExceeded, true},
		{"cancelled without the caller leaving", context.Background(), context.Canceled, true},
		{"closed connection", context.Background(), redis.ErrClosed, true},
		{"other", context.Background(), errors.New("i/o timeout"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.failed, nodeFailed(tc.ctx, tc.err))
		})
	}
}

// breakerStats counts the breakers of a store's nodes.
type breakerStats struct {
	Open    int    // breakers open now
	Skipped uint64 // calls failed at once since start
	Opened  uint64 // times a breaker opened since start
}

// stats reads the counts the metrics read.
func (bs *breakers) stats() breakerStats {
	return breakerStats{Open: int(bs.open.Load()), Skipped: bs.skipped.Load(), Opened: bs.opened.Load()}
}

// proto is an error reply of Redis as go-redis returns it.
func proto(msg string) error { return redisReply(msg) }

type redisReply string

func (e redisReply) Error() string { return string(e) }
func (e redisReply) RedisError()   {}

// TestBreakerRedisOutage runs a private redis-server and kills it: after the first
// failed calls the node's breaker opens and every later call is skipped without being
// sent (no dial, no timeout); restarted on the same port, a probe (on the fake clock)
// finds it and hits resume.
func TestBreakerRedisOutage(t *testing.T) {
	srv := startRedis(t, 0)
	clk := newProbeClock()
	cfg := withSlowClient(Config{RedisURL: "redis://" + srv.addr(), Timeout: 150 * time.Millisecond, TTL: time.Minute,
		Breaker: BreakerConfig{Failures: 3, ProbeInterval: time.Second, Clock: clk}})
	r, err := NewRedis(cfg)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	c, err := New(r, cfg, reg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	get := func(t require.TestingT, name string) bool {
		v, hit, err := c.GetOrCompute(context.Background(), c.Key(PlanID([]byte(name))), func(context.Context) ([]byte, error) {
			return []byte("plan " + name), nil
		})
		require.NoError(t, err)
		require.Equal(t, "plan "+name, string(v))
		return hit
	}
	require.False(t, get(t, "a"))
	require.True(t, get(t, "a"))

	srv.stop()
	// A lookup and a write per call: the breaker opens within the first two calls.
	var slowest time.Duration
	for i := range 2 {
		start := time.Now()
		assert.False(t, get(t, fmt.Sprint("down-", i)))
		slowest = max(slowest, time.Since(start))
	}
	require.Equal(t, breakerStats{Open: 1, Opened: 1, Skipped: 1}, r.breakers.stats(), "3 failures open it; the 4th call is skipped")
	assert.Equal(t, []string{srv.addr()}, c.UnreachableNodes())

	// From now on nothing is sent: every lookup and write is skipped.
	var skippedSlowest time.Duration
	const calls = 20
	for i := range calls {
		start := time.Now()
		assert.False(t, get(t, fmt.Sprint("skipped-", i)))
		skippedSlowest = max(skippedSlowest, time.Since(start))
	}
	assert.Equal(t, uint64(1+2*calls), r.breakers.stats().Skipped, "a lookup and a write per call, all skipped")
	assert.Equal(t, 1.0, gathered(t, reg, "shardplan_cache_nodes_unreachable"))
	t.Logf("with the node dead: slowest call %s before the breaker opened, %s after", slowest, skippedSlowest)

	// Back on the same port: the next probe closes the breaker and hits resume.
	srv.start()
	require.Eventually(t, func() bool {
		if clk.pending() > 0 {
			clk.Advance(time.Second)
		}
		return len(c.UnreachableNodes()) == 0
	}, settle, 5*time.Millisecond)
	assert.False(t, get(t, "back"))
	assert.True(t, get(t, "back"))
	assert.Equal(t, 0.0, gathered(t, reg, "shardplan_cache_nodes_unreachable"))
}

// gathered is the value of the gauge or counter name on reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestBreakerCluster runs a 3-master Redis Cluster and kills one master: only its node's
// breaker opens, the keys of its slots are skipped without a call while the keys of the
// other masters still hit, and after the master is back a probe (on the fake clock)
// closes the breaker and its keys hit again.
func TestBreakerCluster(t *testing.T) {
	cli := lookPath(t, "redis-cli")
	confDir := t.TempDir()
	var nodes []*redisServer
	var addrs []string
	for i := range 3 {
		n := startRedis(t, freePort(t, true),
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(confDir, fmt.Sprintf("nodes-%d.conf", i)),
			"--cluster-node-timeout", "2000")
		nodes = append(nodes, n)
		addrs = append(addrs, n.addr())
	}
	ctx, cancel := context.WithTimeout(t.Context(), settle)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	out, err := execOutput(ctx, confDir, cli, args...)
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	clusterOK := func(ct *assert.CollectT) {
		for _, a := range addrs {
			info, err := clusterInfo(ctx, a)
			if assert.NoError(ct, err) {
				assert.Equal(ct, "ok", info["cluster_state"], a)
			}
		}
	}
	require.EventuallyWithT(t, clusterOK, settle, 50*time.Millisecond)

	clk := newProbeClock()
	cfg := Config{RedisURL: fmt.Sprintf("redis://%s?addr=%s&addr=%s", addrs[0], addrs[1], addrs[2]), TTL: time.Minute, Timeout: 150 * time.Millisecond,
		Breaker: BreakerConfig{Failures: 3, ProbeInterval: time.Second, Clock: clk}}
	r, err := NewRedis(cfg)
	require.NoError(t, err)
	cc, ok := r.Client().(*redis.ClusterClient)
	require.True(t, ok)
	c := newTestCache(t, r, cfg)

	const n = 30
	dead := addrs[2]
	onDead := map[int]bool{}
	get := func(t require.TestingT, i int) bool {
		v, hit, err := c.GetOrCompute(context.Background(), c.Key(PlanID(fmt.Appendf(nil, "req-%d", i))), func(context.Context) ([]byte, error) {
			return fmt.Appendf(nil, "plan-%d", i), nil
		})
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint("plan-", i), string(v))
		return hit
	}
	for i := range n {
		require.False(t, get(t, i))
		m, err := cc.MasterForKey(t.Context(), c.Key(PlanID(fmt.Appendf(nil, "req-%d", i))))
		require.NoError(t, err)
		onDead[i] = m.Options().Addr == dead
	}
	require.NotEmpty(t, onDead)

	nodes[2].stop()
	for range 2 { // the breaker opens on the first failed calls
		for i := range n {
			assert.Equal(t, !onDead[i], get(t, i), "key %d: hit unless its master is dead", i)
		}
	}
	require.Equal(t, []string{dead}, c.UnreachableNodes())
	before := r.breakers.stats().Skipped
	deadKeys := 0
	for i := range n {
		assert.Equal(t, !onDead[i], get(t, i), "key %d", i)
		if onDead[i] {
			deadKeys++
		}
	}
	assert.Equal(t, uint64(2*deadKeys), r.breakers.stats().Skipped-before, "a lookup and a write skipped per key of the dead master, none for the others")

	nodes[2].start()
	require.EventuallyWithT(t, clusterOK, settle, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		if clk.pending() > 0 {
			clk.Advance(time.Second)
		}
		return len(c.UnreachableNodes()) == 0
	}, settle, 5*time.Millisecond)
	for i := range n {
		if onDead[i] {
			get(t, i) // lost with the master's memory: stored again
		}
		assert.True(t, get(t, i), "key %d hits again", i)
	}
}
