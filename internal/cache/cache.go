package cache

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxPendingWrites bounds the writes in flight; beyond it a write is
// skipped (and counted) rather than queued, so a slow Redis cannot pile up
// waiting requests.
const maxPendingWrites = 1024

// Cache memoizes encoded plan responses in a Store. It is safe for
// concurrent use. Store failures are counted and served as misses; Cache
// methods only return errors from the caller's compute function or context.
type Cache struct {
	store Store
	local bool   // store is an *LRU: values are kept as they are, not sealed
	cfg   Config // defaults applied
	group flights
	m     *metrics

	writes chan struct{} // semaphore of writes in flight
	mu     sync.Mutex    // guards closed and wg.Add against Close's wg.Wait
	closed bool
	wg     sync.WaitGroup
}

// Open builds the Store cfg selects (Redis when RedisURL or Addrs is set,
// else the in-process LRU) and a Cache over it, registering metrics on reg
// (nil: not registered). It does not contact Redis: a Redis that is down at
// start-up is a miss per request and a failing Status, not an error here.
func Open(cfg Config, reg prometheus.Registerer) (*Cache, error) {
	store, err := NewStore(cfg)
	if err != nil {
		return nil, err
	}
	c, err := New(store, cfg, reg)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	return c, nil
}

// NewStore validates cfg and returns the Store it selects: *Redis behind a near
// cache of MaxBytes (*Near) when RedisURL or Addrs is set, else *LRU bounded by
// MaxBytes.
func NewStore(cfg Config) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.UsesRedis() {
		r, err := NewRedis(cfg)
		if err != nil {
			return nil, err
		}
		return NewNear(r, cfg.withDefaults().MaxBytes), nil
	}
	return NewLRU(cfg.withDefaults().MaxBytes), nil
}

// New returns a Cache over store using cfg's TTL, Timeout, Prefix and
// Version, registering its metrics on reg (nil: not registered). It fails if
// cfg is invalid or the metrics are already registered on reg. The Cache
// owns store: Close closes it.
func New(store Store, cfg Config, reg prometheus.Registerer) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	if r := redisOf(store); r != nil {
		if err := registerBreakerMetrics(reg, r.breakers); err != nil {
			return nil, err
		}
	}
	_, local := store.(*LRU)
	return &Cache{
		store:  store,
		local:  local,
		cfg:    cfg.withDefaults(),
		m:      m,
		writes: make(chan struct{}, maxPendingWrites),
	}, nil
}

// redisOf is the *Redis store is or wraps (a Near's shared store), or nil.
func redisOf(store Store) *Redis {
	for {
		switch s := store.(type) {
		case *Redis:
			return s
		case interface{ Unwrap() Store }:
			store = s.Unwrap()
		default:
			return nil
		}
	}
}

// UnreachableNodes lists the addresses of the Redis nodes whose breakers are open (for
// logs and key holders only); none for the in-process store.
func (c *Cache) UnreachableNodes() []string {
	if r := redisOf(c.store); r != nil {
		return r.OpenNodes()
	}
	return nil
}

// ValidPlanID reports whether id has the form of a plan id (API.md's plan_id: the
// SHA-256 of a canonical request): 64 lowercase hex digits.
func ValidPlanID(id string) bool {
	if len(id) != 2*sha256.Size {
		return false
	}
	for i := range len(id) {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Key returns the store key of a plan id: Prefix + Version + ":" + planID,
// e.g. "shardplan:plan:v1.2.0:9f86d0…". Pass it to GetOrCompute; Lookup
// derives the same key from the plan id alone.
func (c *Cache) Key(planID string) string {
	return c.cfg.Prefix + c.cfg.Version + ":" + planID
}

// Backend names the store: "memory", "redis", "redis-sentinel" or
// "redis-cluster".
func (c *Cache) Backend() string { return c.store.Name() }

// TTL returns the lifetime of a memoized plan.
func (c *Cache) TTL() time.Duration { return c.cfg.TTL }

// GetOrCompute returns the value stored under key (hit = true) or, on a
// miss, the result of compute (hit = false), which is written to the store
// before it is returned (read-your-writes: the plan id an answer carries is
// fetchable from GET /v1/plans as soon as the client has it, on any replica
// sharing the store), under context.WithoutCancel(ctx) and the cache's own
// deadline, so a slow store delays a miss by at most that deadline and a
// client going away does not drop the write.
//
// Concurrent misses on the same key call compute once and share its result.
// compute runs on a goroutine of its own under ctx's values and deadline but not
// its cancellation, so one caller leaving does not fail the others; each caller
// stops waiting when its own ctx is done and then returns ctx.Err(). A panic in
// compute is returned to every waiter as a *PanicError. A miss met inside another
// compute (a memo consulted while computing a value, whose ctx is already detached
// from every caller) runs its compute on the calling goroutine instead: starting
// another goroutine there would only hand the work over and back, and grow a second
// stack, without letting anyone leave earlier.
//
// Values are stored as sealed entries (see entry.go): a value that does not open
// (garbage, another key's entry, truncated) is a miss, recomputed and overwritten.
//
// A store failure is counted (result="error") and served as a miss; it costs
// the caller at most the store's deadline. The only errors returned are
// compute's and ctx's. Callers must not modify the returned slice: it is
// shared with other callers and, in memory, with the store.
func (c *Cache) GetOrCompute(ctx context.Context, key string, compute func(context.Context) ([]byte, error)) (value []byte, hit bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	v, ok, err := c.get(ctx, key)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, false, ctx.Err() // the caller left; not a store failure
	case err != nil:
		c.m.lookupErr.Inc()
	case ok:
		c.m.hit.Inc()
		return v, true, nil
	default:
		c.m.miss.Inc()
	}

	f, lead := c.group.join(key)
	if lead {
		run := func() {
			val, err := []byte(nil), errComputeExited
			defer func() { c.group.land(key, f, val, err) }() // also when compute calls runtime.Goexit
			val, err = c.compute(ctx, key, compute)
		}
		if computing(ctx) {
			run()
			return f.val, false, f.err
		}
		go func() {
			growStack()
			run()
		}()
	}
	select {
	case <-f.done:
		if !lead {
			c.m.coalesced.Inc()
		}
		return f.val, false, f.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// compute runs compute for key under a context detached from ctx's cancellation
// and marked as computing, and writes its value to the store.
func (c *Cache) compute(ctx context.Context, key string, compute func(context.Context) ([]byte, error)) ([]byte, error) {
	cctx, cancel := detach(ctx)
	defer cancel()
	v, err := safeCompute(context.WithValue(cctx, computingKey{}, true), compute)
	if err != nil {
		return nil, err
	}
	c.set(ctx, key, v)
	return v, nil
}

// computingKey marks the context a compute runs under.
type computingKey struct{}

// computing reports whether ctx is a compute's (or derived from one).
func computing(ctx context.Context) bool { return ctx.Value(computingKey{}) != nil }

// errComputeExited is the error of a compute that ended its goroutine
// (runtime.Goexit) instead of returning.
var errComputeExited = errors.New("cache: compute exited without returning")

// flights is the set of computes in progress, by key: a miss on a key being
// computed waits for that compute instead of starting another.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one compute in progress; done is closed once val and err are set.
type flight struct {
	done chan struct{}
	val  []byte
	err  error
}

// join returns the flight of key and whether the caller leads it: a new flight,
// which the caller must land.
func (g *flights) join(key string) (*flight, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.m[key]; ok {
		return f, false
	}
	if g.m == nil {
		g.m = map[string]*flight{}
	}
	f := &flight{done: make(chan struct{})}
	g.m[key] = f
	return f, true
}

// land sets f's result, removes f from g (a later miss computes anew) and wakes
// its waiters.
func (g *flights) land(key string, f *flight, val []byte, err error) {
	f.val, f.err = val, err
	g.mu.Lock()
	delete(g.m, key)
	g.mu.Unlock()
	close(f.done)
}

// Do is GetOrCompute under Key(planID): the memo the HTTP layer calls with a
// request's plan id (it makes *Cache satisfy api.Memo, and with Lookup
// api.PlanLookup, without this package importing api).
func (c *Cache) Do(ctx context.Context, planID string, compute func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	return c.GetOrCompute(ctx, c.Key(planID), compute)
}

// ErrUnavailable is returned (wrapped) by Lookup when the store failed, so the caller
// can tell "no such plan" from "cannot tell now".
var ErrUnavailable = errors.New("cache: store unavailable")

// Lookup returns the memoized plan with the given plan id, as stored by
// GetOrCompute under Key(planID), for GET /v1/plans/{plan_id}. It reports
// false and no error for an id that is not a valid plan id (without a store
// call), for an absent or expired plan and for an entry that does not open
// (counted in shardplan_cache_corrupt_entries_total). When the store fails it
// returns an error wrapping ErrUnavailable (counted as a get error). Lookups
// are not counted in shardplan_cache_requests_total.
func (c *Cache) Lookup(ctx context.Context, planID string) ([]byte, bool, error) {
	if !ValidPlanID(planID) {
		return nil, false, nil
	}
	v, ok, err := c.get(ctx, c.Key(planID))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return v, ok, nil
}

// get is one measured store read. A value that does not open as an entry for key is
// counted by reason and reported as a miss: it is never served.
func (c *Cache) get(ctx context.Context, key string) ([]byte, bool, error) {
	start := time.Now()
	v, ok, err := c.store.Get(ctx, key)
	c.m.duration.WithLabelValues(opGet).Observe(time.Since(start).Seconds())
	if err != nil && ctx.Err() == nil {
		c.m.errors.WithLabelValues(opGet).Inc()
	}
	if err != nil || !ok {
		return nil, false, err
	}
	if c.local {
		return v, true, nil // what this process kept, as it was kept
	}
	payload, err := open(key, v)
	if ce, bad := errors.AsType[*corruptError](err); bad {
		c.m.corrupt.WithLabelValues(ce.reason).Inc()
		return nil, false, nil
	}
	return payload, true, nil
}

// set writes value under key, detached from ctx's cancellation and bounded
// by the cache's deadline. Beyond maxPendingWrites concurrent writes it is
// skipped and counted.
func (c *Cache) set(ctx context.Context, key string, value []byte) {
	select {
	case c.writes <- struct{}{}:
	default:
		c.m.dropped.Inc()
		return
	}
	defer func() { <-c.writes }()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	var err error
	if c.local {
		// The process's own memory keeps the payload itself: the entry format guards
		// what other processes read (Redis), and sealing a median reshard answer (66
		// KB) cost the request 50 µs of copying into freshly faulted pages.
		err = c.store.(keeper).Keep(wctx, key, value, c.cfg.TTL)
	} else if k, ok := c.store.(keeper); ok {
		err = k.Keep(wctx, key, seal(key, value), c.cfg.TTL) // a fresh entry: nobody else holds it
	} else {
		err = c.store.Set(wctx, key, seal(key, value), c.cfg.TTL)
	}
	c.m.duration.WithLabelValues(opSet).Observe(time.Since(start).Seconds())
	if err != nil {
		c.m.errors.WithLabelValues(opSet).Inc()
	}
}

// keeper is a Store that can keep a value without copying it (LRU, Near): the caller
// hands the value over and does not modify it afterwards.
type keeper interface {
	Keep(ctx context.Context, key string, value []byte, ttl time.Duration) error
}

// Status is the cache's readiness, for /readyz.
type Status struct {
	// Backend is Backend(): "memory", "redis", "redis-sentinel" or "redis-cluster".
	Backend string `json:"backend"`
	// OK reports whether the store answered a ping (every shard of a cluster).
	OK bool `json:"ok"`
	// Error is the ping failure; it names addresses, never credentials.
	Error string `json:"error,omitempty"`
	// Latency is how long the ping took.
	Latency time.Duration `json:"latency_ns"`
}

// Status pings the store under the cache's deadline (or ctx's, if earlier).
// It never blocks plan requests. A failing Redis makes OK false; API.md asks
// /readyz to report it, while plan requests keep being served as misses.
func (c *Cache) Status(ctx context.Context) Status {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	err := c.store.Ping(ctx)
	d := time.Since(start)
	c.m.duration.WithLabelValues(opPing).Observe(d.Seconds())
	s := Status{Backend: c.store.Name(), OK: err == nil, Latency: d}
	if err != nil {
		c.m.errors.WithLabelValues(opPing).Inc()
		s.Error = err.Error()
	}
	return s
}

// Close waits for writes in flight (each bounded by the cache's
// deadline), then closes the store. Calls after Close serve misses: compute
// still runs, nothing is written. Close it last during shutdown.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
	return c.store.Close()
}

// PanicError is returned by GetOrCompute when compute panicked.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the panicking goroutine's stack
}

func (e *PanicError) Error() string { return fmt.Sprintf("cache: compute panicked: %v", e.Value) }

// safeCompute turns a panic in compute into a *PanicError: GetOrCompute runs
// compute on a goroutine of its own, where a panic would end the process.
func safeCompute(ctx context.Context, compute func(context.Context) ([]byte, error)) (v []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return compute(ctx)
}

// detach returns a context with ctx's values and deadline but not its
// cancellation.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	d := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(d, dl)
	}
	return context.WithCancel(d)
}

// computeStack is the stack a compute goroutine grows to before compute runs: planning
// a reshard and rendering its answer (the api package's computes) use up to about that.
const computeStack = 64 << 10

// growStackSink is never true: growStack's frame is kept because it might be.
var growStackSink bool

// growStack grows the calling goroutine's stack to computeStack at once, while it is
// still shallow (a growth copies the frames in use and adjusts their pointers), instead
// of by doubling as compute descends: on a miss whose compute used 60 KiB of stack that
// halved the cache's cost of the miss (BenchmarkGetOrComputeMiss, about 20 µs to 10).
//
//go:noinline
func growStack() {
	var buf [computeStack - 8<<10]byte
	if growStackSink {
		useStack(buf[:])
	}
}

// useStack is what growStack never calls, so that its buffer is not optimized away.
//
//go:noinline
func useStack(b []byte) { b[0]++ }
