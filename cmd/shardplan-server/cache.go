package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shardplan/shardplan/api"
	"github.com/shardplan/shardplan/internal/cache"
)

// *cache.Cache is the service's memo: Do keys by plan id, Lookup serves permalinks.
var (
	_ api.Memo       = (*cache.Cache)(nil)
	_ api.PlanLookup = (*cache.Cache)(nil)
)

// cacheConfig is the plan cache's configuration: Redis when REDIS_URL or
// SHARDPLAN_REDIS_ADDRS is set, else the in-process LRU of SHARDPLAN_CACHE_MAX_BYTES.
// Keys carry the API's key version (the planner's), so a new planner never serves an old
// plan.
func (c config) cacheConfig() cache.Config {
	var addrs []string
	for a := range strings.SplitSeq(c.RedisAddrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return cache.Config{
		RedisURL:     c.RedisURL,
		Addrs:        addrs,
		MasterName:   c.RedisMasterName,
		Cluster:      c.RedisCluster,
		Username:     c.RedisUsername,
		Password:     c.RedisPassword,
		DialTimeout:  c.RedisDialTimeout,
		ReadTimeout:  c.RedisReadTimeout,
		WriteTimeout: c.RedisWriteTimeout,
		Timeout:      c.CacheTimeout,
		MaxBytes:     c.CacheMaxBytes,
		TTL:          c.CacheTTL,
		Prefix:       c.CachePrefix,
		Version:      api.KeyVersion,
	}
}

// openCache opens the plan cache with its metrics on reg and returns it with its
// readiness check. A Redis that is down at start is not an error: requests are served
// as misses and the "cache" check fails until it answers.
func openCache(cfg config, reg prometheus.Registerer, logger *slog.Logger) (*cache.Cache, api.Check, error) {
	routeRedisLogs(logger)
	c, err := cache.Open(cfg.cacheConfig(), reg)
	if err != nil {
		return nil, nil, err
	}
	check := func(ctx context.Context) error {
		if st := c.Status(ctx); !st.OK {
			msg := st.Backend + ": " + st.Error
			if down := c.UnreachableNodes(); len(down) > 0 {
				slices.Sort(down)
				msg += " (not called until a probe reaches them: " + strings.Join(down, ", ") + ")"
			}
			return errors.New(msg)
		}
		return nil
	}
	return c, check, nil
}

// go-redis logs through a process-wide logger (to stderr by default, a line per failed
// dial while Redis is down). Route it to the service's logger at debug level: an outage
// already shows in shardplan_cache_errors_total and the "cache" readiness check.
var (
	redisLogOnce sync.Once
	redisLog     atomic.Pointer[slog.Logger]
)

type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l := redisLog.Load(); l != nil {
		l.LogAttrs(ctx, slog.LevelDebug, fmt.Sprintf(format, v...), slog.String("component", "go-redis"))
	}
}

func routeRedisLogs(l *slog.Logger) {
	redisLog.Store(l)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}
