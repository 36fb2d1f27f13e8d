package cache

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEntryOpen(t *testing.T) {
	const key = "shardplan:plan:v1:aaaa"
	good := seal(key, []byte(`{"plan_id":"aaaa"}`))
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-2] ^= 1
	tests := []struct {
		name   string
		entry  []byte
		reason string // "" means: opens
	}{
		{"sealed", good, ""},
		{"empty payload", seal(key, nil), ""},
		{"garbage", []byte("GARBAGE{not json"), reasonFormat},
		{"bare payload", []byte(`{"plan_id":"aaaa"}`), reasonFormat},
		{"empty", nil, reasonFormat},
		{"other format version", append([]byte("shardplan-entry/2"), good[len(entryMagic):]...), reasonFormat},
		{"another key's entry", seal("shardplan:plan:v1:bbbb", []byte(`{"plan_id":"bbbb"}`)), reasonKey},
		{"truncated", good[:len(good)-3], reasonLength},
		{"extended", append(append([]byte(nil), good...), "xx"...), reasonLength},
		{"a flipped bit", flipped, reasonChecksum},
		{"header only", good[:len(good)-len(`{"plan_id":"aaaa"}`)-1], reasonFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payload, err := open(key, tc.entry)
			if tc.reason == "" {
				require.NoError(t, err)
				assert.Equal(t, string(tc.entry[len(tc.entry)-len(payload):]), string(payload))
				return
			}
			ce, ok := errors.AsType[*corruptError](err)
			require.True(t, ok, "want a corrupt entry, got %v", err)
			assert.Equal(t, tc.reason, ce.reason)
		})
	}
}

// FuzzEntryOpen: open never panics, and only a sealed entry opens, to its payload.
func FuzzEntryOpen(f *testing.F) {
	f.Add("k", []byte("GARBAGE{not json"))
	f.Add("k", seal("k", []byte("payload")))
	f.Add("k", seal("other", []byte("payload")))
	f.Fuzz(func(t *testing.T, key string, entry []byte) {
		payload, err := open(key, entry)
		if err != nil {
			return
		}
		if string(seal(key, payload)) != string(entry) {
			t.Fatalf("open(%q, %q) accepted an entry seal does not produce", key, entry)
		}
	})
}

// TestCorruptEntriesAreRecomputed writes bad bytes straight into the real Redis under a
// plan's key and checks each is recomputed, overwritten and counted, never served, by a
// replica with a near cache (Open) and one without.
func TestCorruptEntriesAreRecomputed(t *testing.T) {
	cfg := sharedRedis(t)
	raw := redis.NewClient(mustParse(t, cfg.RedisURL))
	t.Cleanup(func() { _ = raw.Close() })
	ctx := t.Context()

	writer, err := Open(cfg, prometheus.NewRegistry())
	require.NoError(t, err)
	t.Cleanup(func() { _ = writer.Close() })
	idA, idB := PlanID([]byte("request A")), PlanID([]byte("request B"))
	for id, v := range map[string]string{idA: `{"plan":"A","shape":[8]}`, idB: `{"plan":"B","shape":[16]}`} {
		_, _, err := writer.Do(ctx, id, func(context.Context) ([]byte, error) { return []byte(v), nil })
		require.NoError(t, err)
	}
	entryA, err := raw.Get(ctx, writer.Key(idA)).Bytes()
	require.NoError(t, err)
	entryB, err := raw.Get(ctx, writer.Key(idB)).Bytes()
	require.NoError(t, err)

	tests := []struct {
		name, reason string
		bad          []byte
	}{
		{"garbage", reasonFormat, []byte("GARBAGE{not json")},
		{"another plan's bytes", reasonKey, entryB},
		{"another plan's bare payload", reasonFormat, []byte(`{"plan":"B","shape":[16]}`)},
		{"truncated", reasonLength, entryA[:len(entryA)-5]},
	}
	for _, near := range []bool{false, true} {
		for _, tc := range tests {
			name := tc.name + map[bool]string{false: " (redis only)", true: " (near cache)"}[near]
			t.Run(name, func(t *testing.T) {
				require.NoError(t, raw.Set(ctx, writer.Key(idA), tc.bad, time.Minute).Err())
				var store Store
				if near {
					store, err = NewStore(cfg)
				} else {
					store, err = NewRedis(cfg)
				}
				require.NoError(t, err)
				c := newTestCache(t, store, cfg) // a fresh replica: nothing near
				var calls atomic.Int64
				v, hit, err := c.Do(ctx, idA, counter(&calls, `{"plan":"A","shape":[8]}`, 0))
				require.NoError(t, err)
				assert.False(t, hit, "a corrupt entry is a miss")
				assert.Equal(t, `{"plan":"A","shape":[8]}`, string(v))
				assert.Equal(t, int64(1), calls.Load(), "recomputed")
				assert.Equal(t, 1.0, testutil.ToFloat64(c.m.corrupt.WithLabelValues(tc.reason)))

				got, err := raw.Get(ctx, writer.Key(idA)).Bytes()
				require.NoError(t, err)
				assert.Equal(t, entryA, got, "the bad entry is overwritten with the sealed plan")

				// The permalink does not serve garbage either.
				require.NoError(t, raw.Set(ctx, writer.Key(idA), tc.bad, time.Minute).Err())
				fresh := newTestCache(t, mustRedis(t, cfg), cfg)
				_, ok, err := fresh.Lookup(ctx, idA)
				require.NoError(t, err)
				assert.False(t, ok, "Lookup does not serve a corrupt entry")
				require.NoError(t, raw.Set(ctx, writer.Key(idA), entryA, time.Minute).Err())
			})
		}
	}
}

func mustParse(t *testing.T, url string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(url)
	require.NoError(t, err)
	o.DisableIdentity = true
	o.MaintNotificationsConfig = quiet()
	return o
}

func mustRedis(t *testing.T, cfg Config) *Redis {
	t.Helper()
	r, err := NewRedis(cfg)
	require.NoError(t, err)
	return r
}

// TestLookupStoreUnavailable: while a private Redis is stalled (SIGSTOP) or gone, a
// lookup that the near cache cannot answer is ErrUnavailable, not "absent"; a plan this
// replica holds near is still served.
func TestLookupStoreUnavailable(t *testing.T) {
	srv := startRedis(t, 0)
	c := openReplica(t, srv)
	held := PlanID([]byte("held"))
	_, _, err := c.Do(t.Context(), held, func(context.Context) ([]byte, error) { return []byte("plan"), nil })
	require.NoError(t, err)
	other := PlanID([]byte("elsewhere"))

	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = srv.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	start := time.Now()
	_, ok, err := c.Lookup(t.Context(), other)
	assert.ErrorIs(t, err, ErrUnavailable, "stalled")
	assert.False(t, ok)
	assert.Less(t, time.Since(start), callBudget, "bounded by the store deadline, not the client's minute")
	v, ok, err := c.Lookup(t.Context(), held)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "plan", string(v), "the near copy is served while Redis is stalled")

	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGCONT))
	stopped = false
	srv.stop()
	_, _, err = c.Lookup(t.Context(), other)
	assert.ErrorIs(t, err, ErrUnavailable, "killed")
}

// TestNearHitWritesBack: after Redis restarts empty, a near hit on the replica that
// still holds a plan writes it back, so another replica's permalink finds it again.
func TestNearHitWritesBack(t *testing.T) {
	srv := startRedis(t, 0)
	a, b := openReplica(t, srv), openReplica(t, srv)
	a.store.(*Near).WriteBackEvery = 0

	id := PlanID([]byte("kept"))
	_, _, err := a.Do(t.Context(), id, func(context.Context) ([]byte, error) { return []byte("plan"), nil })
	require.NoError(t, err)
	srv.stop()
	srv.start() // same port, empty
	_, ok, err := b.Lookup(t.Context(), id)
	require.NoError(t, err)
	require.False(t, ok, "the restart lost the plan")

	v, ok, err := a.Lookup(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok, "replica a still holds it near")
	assert.Equal(t, "plan", string(v))
	assert.Eventually(t, func() bool {
		v, ok, err := b.Lookup(t.Context(), id)
		return err == nil && ok && string(v) == "plan"
	}, 3*time.Second, 20*time.Millisecond, "replica b finds the written-back plan")
}

// openReplica opens a Cache as the service does (near cache over srv, short deadline),
// with the Redis client's own timeouts slow (withSlowClient).
func openReplica(t *testing.T, srv *redisServer) *Cache {
	t.Helper()
	cfg := withSlowClient(Config{RedisURL: "redis://" + srv.addr(), Timeout: 150 * time.Millisecond, TTL: time.Minute})
	c, err := Open(cfg, prometheus.NewRegistry())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
