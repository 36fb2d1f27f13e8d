package cache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Backend names returned by Store.Name.
const (
	BackendMemory        = "memory"
	BackendRedis         = "redis"
	BackendRedisSentinel = "redis-sentinel"
	BackendRedisCluster  = "redis-cluster"
)

// clusterKey is our query key selecting Cluster; go-redis rejects unknown
// keys, so it is removed before parsing.
const clusterKey = "cluster"

// Redis is a Store on a go-redis UniversalClient: a single node, Sentinel or
// Cluster. Every call runs under its own deadline (Config.Timeout, or the
// caller's if earlier), and a missing key is a miss, not an error. Each node
// has a circuit breaker (breaker.go): a node that stopped answering is not
// called until a background probe reaches it again.
type Redis struct {
	client   redis.UniversalClient
	name     string
	timeout  time.Duration
	breakers *breakers
}

// NewRedis builds the client described by cfg (see Config). It does not
// connect; the first call or Ping does. It fails only on configuration
// errors, which never contain the password.
func NewRedis(cfg Config) (*Redis, error) {
	cfg = cfg.withDefaults()
	opts, name, err := universalOptions(cfg)
	if err != nil {
		return nil, err
	}
	bs := newBreakers(cfg.Breaker, cfg.Timeout)
	return &Redis{client: guardedClient(opts, bs), name: name, timeout: cfg.Timeout, breakers: bs}, nil
}

// guardedClient is redis.NewUniversalClient(opts) with a breaker of bs in front of
// every node client: on a Cluster each node client is made guarded (NewClient), a
// Sentinel-routed cluster guards its nodes as they appear, a single node (or the
// Sentinel master) is guarded as a whole.
func guardedClient(opts *redis.UniversalOptions, bs *breakers) redis.UniversalClient {
	if opts.MasterName == "" && (len(opts.Addrs) > 1 || opts.IsClusterMode) {
		co := opts.Cluster()
		co.NewClient = func(o *redis.Options) *redis.Client {
			c := redis.NewClient(o)
			bs.guard(c)
			return c
		}
		return redis.NewClusterClient(co)
	}
	c := redis.NewUniversalClient(opts)
	switch c := c.(type) {
	case *redis.Client:
		bs.guard(c)
	case *redis.ClusterClient:
		c.OnNewNode(bs.guard)
	}
	return c
}

// universalOptions merges cfg's URL and explicit fields into go-redis
// options and names the topology they select.
func universalOptions(cfg Config) (*redis.UniversalOptions, string, error) {
	cfg = cfg.withDefaults()
	o := &redis.UniversalOptions{}
	cluster := cfg.Cluster
	if cfg.RedisURL != "" {
		var err error
		if cluster, err = urlOptions(o, cfg, cluster); err != nil {
			return nil, "", err
		}
	}
	for _, a := range cfg.Addrs {
		if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" {
			return nil, "", fmt.Errorf("cache: redis address %q is not host:port", a)
		}
		o.Addrs = append(o.Addrs, a)
	}
	if len(o.Addrs) == 0 {
		return nil, "", errors.New("cache: no Redis address configured")
	}
	if cfg.MasterName != "" {
		o.MasterName = cfg.MasterName
	}
	if cfg.Username != "" {
		o.Username = cfg.Username
	}
	if cfg.Password != "" {
		o.Password = cfg.Password
	}
	o.IsClusterMode = cluster
	quietOptions(o, cfg)

	name := BackendRedis
	switch {
	case o.MasterName != "":
		name = BackendRedisSentinel
	case o.IsClusterMode || len(o.Addrs) > 1:
		name = BackendRedisCluster
	}
	return o, name, nil
}

// urlOptions parses cfg's REDIS_URL into o: a sentinel URL when it or cfg names a
// master, a cluster URL when cluster (or the URL's cluster=true) is set or it lists
// addr=, else a single server's URL. It returns whether the topology is a cluster.
func urlOptions(o *redis.UniversalOptions, cfg Config, cluster bool) (bool, error) {
	u, err := url.Parse(cfg.RedisURL)
	if err != nil {
		return false, fmt.Errorf("cache: REDIS_URL: %w", urlError(err))
	}
	q := u.Query()
	if q.Has(clusterKey) {
		b, err := strconv.ParseBool(q.Get(clusterKey))
		if err != nil {
			return false, fmt.Errorf("cache: REDIS_URL: cluster=%q is not a boolean", q.Get(clusterKey))
		}
		cluster = cluster || b
		q.Del(clusterKey)
		u.RawQuery = q.Encode()
	}
	raw := u.String()
	switch {
	case q.Has("master_name") || cfg.MasterName != "":
		fo, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return false, fmt.Errorf("cache: REDIS_URL (sentinel): %w", urlError(err))
		}
		copyFailover(o, fo)
	case cluster || q.Has("addr"):
		co, err := redis.ParseClusterURL(raw)
		if err != nil {
			return false, fmt.Errorf("cache: REDIS_URL (cluster): %w", urlError(err))
		}
		copyCluster(o, co)
		cluster = true
	default:
		so, err := redis.ParseURL(raw)
		if err != nil {
			return false, fmt.Errorf("cache: REDIS_URL: %w", urlError(err))
		}
		copySimple(o, so)
	}
	return cluster, nil
}

// quietOptions sets what a cache needs so that it never slows a request: short socket
// timeouts (cfg's, where the URL set none), one dial per attempt, context deadlines
// honoured in flight, and a quiet handshake with Redis 7.0.
func quietOptions(o *redis.UniversalOptions, cfg Config) {
	if o.DialTimeout == 0 {
		o.DialTimeout = cfg.DialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = cfg.ReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = cfg.WriteTimeout
	}
	if o.DialerRetries == 0 {
		// One dial per attempt: a refused dial is a miss now, and go-redis's
		// retries (100ms apart) would only burn the call's deadline.
		o.DialerRetries = 1
	}
	o.ContextTimeoutEnabled = true
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

func copySimple(o *redis.UniversalOptions, s *redis.Options) {
	o.Addrs = []string{s.Addr}
	if s.Network == "unix" {
		o.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}
	}
	o.DB = s.DB
	o.Protocol = s.Protocol
	o.Username, o.Password = s.Username, s.Password
	o.ClientName = s.ClientName
	o.TLSConfig = s.TLSConfig
	o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = s.MaxRetries, s.MinRetryBackoff, s.MaxRetryBackoff
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = s.DialTimeout, s.ReadTimeout, s.WriteTimeout
	o.PoolFIFO, o.PoolSize, o.PoolTimeout = s.PoolFIFO, s.PoolSize, s.PoolTimeout
	o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = s.MinIdleConns, s.MaxIdleConns, s.MaxActiveConns
	o.MaxConcurrentDials = s.MaxConcurrentDials
	o.PipelinePoolSize, o.PipelineReadBufferSize, o.PipelineWriteBufferSize = s.PipelinePoolSize, s.PipelineReadBufferSize, s.PipelineWriteBufferSize
	o.ConnMaxIdleTime, o.ConnMaxLifetime, o.ConnMaxLifetimeJitter = s.ConnMaxIdleTime, s.ConnMaxLifetime, s.ConnMaxLifetimeJitter
}

func copyCluster(o *redis.UniversalOptions, c *redis.ClusterOptions) {
	o.Addrs = c.Addrs
	o.Protocol = c.Protocol
	o.Username, o.Password = c.Username, c.Password
	o.ClientName = c.ClientName
	o.TLSConfig = c.TLSConfig
	o.MaxRedirects, o.ReadOnly = c.MaxRedirects, c.ReadOnly
	o.RouteByLatency, o.RouteByLatencyTolerance, o.RouteRandomly = c.RouteByLatency, c.RouteByLatencyTolerance, c.RouteRandomly
	o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = c.MaxRetries, c.MinRetryBackoff, c.MaxRetryBackoff
	o.DialTimeout, o.DialerRetries, o.DialerRetryTimeout = c.DialTimeout, c.DialerRetries, c.DialerRetryTimeout
	o.ReadTimeout, o.WriteTimeout = c.ReadTimeout, c.WriteTimeout
	o.PoolFIFO, o.PoolSize, o.PoolTimeout = c.PoolFIFO, c.PoolSize, c.PoolTimeout
	o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = c.MinIdleConns, c.MaxIdleConns, c.MaxActiveConns
	o.MaxConcurrentDials = c.MaxConcurrentDials
	o.PipelinePoolSize, o.PipelineReadBufferSize, o.PipelineWriteBufferSize = c.PipelinePoolSize, c.PipelineReadBufferSize, c.PipelineWriteBufferSize
	o.ConnMaxIdleTime, o.ConnMaxLifetime, o.ConnMaxLifetimeJitter = c.ConnMaxIdleTime, c.ConnMaxLifetime, c.ConnMaxLifetimeJitter
	o.FailingTimeoutSeconds = c.FailingTimeoutSeconds
}

func copyFailover(o *redis.UniversalOptions, f *redis.FailoverOptions) {
	o.Addrs = f.SentinelAddrs
	o.MasterName = f.MasterName
	o.SentinelUsername, o.SentinelPassword = f.SentinelUsername, f.SentinelPassword
	o.DB = f.DB
	o.Protocol = f.Protocol
	o.Username, o.Password = f.Username, f.Password
	o.ClientName = f.ClientName
	o.TLSConfig = f.TLSConfig
	o.RouteByLatency, o.RouteByLatencyTolerance, o.RouteRandomly = f.RouteByLatency, f.RouteByLatencyTolerance, f.RouteRandomly
	o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = f.MaxRetries, f.MinRetryBackoff, f.MaxRetryBackoff
	o.DialTimeout, o.DialerRetries, o.DialerRetryTimeout = f.DialTimeout, f.DialerRetries, f.DialerRetryTimeout
	o.ReadTimeout, o.WriteTimeout = f.ReadTimeout, f.WriteTimeout
	o.PoolFIFO, o.PoolSize, o.PoolTimeout = f.PoolFIFO, f.PoolSize, f.PoolTimeout
	o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = f.MinIdleConns, f.MaxIdleConns, f.MaxActiveConns
	o.MaxConcurrentDials = f.MaxConcurrentDials
	o.PipelinePoolSize, o.PipelineReadBufferSize, o.PipelineWriteBufferSize = f.PipelinePoolSize, f.PipelineReadBufferSize, f.PipelineWriteBufferSize
	o.ConnMaxIdleTime, o.ConnMaxLifetime, o.ConnMaxLifetimeJitter = f.ConnMaxIdleTime, f.ConnMaxLifetime, f.ConnMaxLifetimeJitter
	o.IdentitySuffix = f.IdentitySuffix
}

// Get implements Store. redis.Nil is a miss; any other failure, including
// the deadline, is returned as an error.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	v, err := r.client.Get(ctx, key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("redis get: %w", err)
	}
	return v, true, nil
}

// Set implements Store with SET key value PX ttl (no expiry when ttl <= 0).
func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return r.set(ctx, key, value, ttl, false)
}

// SetNX stores value under key for ttl (no expiry when ttl <= 0) unless key exists
// (SET key value NX PX ttl): Near's write-back.
func (r *Redis) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return r.set(ctx, key, value, ttl, true)
}

func (r *Redis) set(ctx context.Context, key string, value []byte, ttl time.Duration, nx bool) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	ttl = max(ttl, 0)
	var err error
	if nx {
		err = r.client.SetNX(ctx, key, value, ttl).Err()
	} else {
		err = r.client.Set(ctx, key, value, ttl).Err()
	}
	if err != nil {
		return fmt.Errorf("redis set: %w", err)
	}
	return nil
}

// Ping implements Store. On a Cluster every shard is pinged.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var err error
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			if err := c.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", c.Options().Addr, err)
			}
			return nil
		})
	} else {
		err = r.client.Ping(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("redis ping: %w", err)
	}
	return nil
}

// Close implements Store; it stops the breakers' probes and closes the client's
// connections.
func (r *Redis) Close() error {
	r.breakers.close()
	return r.client.Close()
}

// OpenNodes lists the addresses of the nodes whose breakers are open.
func (r *Redis) OpenNodes() []string { return r.breakers.openNodes() }

// Name implements Store: "redis", "redis-sentinel" or "redis-cluster".
func (r *Redis) Name() string { return r.name }

// Client returns the underlying go-redis client.
func (r *Redis) Client() redis.UniversalClient { return r.client }
