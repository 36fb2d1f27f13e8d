package main

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/planner"
)

// overwriteAll sets every key of the store to value (a private Redis: every key is ours).
func overwriteAll(t *testing.T, c *redis.Client, value func(key string) []byte) int {
	t.Helper()
	ctx := t.Context()
	keys, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		require.NoError(t, c.Set(ctx, k, value(k), time.Minute).Err())
	}
	return len(keys)
}

// TestCacheIntegrity holds the real service and a private Redis to the cache's
// integrity: garbage, another plan's entry and a truncated entry under a plan's keys are
// recomputed (never served, to this replica or a new one); a permalink while Redis is
// stalled answers 503 with Retry-After; after Redis restarts empty, the replica that still
// holds a plan near writes it back so another replica's permalink finds it.
func TestCacheIntegrity(t *testing.T) {
	rs := startPrivateRedis(t)
	env := map[string]string{"REDIS_URL": rs.url() + slowRedisClient, "SHARDPLAN_CACHE_TIMEOUT": "150ms"}
	raw := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(rs.url(), "redis://"), DisableIdentity: true})
	t.Cleanup(func() { _ = raw.Close() })

	a, _, _, _ := startServer(t, env)
	_, id, want := postReshard(t, a, reshardArray)
	other := strings.Replace(reshardArray, "[64,128]", "[128,128]", 1)
	_, otherID, _ := postReshard(t, a, other)
	otherEntry, err := raw.Get(t.Context(), "shardplan:plan:"+planner.Version+":"+otherID).Bytes()
	require.NoError(t, err)

	corruptions := []struct {
		name  string
		value func(key string) []byte
	}{
		{"garbage", func(string) []byte { return []byte("GARBAGE{not json") }},
		{"another plan's entry", func(string) []byte { return otherEntry }},
		{"truncated", func(k string) []byte {
			v, err := raw.Get(context.Background(), k).Bytes()
			require.NoError(t, err)
			return v[:len(v)/2]
		}},
	}
	for _, tc := range corruptions {
		t.Run(tc.name, func(t *testing.T) {
			require.Positive(t, overwriteAll(t, raw, tc.value))
			b, _, _, _ := startServer(t, env) // a new replica: nothing near
			resp, body := send(t, http.MethodGet, b+"/v1/plans/"+id, "", nil)
			assert.NotEqual(t, http.StatusOK, resp.StatusCode, "a corrupt entry is not served: %s", body)
			xc, gotID, got := postReshard(t, b, reshardArray)
			assert.Equal(t, "miss", xc, "recomputed")
			assert.Equal(t, id, gotID)
			assert.Equal(t, string(want), string(got), "the right plan, byte for byte")
			resp, body = send(t, http.MethodGet, b+"/v1/plans/"+id, "", nil)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, string(want), string(body), "overwritten: the permalink serves the plan")
			_, metrics := send(t, http.MethodGet, b+"/metrics", "", nil)
			assert.Regexp(t, `shardplan_cache_corrupt_entries_total\{reason="[a-z]+"\} [1-9]`, string(metrics))
		})
	}

	t.Run("permalink while redis is stalled", func(t *testing.T) {
		c, _, _, _ := startServer(t, env)
		rs.signal(syscall.SIGSTOP)
		defer rs.signal(syscall.SIGCONT)
		began := time.Now()
		resp, body := send(t, http.MethodGet, c+"/v1/plans/"+id, "", nil)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		assert.Contains(t, string(body), "store-unavailable")
		assert.Less(t, time.Since(began), redisBudget, "cut by the cache deadline, not the client's minute")
		resp, _ = send(t, http.MethodGet, a+"/v1/plans/"+id, "", nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "a replica holding the plan near still serves it")
	})

	t.Run("near hit writes back after a restart", func(t *testing.T) {
		rs.stop()
		rs.start() // empty
		d, _, _, _ := startServer(t, env)
		resp, _ := send(t, http.MethodGet, d+"/v1/plans/"+id, "", nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "the restart lost the plan")
		assert.EventuallyWithT(t, func(ct *assert.CollectT) {
			resp, _ := send(t, http.MethodGet, a+"/v1/plans/"+id, "", nil) // near hit on a
			assert.Equal(ct, http.StatusOK, resp.StatusCode)
			resp, body := send(t, http.MethodGet, d+"/v1/plans/"+id, "", nil)
			assert.Equal(ct, http.StatusOK, resp.StatusCode)
			assert.Equal(ct, string(want), string(body))
		}, 5*time.Second, 100*time.Millisecond)
	})
}
