package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"
)

// Defaults applied by Config to zero fields.
const (
	DefaultDialTimeout  = 500 * time.Millisecond
	DefaultReadTimeout  = 200 * time.Millisecond
	DefaultWriteTimeout = 200 * time.Millisecond
	DefaultTimeout      = 250 * time.Millisecond
	DefaultTTL          = 24 * time.Hour
	DefaultPrefix       = "shardplan:plan:"
	DefaultVersion      = "dev"
)

// Config configures the store and the cache. The zero value is a valid
// configuration: an in-process LRU of DefaultMaxBytes with DefaultTTL.
//
// Redis is used when RedisURL or Addrs is set. RedisURL accepts
//
//	redis://[user:pass@]host:port[/db][?opts]      single node
//	rediss://…                                      same, over TLS
//	unix:///path/to/redis.sock[?db=N]               single node over a Unix socket
//	redis://[user:pass@]sentinel:port?master_name=M&addr=sentinel2:port
//	                                                Sentinel (URL user/pass are the Sentinel's;
//	                                                username=/password= query keys the master's)
//	redis://[user:pass@]node:port?addr=node2:port&addr=node3:port
//	redis://node:port?cluster=true                  Cluster (one seed is enough with cluster=true)
//
// and go-redis's snake_case option keys (dial_timeout=1s, pool_size=20, …).
// cluster= is ours and is removed before go-redis parses the URL; any other
// unknown key is an error. Explicit fields are merged on top of the URL:
// Addrs are appended, MasterName selects Sentinel, Cluster selects Cluster,
// Username/Password replace the URL's. Timeouts in the URL win over the
// fields here, which win over the defaults.
type Config struct {
	// RedisURL is REDIS_URL; empty (with no Addrs) selects the in-process LRU.
	RedisURL string
	// Addrs are host:port seeds: Cluster nodes, Sentinels, or the one node.
	Addrs []string
	// MasterName is the Sentinel master name; set, it selects Sentinel.
	MasterName string
	// Cluster selects Redis Cluster even with a single seed address.
	Cluster bool
	// Username and Password authenticate to Redis (the master under Sentinel).
	Username string
	Password string

	// DialTimeout, ReadTimeout and WriteTimeout are go-redis's socket
	// timeouts (defaults 500ms, 200ms, 200ms).
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// Timeout is the deadline of every store call (default 250ms): a lookup
	// never delays a request by more than this.
	Timeout time.Duration

	// MaxBytes bounds the in-process LRU by bytes of keys and values
	// (default 64 MiB); with Redis, the near cache in front of it.
	MaxBytes int64
	// TTL is how long a memoized plan lives (default 24h).
	TTL time.Duration
	// Prefix starts every key (default "shardplan:plan:").
	Prefix string
	// Version is the planner version, part of every key (default "dev").
	// Plans memoized by another version are neither hit nor found by Lookup.
	Version string

	// Breaker configures the per-node circuit breakers of Redis (breaker.go).
	Breaker BreakerConfig
}

// UsesRedis reports whether the configuration selects Redis.
func (c Config) UsesRedis() bool { return c.RedisURL != "" || len(c.Addrs) > 0 }

// Validate reports the first invalid field: a negative duration or size, or
// a Redis URL or address set go-redis cannot use. Secrets are not included
// in the error.
func (c Config) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"dial timeout", c.DialTimeout}, {"read timeout", c.ReadTimeout},
		{"write timeout", c.WriteTimeout}, {"timeout", c.Timeout}, {"ttl", c.TTL},
	} {
		if d.v < 0 {
			return fmt.Errorf("cache: %s must not be negative, got %s", d.name, d.v)
		}
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("cache: max bytes must not be negative, got %d", c.MaxBytes)
	}
	if c.UsesRedis() {
		if _, _, err := universalOptions(c); err != nil {
			return err
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.Timeout, DefaultTimeout)
	def(&c.TTL, DefaultTTL)
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	return c
}

// LogValue implements slog.LogValuer: the configuration without secrets.
func (c Config) LogValue() slog.Value {
	c = c.withDefaults()
	backend := BackendMemory
	if c.UsesRedis() {
		backend = BackendRedis
	}
	attrs := []slog.Attr{
		slog.String("backend", backend),
		slog.Duration("ttl", c.TTL),
		slog.Duration("timeout", c.Timeout),
		slog.String("prefix", c.Prefix),
		slog.String("version", c.Version),
	}
	if c.UsesRedis() {
		attrs = append(attrs,
			slog.String("redis_url", redactURL(c.RedisURL)),
			slog.Any("addrs", c.Addrs),
			slog.String("master_name", c.MasterName),
			slog.Bool("cluster", c.Cluster),
			slog.Bool("password_set", c.Password != ""),
			slog.Duration("dial_timeout", c.DialTimeout),
			slog.Duration("read_timeout", c.ReadTimeout),
			slog.Duration("write_timeout", c.WriteTimeout),
		)
	} else {
		attrs = append(attrs, slog.Int64("max_bytes", c.MaxBytes))
	}
	return slog.GroupValue(attrs...)
}

// redactURL hides the password in the user info and in a password= query key.
func redactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// urlError strips the URL (and any password in it) from a url.Parse error.
func urlError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
