package cache

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// DefaultMaxBytes bounds the in-process LRU when Config.MaxBytes is zero.
const DefaultMaxBytes = 64 << 20 // 64 MiB

// LRU is an in-process, byte-bounded, least-recently-used Store with TTLs.
// The bound counts len(key)+len(value) of every entry, in bytes; an entry
// larger than the bound is not stored. Expired entries are dropped when read
// and otherwise age out through eviction. All operations are O(1).
type LRU struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	ll       *list.List // front = most recently used; elements hold *lruEntry
	items    map[string]*list.Element
	now      func() time.Time
}

type lruEntry struct {
	key     string
	value   []byte
	expires time.Time // zero: never
	synced  time.Time // when the entry was last written to or read from a shared store (Near)
}

// size counts the value's capacity: a value handed over (Keep) may be an encoder's
// buffer with room to spare (a reshard answer's is 1.4x its length on median, 3x at
// p90), all of it held while the entry is.
func (e *lruEntry) size() int64 { return int64(len(e.key) + cap(e.value)) }

// NewLRU returns an empty LRU bounded by maxBytes bytes of keys and values;
// maxBytes <= 0 selects DefaultMaxBytes.
func NewLRU(maxBytes int64) *LRU {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &LRU{
		maxBytes: maxBytes,
		ll:       list.New(),
		items:    make(map[string]*list.Element),
		now:      time.Now,
	}
}

// Get implements Store. It never fails. The returned slice is shared with
// the cache and must not be modified.
func (l *LRU) Get(_ context.Context, key string) ([]byte, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.items[key]
	if !ok {
		return nil, false, nil
	}
	e := el.Value.(*lruEntry)
	if !e.expires.IsZero() && !l.now().Before(e.expires) {
		l.removeElement(el)
		return nil, false, nil
	}
	l.ll.MoveToFront(el)
	return e.value, true, nil
}

// Set implements Store. It copies value, replaces any previous entry for
// key and evicts least recently used entries until the bound holds. A value
// whose entry exceeds the bound is not stored (and any previous entry for key
// is removed). It never fails.
func (l *LRU) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	v := make([]byte, len(value)) // capacity = length: only the value counts
	copy(v, value)
	return l.Keep(ctx, key, v, ttl)
}

// Keep is Set without the copy: the LRU keeps value itself, which the caller hands over
// and must not modify afterwards (the cache hands over the answers it has just computed,
// or the entries it has just sealed; copying a 3 MB answer again was a fifth of storing
// it). Its capacity counts toward the bound.
func (l *LRU) Keep(_ context.Context, key string, value []byte, ttl time.Duration) error {
	now := l.now()
	e := &lruEntry{key: key, value: value, synced: now}
	if ttl > 0 {
		e.expires = now.Add(ttl)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.items[key]; ok {
		l.removeElement(el)
	}
	if e.size() > l.maxBytes {
		return nil
	}
	l.items[key] = l.ll.PushFront(e)
	l.bytes += e.size()
	for l.bytes > l.maxBytes {
		l.removeElement(l.ll.Back())
	}
	return nil
}

// getDue is Get that also reports whether the entry was last synced with a shared store
// more than every ago; if so it marks it synced now and returns its remaining lifetime
// (0: no expiry), for Near's write-back.
func (l *LRU) getDue(key string, every time.Duration) (value []byte, ok, due bool, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.items[key]
	if !ok {
		return nil, false, false, 0
	}
	e := el.Value.(*lruEntry)
	now := l.now()
	if !e.expires.IsZero() && !now.Before(e.expires) {
		l.removeElement(el)
		return nil, false, false, 0
	}
	l.ll.MoveToFront(el)
	if now.Sub(e.synced) < every {
		return e.value, true, false, 0
	}
	e.synced = now
	if !e.expires.IsZero() {
		ttl = e.expires.Sub(now)
	}
	return e.value, true, true, ttl
}

func (l *LRU) removeElement(el *list.Element) {
	e := l.ll.Remove(el).(*lruEntry)
	delete(l.items, e.key)
	l.bytes -= e.size()
}

// Len returns the number of entries, expired ones included until dropped.
func (l *LRU) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ll.Len()
}

// Bytes returns the bytes of keys and values currently held.
func (l *LRU) Bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// Ping implements Store; the in-process store is always reachable.
func (l *LRU) Ping(context.Context) error { return nil }

// Close implements Store; it drops every entry.
func (l *LRU) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ll.Init()
	clear(l.items)
	l.bytes = 0
	return nil
}

// Name implements Store.
func (l *LRU) Name() string { return BackendMemory }
