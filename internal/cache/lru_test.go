package cache

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable clock for the LRU's TTLs.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func TestLRUHitMissAndTTL(t *testing.T) {
	ctx := t.Context()
	clock := newFakeClock()
	l := NewLRU(1 << 10)
	l.now = clock.now

	_, ok, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.False(t, ok, "empty cache misses")

	require.NoError(t, l.Set(ctx, "k", []byte("v"), time.Second))
	require.NoError(t, l.Set(ctx, "forever", []byte("v"), 0))
	v, ok, err := l.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "v", string(v))

	clock.advance(999 * time.Millisecond)
	_, ok, _ = l.Get(ctx, "k")
	assert.True(t, ok, "alive just before the TTL")

	clock.advance(time.Millisecond)
	_, ok, _ = l.Get(ctx, "k")
	assert.False(t, ok, "expired at the TTL")
	assert.Equal(t, 1, l.Len(), "the expired entry is dropped on read")
	assert.Equal(t, int64(len("forever")+1), l.Bytes())

	clock.advance(1000 * time.Hour)
	_, ok, _ = l.Get(ctx, "forever")
	assert.True(t, ok, "ttl <= 0 never expires")
}

func TestLRUEvictsByBytes(t *testing.T) {
	ctx := t.Context()
	val := []byte(strings.Repeat("x", 9)) // 1-byte key + 9 = 10 bytes an entry
	l := NewLRU(30)

	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, l.Set(ctx, k, val, 0))
	}
	require.Equal(t, int64(30), l.Bytes())
	_, ok, _ := l.Get(ctx, "a") // a becomes most recent; b is now the oldest
	require.True(t, ok)

	require.NoError(t, l.Set(ctx, "d", val, 0))
	assert.Equal(t, int64(30), l.Bytes())
	assert.Equal(t, 3, l.Len())
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		_, ok, _ := l.Get(ctx, k)
		assert.Equal(t, want, ok, "key %q", k)
	}

	// One large entry evicts as many old ones as it needs.
	require.NoError(t, l.Set(ctx, "e", []byte(strings.Repeat("y", 24)), 0)) // 25 bytes
	assert.Equal(t, 1, l.Len())
	assert.Equal(t, int64(25), l.Bytes())
}

func TestLRUOversizeAndReplace(t *testing.T) {
	ctx := t.Context()
	l := NewLRU(16)

	require.NoError(t, l.Set(ctx, "k", []byte("small"), 0))
	require.NoError(t, l.Set(ctx, "k", []byte("a value that is far too large"), 0))
	_, ok, _ := l.Get(ctx, "k")
	assert.False(t, ok, "an oversize value is not stored and the stale one is gone")
	assert.Equal(t, int64(0), l.Bytes())

	require.NoError(t, l.Set(ctx, "k", []byte("12"), 0))
	require.NoError(t, l.Set(ctx, "k", []byte("1234"), 0))
	assert.Equal(t, 1, l.Len())
	assert.Equal(t, int64(5), l.Bytes(), "replacing an entry replaces its bytes")

	buf := []byte("abcd")
	require.NoError(t, l.Set(ctx, "copy", buf, 0))
	buf[0] = 'X'
	v, _, _ := l.Get(ctx, "copy")
	assert.Equal(t, "abcd", string(v), "Set copies the value")

	kept := []byte("wxyz")
	require.NoError(t, l.Keep(ctx, "kept", kept, 0))
	v, _, _ = l.Get(ctx, "kept")
	assert.Same(t, &kept[0], &v[0], "Keep stores the value handed over, without a copy")

	require.NoError(t, l.Close())
	assert.Equal(t, 0, l.Len())
	assert.Equal(t, int64(0), l.Bytes())
	assert.Equal(t, BackendMemory, l.Name())
	assert.NoError(t, l.Ping(ctx))
}

func TestNewLRUDefaultBound(t *testing.T) {
	assert.Equal(t, int64(DefaultMaxBytes), NewLRU(0).maxBytes)
	assert.Equal(t, int64(DefaultMaxBytes), NewLRU(-1).maxBytes)
}

// TestLRUCountsCapacity: a value handed over with room to spare counts with it (the
// memory it holds), so the bound is on memory, not on lengths.
func TestLRUCountsCapacity(t *testing.T) {
	l := NewLRU(100)
	ctx := t.Context()
	roomy := make([]byte, 10, 60)
	require.NoError(t, l.Keep(ctx, "a", roomy, 0))
	require.NoError(t, l.Keep(ctx, "b", make([]byte, 10, 60), 0))
	_, okA, _ := l.Get(ctx, "a")
	_, okB, _ := l.Get(ctx, "b")
	assert.False(t, okA, "two entries of 61 bytes of memory do not fit in 100")
	assert.True(t, okB)
}
