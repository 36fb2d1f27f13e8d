package cache

import (
	"context"
	"sync"
	"time"
)

// nearFillTTL bounds how long a value read from the shared store stays in the near
// cache (its remaining TTL there is unknown without another round trip).
const nearFillTTL = time.Minute

// defaultWriteBackEvery is how often, at most, a near hit on one key writes the value
// back to the shared store.
const defaultWriteBackEvery = time.Second

// maxWriteBacks bounds the write-backs in flight; beyond it a write-back is skipped.
const maxWriteBacks = 16

// Near is a two-level Store: an in-process LRU in front of a shared store (Redis).
// Plans are content-addressed (the key hashes the canonical request and the planner
// version), so a value never changes under its key and the near copy cannot be stale;
// it only saves the round trip. Reads try the LRU, then the shared store (filling the
// LRU); writes go to both. Ping, Close and Name are the shared store's.
//
// A near hit writes the value back to the shared store in the background (at most once
// per key per WriteBackEvery, only where the key is absent when the store can SET NX, for
// the near copy's remaining lifetime), so a plan this replica still holds becomes
// readable by the other replicas again after the shared store lost it (a Redis restart).
type Near struct {
	near *LRU
	far  Store
	// WriteBackEvery is the least time between two write-backs of one key (default 1 s;
	// set before use).
	WriteBackEvery time.Duration

	pending chan struct{}
	wg      sync.WaitGroup
}

var _ Store = (*Near)(nil)

// addIfAbsent is the optional write-back of a shared store: store value under key for
// ttl unless the key exists (Redis SET NX), so a write-back never shortens the life of
// the shared copy.
type addIfAbsent interface {
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) error
}

// NewNear puts an LRU of maxBytes in front of far.
func NewNear(far Store, maxBytes int64) *Near {
	return &Near{near: NewLRU(maxBytes), far: far, WriteBackEvery: defaultWriteBackEvery, pending: make(chan struct{}, maxWriteBacks)}
}

// Get implements Store.
func (n *Near) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if v, ok, due, ttl := n.near.getDue(key, n.WriteBackEvery); ok {
		if due {
			n.writeBack(ctx, key, v, ttl)
		}
		return v, true, nil
	}
	v, ok, err := n.far.Get(ctx, key)
	if err == nil && ok {
		_ = n.near.Set(ctx, key, v, nearFillTTL)
	}
	return v, ok, err
}

// writeBack stores value in the shared store in the background, detached from ctx's
// cancellation; the shared store's own deadline bounds it. Failures are ignored (the
// next due hit tries again).
func (n *Near) writeBack(ctx context.Context, key string, value []byte, ttl time.Duration) {
	select {
	case n.pending <- struct{}{}:
	default:
		return
	}
	n.wg.Add(1)
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer n.wg.Done()
		defer func() { <-n.pending }()
		if a, ok := n.far.(addIfAbsent); ok {
			_ = a.SetNX(ctx, key, value, ttl)
			return
		}
		_ = n.far.Set(ctx, key, value, ttl)
	}()
}

// Set implements Store: the near copy is written even when the shared store fails, so
// this replica still serves it.
func (n *Near) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_ = n.near.Set(ctx, key, value, ttl)
	return n.far.Set(ctx, key, value, ttl)
}

// Keep is Set with value handed over to the near copy (LRU.Keep); the shared store
// only reads it.
func (n *Near) Keep(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_ = n.near.Keep(ctx, key, value, ttl)
	return n.far.Set(ctx, key, value, ttl)
}

// Ping implements Store.
func (n *Near) Ping(ctx context.Context) error { return n.far.Ping(ctx) }

// Close implements Store: it waits for write-backs in flight, then closes the shared
// store.
func (n *Near) Close() error {
	n.wg.Wait()
	return n.far.Close()
}

// Name implements Store.
func (n *Near) Name() string { return n.far.Name() }

// Unwrap returns the shared store.
func (n *Near) Unwrap() Store { return n.far }
