package main

import (
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
)

// The garbage collector's settings. A reshard miss allocates hundreds of kilobytes to
// megabytes that die with the request, beside a plan cache of up to
// SHARDPLAN_CACHE_MAX_BYTES that lives on, so the collector runs about four times less
// often at GOGC=400 than at Go's default 100 (docs/PERFORMANCE.md has the measurement).
// A larger GOGC lets the heap grow to about five times what is live, so a soft memory
// limit goes with it: near the limit the collector runs more often instead of the heap
// growing on.

// defaultGCPercent is SHARDPLAN_GC_PERCENT's default.
const defaultGCPercent = 400

// minAutoMemoryLimit is the least automatic memory limit (SHARDPLAN_MEMORY_LIMIT=0).
const minAutoMemoryLimit = 512 << 20

// memoryLimit is the soft heap limit c asks for: SHARDPLAN_MEMORY_LIMIT, or when 0 the
// larger of minAutoMemoryLimit and four times the plan cache's bound.
func (c config) memoryLimit() int64 {
	if c.MemoryLimit > 0 {
		return c.MemoryLimit
	}
	return max(minAutoMemoryLimit, 4*c.CacheMaxBytes)
}

// gcSettings is what applyGC left in effect: the collector's percentage and soft memory
// limit, and for each whether the config set it (false: GOGC or GOMEMLIMIT did, and the
// runtime applied it at start).
type gcSettings struct {
	Percent           int
	PercentFromConfig bool
	MemoryLimit       int64
	LimitFromConfig   bool
}

// applyGC sets the collector's percentage (debug.SetGCPercent) and soft memory limit
// (debug.SetMemoryLimit) from c, each unless its environment variable (GOGC,
// GOMEMLIMIT, read through getenv) is set: the runtime has applied that one already.
// Both settings are process-wide.
func applyGC(c config, getenv func(string) string) gcSettings {
	var s gcSettings
	if getenv("GOGC") == "" {
		debug.SetGCPercent(c.GCPercent)
		s.PercentFromConfig = true
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(c.memoryLimit())
		s.LimitFromConfig = true
	}
	s.Percent, s.MemoryLimit = readGC()
	return s
}

// readGC reads the collector's percentage (-1: off) and soft memory limit in effect.
func readGC() (percent int, limit int64) {
	samples := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(samples)
	return int(samples[0].Value.Uint64()), int64(samples[1].Value.Uint64())
}

// logAttrs describes s for the start-up log.
func (s gcSettings) logAttrs() []slog.Attr {
	source := func(fromConfig bool, env string) string {
		if fromConfig {
			return "config"
		}
		return env
	}
	return []slog.Attr{
		slog.Int("gc_percent", s.Percent),
		slog.String("gc_percent_from", source(s.PercentFromConfig, "GOGC")),
		slog.Int64("memory_limit", s.MemoryLimit),
		slog.String("memory_limit_from", source(s.LimitFromConfig, "GOMEMLIMIT")),
	}
}
