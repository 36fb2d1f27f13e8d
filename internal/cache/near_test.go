package cache_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cache"
)

// farStore is a shared store that counts reads and can be made to fail.
type farStore struct {
	mu    sync.Mutex
	m     map[string][]byte
	gets  int
	down  bool
	ttls  map[string]time.Duration
	close int
}

var errDown = errors.New("far store down")

func (f *farStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.down {
		return nil, false, errDown
	}
	v, ok := f.m[key]
	return v, ok, nil
}

func (f *farStore) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	f.m[key] = value
	f.ttls[key] = ttl
	return nil
}

func (f *farStore) Ping(context.Context) error {
	if f.down {
		return errDown
	}
	return nil
}
func (f *farStore) Close() error   { f.close++; return nil }
func (f *farStore) Name() string   { return "redis" }
func newFar() *farStore            { return &farStore{m: map[string][]byte{}, ttls: map[string]time.Duration{}} }
func (f *farStore) reads() int     { f.mu.Lock(); defer f.mu.Unlock(); return f.gets }
func (f *farStore) setDown(d bool) { f.mu.Lock(); f.down = d; f.mu.Unlock() }

func TestNearStore(t *testing.T) {
	ctx := context.Background()
	far := newFar()
	n := cache.NewNear(far, 1<<20)

	t.Run("a write lands in both levels; reads stay local", func(t *testing.T) {
		require.NoError(t, n.Set(ctx, "a", []byte("plan a"), time.Hour))
		assert.Equal(t, time.Hour, far.ttls["a"])
		before := far.reads()
		for range 3 {
			v, ok, err := n.Get(ctx, "a")
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, "plan a", string(v))
		}
		assert.Equal(t, before, far.reads(), "no round trip for a near hit")
	})
	t.Run("a kept value lands in both levels, the near one without a copy", func(t *testing.T) {
		kept := []byte("plan k")
		require.NoError(t, n.Keep(ctx, "k", kept, time.Hour))
		assert.Equal(t, "plan k", string(far.m["k"]))
		v, ok, err := n.Get(ctx, "k")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Same(t, &kept[0], &v[0])
	})
	t.Run("another replica's write is read once from the shared store", func(t *testing.T) {
		far.m["b"] = []byte("plan b")
		before := far.reads()
		for range 3 {
			v, ok, err := n.Get(ctx, "b")
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, "plan b", string(v))
		}
		assert.Equal(t, before+1, far.reads())
	})
	t.Run("a miss in both is a miss", func(t *testing.T) {
		_, ok, err := n.Get(ctx, "c")
		require.NoError(t, err)
		assert.False(t, ok)
	})
	t.Run("the shared store down: near entries still answer, others fail", func(t *testing.T) {
		far.setDown(true)
		defer far.setDown(false)
		v, ok, err := n.Get(ctx, "a")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "plan a", string(v))
		_, _, err = n.Get(ctx, "d")
		require.ErrorIs(t, err, errDown)
		assert.ErrorIs(t, n.Set(ctx, "e", []byte("plan e"), time.Hour), errDown)
		v, ok, _ = n.Get(ctx, "e")
		assert.True(t, ok, "this replica keeps what it computed")
		assert.Equal(t, "plan e", string(v))
		assert.ErrorIs(t, n.Ping(ctx), errDown)
	})
	t.Run("name and close are the shared store's", func(t *testing.T) {
		assert.Equal(t, "redis", n.Name())
		require.NoError(t, n.Close())
		assert.Equal(t, 1, far.close)
	})
}
