package cache

import (
	"context"
	"time"
)

// nearFillTTL bounds how long a value read from the shared store stays in the near
// cache (its remaining TTL there is unknown without another round trip).
const nearFillTTL = time.Minute

// Near is a two-level Store: an in-process LRU in front of a shared store (Redis).
// Plans are content-addressed (the key hashes the canonical request and the planner
// version), so a value never changes under its key and the near copy cannot be stale;
// it only saves the round trip. Reads try the LRU, then the shared store (filling the
// LRU); writes go to both. Ping, Close and Name are the shared store's.
type Near struct {
	near *LRU
	far  Store
}

var _ Store = (*Near)(nil)

// NewNear puts an LRU of maxBytes in front of far.
func NewNear(far Store, maxBytes int64) *Near {
	return &Near{near: NewLRU(maxBytes), far: far}
}

// Get implements Store.
func (n *Near) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if v, ok, _ := n.near.Get(ctx, key); ok {
		return v, true, nil
	}
	v, ok, err := n.far.Get(ctx, key)
	if err == nil && ok {
		_ = n.near.Set(ctx, key, v, nearFillTTL)
	}
	return v, ok, err
}

// Set implements Store: the near copy is written even when the shared store fails, so
// this replica still serves it.
func (n *Near) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_ = n.near.Set(ctx, key, value, ttl)
	return n.far.Set(ctx, key, value, ttl)
}

// Ping implements Store.
func (n *Near) Ping(ctx context.Context) error { return n.far.Ping(ctx) }

// Close implements Store.
func (n *Near) Close() error { return n.far.Close() }

// Name implements Store.
func (n *Near) Name() string { return n.far.Name() }
