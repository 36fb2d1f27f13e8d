package cache

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedisOutage runs a private redis-server, kills it mid-run (calls keep
// answering with computed values, no error, within about the deadline) and
// restarts it on the same port (hits resume).
func TestRedisOutage(t *testing.T) {
	srv := startRedis(t, 0)
	const deadline = 150 * time.Millisecond
	cfg := withSlowClient(Config{RedisURL: "redis://" + srv.addr(), Timeout: deadline, TTL: time.Minute})
	r, err := NewRedis(cfg)
	require.NoError(t, err)
	c := newTestCache(t, r, cfg)

	var calls atomic.Int64
	get := func(t require.TestingT, name string) (hit bool, elapsed time.Duration) {
		start := time.Now()
		v, hit, err := c.GetOrCompute(context.Background(), c.Key(PlanID([]byte(name))), func(context.Context) ([]byte, error) {
			calls.Add(1)
			return []byte("plan " + name), nil
		})
		elapsed = time.Since(start)
		require.NoError(t, err)
		require.Equal(t, "plan "+name, string(v))
		return hit, elapsed
	}

	// Up: miss, then hit.
	hit, _ := get(t, "a")
	require.False(t, hit)
	hit, _ = get(t, "a")
	require.True(t, hit)
	require.True(t, c.Status(t.Context()).OK)

	// Down: every call is a computed miss within about the deadline.
	srv.stop()
	for i := range 12 {
		hit, elapsed := get(t, fmt.Sprint("down-", i%4))
		assert.False(t, hit)
		// A lookup and the synchronous write, each cut at the deadline; a call left to
		// the client's own timeouts would take a minute.
		assert.Less(t, elapsed, callBudget, "call %d took %s", i, elapsed)
	}
	hit, _ = get(t, "a")
	assert.False(t, hit, "a memoized plan is recomputed while Redis is down")
	assert.GreaterOrEqual(t, testutil.ToFloat64(c.m.lookupErr), 13.0, "every failed lookup is counted")
	assert.Positive(t, testutil.ToFloat64(c.m.errors.WithLabelValues(opSet)), "failed writes are counted")
	st := c.Status(t.Context())
	assert.False(t, st.OK)
	assert.Equal(t, BackendRedis, st.Backend)

	// Back on the same port: hits resume.
	srv.start()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		get(ct, "back")
		hit, _ := get(ct, "back")
		assert.True(ct, hit)
	}, 5*time.Second, 50*time.Millisecond)
	assert.True(t, c.Status(t.Context()).OK)
}

// TestCluster starts a three-node Redis Cluster and runs hit/miss, permalinks
// and Status (every shard pinged) through the cluster client.
func TestCluster(t *testing.T) {
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

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	out, err := execOutput(ctx, confDir, cli, args...)
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, a := range addrs {
			info, err := clusterInfo(ctx, a)
			if assert.NoError(ct, err) {
				assert.Equal(ct, "ok", info["cluster_state"], a)
			}
		}
	}, 10*time.Second, 50*time.Millisecond)

	cfg := Config{RedisURL: fmt.Sprintf("redis://%s?addr=%s&addr=%s", addrs[0], addrs[1], addrs[2]), TTL: time.Minute}
	r, err := NewRedis(cfg)
	require.NoError(t, err)
	require.IsType(t, &redis.ClusterClient{}, r.Client())
	c := newTestCache(t, r, cfg)
	assert.Equal(t, BackendRedisCluster, c.Backend())

	const n = 30
	var calls atomic.Int64
	for i := range n {
		_, hit, err := c.GetOrCompute(t.Context(), c.Key(PlanID(fmt.Appendf(nil, "req-%d", i))), counter(&calls, fmt.Sprint("plan-", i), 0))
		require.NoError(t, err)
		assert.False(t, hit)
	}
	for i := range n {
		id := PlanID(fmt.Appendf(nil, "req-%d", i))
		v, hit, err := c.GetOrCompute(t.Context(), c.Key(id), counter(&calls, "recomputed", 0))
		require.NoError(t, err)
		assert.True(t, hit, "key %d", i)
		assert.Equal(t, fmt.Sprint("plan-", i), string(v))
		p, ok, err := c.Lookup(t.Context(), id)
		assert.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, fmt.Sprint("plan-", i), string(p))
	}
	assert.Equal(t, int64(n), calls.Load())
	assert.Equal(t, 0.0, testutil.ToFloat64(c.m.lookupErr))

	// The keys are spread over the shards.
	for _, a := range addrs {
		nc := redis.NewClient(&redis.Options{Addr: a, DisableIdentity: true, MaintNotificationsConfig: quiet()})
		size, err := nc.DBSize(t.Context()).Result()
		nc.Close()
		require.NoError(t, err)
		assert.Positive(t, size, "node %s holds some plans", a)
	}

	st := c.Status(t.Context())
	assert.True(t, st.OK, "status: %+v", st)

	// Status pings every shard: one node down makes it fail.
	nodes[2].stop()
	st = c.Status(t.Context())
	assert.False(t, st.OK)
	assert.NotEmpty(t, st.Error)
	t.Logf("status with one node down: %+v", st)
}
