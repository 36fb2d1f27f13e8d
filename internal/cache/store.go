package cache

import (
	"context"
	"time"
)

// Store is a byte-valued key/value store with per-entry TTLs. Implementations
// are safe for concurrent use.
type Store interface {
	// Get returns the value stored under key and whether it was found. A
	// missing or expired key is (nil, false, nil), never an error. Callers
	// must not modify the returned slice.
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
	// Set stores value under key for ttl; ttl <= 0 means no expiry. The store
	// does not keep a reference to value after Set returns unless documented.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Ping reports whether the store is reachable (every shard of a cluster).
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
	// Name names the backend: "memory", "redis", "redis-sentinel" or
	// "redis-cluster".
	Name() string
}

var (
	_ Store = (*LRU)(nil)
	_ Store = (*Redis)(nil)
)
