package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A circuit breaker per Redis node. A cache call to a node that is down waits out its
// deadline (a dial or read timeout, up to Config.Timeout); with every request making
// such calls, an outage would cost each uncached request that much. The breaker of a
// node opens after Failures consecutive failures of calls to it: from then on a call
// to it fails at once (a miss, as every store failure is), and a background probe pings
// the node every ProbeInterval until it answers, when the breaker closes and calls (and
// hits) resume. On a Cluster each node (each slot owner) has its own breaker, so a dead
// master costs nothing for the keys of its slots and nothing at all for the others.
//
//	closed ─ Failures consecutive failures ─► open ─ a probe answers ─► closed
//	  ▲ any success resets the count            │ calls fail at once (ErrNodeDown)
//	  └─────────────────────────────────────────┘ probe every ProbeInterval (background)
//
// What counts as a failure is a node that did not answer: a refused or timed-out dial, a
// read or write timeout, a closed connection. A reply of any kind (a value, a miss, a
// Redis error such as MOVED or NOAUTH) is an answer; a caller that went away
// (context.Canceled) says nothing about the node.

// ErrNodeDown is what a call to a node whose breaker is open fails with, at once.
var ErrNodeDown = errors.New("cache node unreachable; calls are skipped until a background probe reaches it")

// Defaults of BreakerConfig.
const (
	DefaultBreakerFailures      = 3
	DefaultBreakerProbeInterval = time.Second
)

// Clock is the time a breaker probes by: the real clock, or a fake one in tests.
type Clock interface {
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// BreakerConfig configures the per-node breakers. Zero fields take the defaults.
type BreakerConfig struct {
	// Failures is how many consecutive failed calls open a node's breaker (default 3).
	Failures int
	// ProbeInterval is how often an open breaker's node is pinged (default 1 s); the
	// probe's own deadline is the cache's Timeout.
	ProbeInterval time.Duration
	// Clock drives the probes (default: the real clock).
	Clock Clock
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Failures <= 0 {
		c.Failures = DefaultBreakerFailures
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = DefaultBreakerProbeInterval
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c
}

// breakers holds the breakers of one client's nodes, keyed by node address.
type breakers struct {
	cfg          BreakerConfig
	probeTimeout time.Duration

	mu    sync.Mutex
	nodes map[string]*breaker

	open    atomic.Int64  // breakers open now
	skipped atomic.Uint64 // calls failed at once by an open breaker
	opened  atomic.Uint64 // times a breaker opened

	done chan struct{} // closed by close: probes stop
	once sync.Once
	wg   sync.WaitGroup // probes running
}

func newBreakers(cfg BreakerConfig, probeTimeout time.Duration) *breakers {
	return &breakers{cfg: cfg.withDefaults(), probeTimeout: probeTimeout, nodes: map[string]*breaker{}, done: make(chan struct{})}
}

// node returns addr's breaker, made on first use; ping reaches the node past the
// breaker (the probe).
func (bs *breakers) node(addr string, ping func(context.Context) error) *breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b, ok := bs.nodes[addr]
	if !ok {
		b = &breaker{set: bs, addr: addr}
		bs.nodes[addr] = b
	}
	b.mu.Lock()
	b.ping = ping // a node client made again for the same address replaces the old one
	b.mu.Unlock()
	return b
}

// close stops the probes and waits for them.
func (bs *breakers) close() {
	bs.once.Do(func() { close(bs.done) })
	bs.wg.Wait()
}

// openNodes lists the addresses whose breakers are open.
func (bs *breakers) openNodes() []string {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var out []string
	for addr, b := range bs.nodes {
		if b.isOpen() {
			out = append(out, addr)
		}
	}
	return out
}

// breaker is one node's.
type breaker struct {
	set  *breakers
	addr string

	mu       sync.Mutex // guards the fields below
	ping     func(context.Context) error
	failures int
	open     bool
}

func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// allow reports whether a call may go to the node; a call it refuses is counted.
func (b *breaker) allow() bool {
	if b.isOpen() {
		b.set.skipped.Add(1)
		return false
	}
	return true
}

// record counts a call's outcome: a failure towards opening, anything else resets.
func (b *breaker) record(ctx context.Context, err error) {
	failed := nodeFailed(ctx, err)
	b.mu.Lock()
	if !failed {
		b.failures = 0
		b.mu.Unlock()
		return
	}
	b.failures++
	if b.open || b.failures < b.set.cfg.Failures {
		b.mu.Unlock()
		return
	}
	b.open = true
	b.mu.Unlock()
	b.set.open.Add(1)
	b.set.opened.Add(1)
	b.startProbe()
}

// startProbe pings the node every ProbeInterval until it answers, then closes the
// breaker. The probe stops when the store closes.
func (b *breaker) startProbe() {
	bs := b.set
	select {
	case <-bs.done:
		return
	default:
	}
	bs.wg.Add(1)
	go func() {
		defer bs.wg.Done()
		for {
			select {
			case <-bs.done:
				return
			case <-bs.cfg.Clock.After(bs.cfg.ProbeInterval):
			}
			b.mu.Lock()
			ping := b.ping
			b.mu.Unlock()
			ctx, cancel := context.WithTimeout(probing(context.Background()), bs.probeTimeout)
			err := ping(ctx)
			cancel()
			if err == nil {
				b.mu.Lock()
				b.open, b.failures = false, 0
				b.mu.Unlock()
				bs.open.Add(-1)
				return
			}
		}
	}()
}

// nodeFailed reports whether err says the node did not answer.
func nodeFailed(ctx context.Context, err error) bool {
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		return false
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return false // the caller left
	}
	var reply redis.Error
	return !errors.As(err, &reply) // a reply, even an error reply, is an answer
}

type probeKey struct{}

// probing marks ctx as a probe's: its calls pass the breaker.
func probing(ctx context.Context) context.Context { return context.WithValue(ctx, probeKey{}, true) }

func isProbe(ctx context.Context) bool { return ctx.Value(probeKey{}) != nil }

// breakerHook is the go-redis hook that puts b in front of one node client.
type breakerHook struct{ b *breaker }

var _ redis.Hook = breakerHook{}

func (h breakerHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h breakerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isProbe(ctx) {
			return next(ctx, cmd)
		}
		if !h.b.allow() {
			cmd.SetErr(ErrNodeDown)
			return ErrNodeDown
		}
		err := next(ctx, cmd)
		h.b.record(ctx, err)
		return err
	}
}

func (h breakerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if isProbe(ctx) {
			return next(ctx, cmds)
		}
		if !h.b.allow() {
			for _, c := range cmds {
				c.SetErr(ErrNodeDown)
			}
			return ErrNodeDown
		}
		err := next(ctx, cmds)
		h.b.record(ctx, err)
		return err
	}
}

// guard puts a breaker of bs in front of client, a node client (the one node, or one
// node of a Cluster), keyed by its address.
func (bs *breakers) guard(client *redis.Client) {
	addr := client.Options().Addr
	b := bs.node(addr, func(ctx context.Context) error { return client.Ping(ctx).Err() })
	client.AddHook(breakerHook{b})
}
