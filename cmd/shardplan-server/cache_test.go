package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/planner"
)

// testRedisURL is the shared test Redis (REDIS_URL, default redis://127.0.0.1:6379). It
// fails the test under CI=true and skips it otherwise when nothing answers there.
func testRedisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379"
	}
	if err := redisPing(u); err != nil {
		unavailable(t, "no Redis at %s: %v", redactURL(u), err)
	}
	return u
}

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// redisPing checks that a plain (redis://host:port) Redis answers PING. Other URLs
// (TLS, auth, Sentinel) are trusted as given.
func redisPing(raw string) error {
	if !strings.HasPrefix(raw, "redis://") || strings.ContainsAny(strings.TrimPrefix(raw, "redis://"), "@?") {
		return nil
	}
	host := strings.TrimPrefix(raw, "redis://")
	host, _, _ = strings.Cut(host, "/")
	conn, err := net.DialTimeout("tcp", host, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf[:n]), "+PONG") {
		return fmt.Errorf("PING answered %q", buf[:n])
	}
	return nil
}

func testPrefix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "shardplan-test:" + hex.EncodeToString(b) + ":"
}

// The same reshard request in two input forms: source as a PartitionSpec-like array
// and as Shardy text.
const (
	reshardArray  = `{"mesh":"x=2,y=4","shape":[64,128],"dtype":"bf16","source":[["x"],["y"]],"target":[["y"],["x"]]}`
	reshardShardy = `{"mesh":"x=2,y=4","shape":[64,128],"dtype":"bf16","source":"[{\"x\"}, {\"y\"}]","target":[["y"],["x"]]}`
)

// postReshard sends body to /v1/reshard and returns X-Cache, the plan id and the bytes.
func postReshard(t require.TestingT, base, body string) (xcache, planID string, raw []byte) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/reshard", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	var r struct {
		PlanID string `json:"plan_id"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	return resp.Header.Get("X-Cache"), r.PlanID, raw
}

// TestPlanCache runs the real service with the in-process cache and with Redis: a
// repeated request hits with identical bytes, another input form of it hits the same
// entry, the plan id is a permalink, and readiness reports the cache.
func TestPlanCache(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{}
			if backend == "redis" {
				env["REDIS_URL"] = testRedisURL(t)
				env["SHARDPLAN_CACHE_PREFIX"] = testPrefix() // fresh keys every run
				env["SHARDPLAN_CACHE_TTL"] = "1m"
			}
			base, cancel, done, stderr := startServer(t, env)

			xc, id, first := postReshard(t, base, reshardArray)
			assert.Equal(t, "miss", xc)
			require.Len(t, id, 64)
			xc, _, second := postReshard(t, base, reshardArray)
			assert.Equal(t, "hit", xc, "the plan is stored before the first answer goes out")
			assert.Equal(t, string(first), string(second), "a hit answers the same bytes")

			xc, id2, third := postReshard(t, base, reshardShardy)
			assert.Equal(t, "hit", xc, "another input form of the same request hits the same entry")
			assert.Equal(t, id, id2)
			assert.Equal(t, string(first), string(third))

			resp, body := send(t, http.MethodGet, base+"/v1/plans/"+id, "", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			assert.Equal(t, "hit", resp.Header.Get("X-Cache"))
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Equal(t, string(first), string(body))

			unknown := strings.Repeat("0", 64)
			resp, body = send(t, http.MethodGet, base+"/v1/plans/"+unknown, "", nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			assert.Contains(t, string(body), "no memoized plan with id "+unknown)
			assert.Contains(t, string(body), "SHARDPLAN_CACHE_TTL")

			resp, body = send(t, http.MethodGet, base+"/v1/plans/not-a-plan-id", "", nil)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
			assert.Contains(t, string(body), `"field":"plan_id"`)

			resp, body = send(t, http.MethodGet, base+"/readyz", "", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			assert.Contains(t, string(body), `"cache":"ok"`)

			resp, body = send(t, http.MethodGet, base+"/metrics", "", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Contains(t, string(body), `shardplan_cache_requests_total{result="hit"}`)

			cancel()
			require.NoError(t, <-done)
			assert.Contains(t, stderr.String(), "backend="+backend)
		})
	}
}

// TestPlanCacheRedisOutage points the service at a private redis-server, kills it
// (requests still answer 200: plans this replica holds in its near cache as hits, others
// as misses; readiness is degraded, not failed) and restarts it (shared hits resume).
func TestPlanCacheRedisOutage(t *testing.T) {
	rs := startPrivateRedis(t)
	port, start, stop := rs.port, rs.start, rs.stop
	base, cancel, done, _ := startServer(t, map[string]string{
		"REDIS_URL":               fmt.Sprintf("redis://127.0.0.1:%d", port) + slowRedisClient,
		"SHARDPLAN_CACHE_TIMEOUT": "150ms",
	})
	xc, _, _ := postReshard(t, base, reshardArray)
	assert.Equal(t, "miss", xc)
	xc, _, _ = postReshard(t, base, reshardArray)
	assert.Equal(t, "hit", xc)

	stop()
	for i := range 3 {
		began := time.Now()
		xc, _, body := postReshard(t, base, reshardArray)
		assert.Equal(t, "hit", xc, "this replica's near cache still answers")
		assert.Contains(t, string(body), `"steps"`)
		other := strings.Replace(reshardArray, "[64,128]", fmt.Sprintf("[%d,128]", 100+i), 1)
		require.NotEqual(t, reshardArray, other)
		xc, _, body = postReshard(t, base, other)
		assert.Equal(t, "miss", xc, "a new plan is computed while Redis is down")
		assert.Contains(t, string(body), `"steps"`)
		assert.Less(t, time.Since(began), redisBudget, "cut by the cache deadline, not the client's minute")
	}
	resp, body := send(t, http.MethodGet, base+"/readyz", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "degraded, still answering: %s", body)
	assert.JSONEq(t, `{"status":"degraded","checks":{"draining":"ok","cache":"unavailable"}}`, string(body))

	start()
	// A plan computed after the restart is shared again: another replica hits it.
	fresh := strings.Replace(reshardArray, "[64,128]", "[96,128]", 1)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, body := send(t, http.MethodGet, base+"/readyz", "", nil)
		assert.Contains(ct, string(body), `"status":"ready"`)
	}, 10*time.Second, 50*time.Millisecond)
	xc, _, _ = postReshard(t, base, fresh)
	assert.Equal(t, "miss", xc)
	base2, _, _, _ := startServer(t, map[string]string{"REDIS_URL": fmt.Sprintf("redis://127.0.0.1:%d", port)})
	xc, _, _ = postReshard(t, base2, fresh)
	assert.Equal(t, "hit", xc, "the other replica reads it from Redis")
	resp, _ = send(t, http.MethodGet, base+"/readyz", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, <-done)
}

// privateRedis is a redis-server owned by one test, on a random loopback port, without
// persistence: stop then start is a restart that lost every key.
type privateRedis struct {
	t    *testing.T
	bin  string
	port int
	dir  string
	proc *exec.Cmd
}

// startPrivateRedis starts one (skipping, or failing under CI, without redis-server)
// and stops it in t.Cleanup.
func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server not found: %v", err)
	}
	rs := &privateRedis{t: t, bin: bin, port: freeTCPPort(t), dir: t.TempDir()}
	rs.start()
	t.Cleanup(func() {
		rs.signal(syscall.SIGCONT)
		rs.stop()
	})
	return rs
}

func (rs *privateRedis) url() string { return fmt.Sprintf("redis://127.0.0.1:%d", rs.port) }

// slowRedisClient, appended to a test's REDIS_URL, gives the Redis client's own dial, read
// and write timeouts a minute: a request whose cache calls SHARDPLAN_CACHE_TIMEOUT did
// not cut would take that long, so redisBudget, far above the cache deadline and far
// below a minute, tells the two apart however loaded the machine is.
const (
	slowRedisClient = "?dial_timeout=1m&read_timeout=1m&write_timeout=1m"
	redisBudget     = 15 * time.Second
)

func (rs *privateRedis) start() {
	rs.proc = exec.Command(rs.bin, "--port", strconv.Itoa(rs.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", rs.dir, "--logfile", rs.dir+"/redis.log")
	require.NoError(rs.t, rs.proc.Start())
	require.Eventually(rs.t, func() bool { return redisPing(rs.url()) == nil }, 5*time.Second, 20*time.Millisecond)
}

func (rs *privateRedis) stop() {
	if rs.proc != nil {
		_ = rs.proc.Process.Kill()
		_ = rs.proc.Wait()
		rs.proc = nil
	}
}

// signal sends sig (SIGSTOP: stall, SIGCONT: resume) to the server, if running.
func (rs *privateRedis) signal(sig syscall.Signal) {
	if rs.proc != nil {
		_ = rs.proc.Process.Signal(sig)
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestCacheConfig(t *testing.T) {
	c, err := loadConfig([]string{"-redis-cluster", "-redis-addrs", "n2:7001, n3:7002"}, func(k string) string {
		return map[string]string{
			"REDIS_URL":                "redis://n1:7000",
			"SHARDPLAN_REDIS_PASSWORD": "hunter2",
			"SHARDPLAN_CACHE_TTL":      "30m",
			"SHARDPLAN_CACHE_TIMEOUT":  "100ms",
		}[k]
	}, io.Discard)
	require.NoError(t, err)
	cc := c.cacheConfig()
	assert.True(t, cc.Cluster)
	assert.Equal(t, []string{"n2:7001", "n3:7002"}, cc.Addrs)
	assert.Equal(t, 30*time.Minute, cc.TTL)
	assert.Equal(t, 100*time.Millisecond, cc.Timeout)
	assert.Equal(t, planner.Version, cc.Version, "cache keys carry the planner version")
	for _, a := range c.logAttrs() {
		assert.NotContains(t, a.Value.String(), "hunter2", a.Key)
	}
	assert.Equal(t, "redis://:xxxxx@s1:26379?master_name=m&password=xxxxx",
		redactURL("redis://:secret@s1:26379?master_name=m&password=other"))

	_, err = loadConfig(nil, func(k string) string {
		return map[string]string{"REDIS_URL": "redis://h:1?bogus_option=1"}[k]
	}, io.Discard)
	require.Error(t, err, "the topology is validated at start")
	_, err = loadConfig([]string{"-redis-cluster=maybe"}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "boolean")
	_, err = loadConfig(nil, func(k string) string { return map[string]string{"SHARDPLAN_CACHE_TIMEOUT": "0s"}[k] }, io.Discard)
	require.ErrorContains(t, err, "SHARDPLAN_CACHE_TIMEOUT")
}
