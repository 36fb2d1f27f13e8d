package cache

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests  *prometheus.CounterVec // result: hit|miss|error
	errors    *prometheus.CounterVec // op: get|set|ping
	duration  *prometheus.HistogramVec
	coalesced prometheus.Counter
	dropped   prometheus.Counter
	corrupt   *prometheus.CounterVec // reason: format|key|length|checksum

	hit, miss, lookupErr prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardplan_cache_requests_total",
			Help: "Plan cache lookups by result: hit, miss, or error (a store failure served as a miss).",
		}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardplan_cache_errors_total",
			Help: "Plan cache store operations that failed, by operation.",
		}, []string{"op"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shardplan_cache_operation_duration_seconds",
			Help:    "Latency of plan cache store operations, by operation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"op"}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardplan_cache_coalesced_total",
			Help: "Plan cache misses that waited for an identical in-flight computation instead of computing.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardplan_cache_dropped_writes_total",
			Help: "Plan cache writes skipped because too many writes were pending.",
		}),
		corrupt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardplan_cache_corrupt_entries_total",
			Help: "Plan cache entries read back that did not open (another format, another key's entry, truncated, checksum mismatch), by reason; each was treated as a miss, never served.",
		}, []string{"reason"}),
	}
	for _, r := range corruptReasons {
		m.corrupt.WithLabelValues(r)
	}
	m.hit = m.requests.WithLabelValues("hit")
	m.miss = m.requests.WithLabelValues("miss")
	m.lookupErr = m.requests.WithLabelValues("error")
	for _, op := range []string{opGet, opSet, opPing} {
		m.errors.WithLabelValues(op)
		m.duration.WithLabelValues(op)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.errors, m.duration, m.coalesced, m.dropped, m.corrupt} {
		if err := reg.Register(c); err != nil {
			if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
				return nil, fmt.Errorf("cache: metrics already registered on this registry: %w", err)
			}
			return nil, fmt.Errorf("cache: register metrics: %w", err)
		}
	}
	return m, nil
}

const (
	opGet  = "get"
	opSet  = "set"
	opPing = "ping"
)

// registerBreakerMetrics exposes bs's counts on reg (nil: not registered).
func registerBreakerMetrics(reg prometheus.Registerer, bs *breakers) error {
	if reg == nil {
		return nil
	}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shardplan_cache_nodes_unreachable",
			Help: "Redis nodes whose circuit breaker is open: calls to them are skipped (served as misses) until a background probe reaches them.",
		}, func() float64 { return float64(bs.open.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shardplan_cache_breaker_skipped_total",
			Help: "Plan cache calls not sent because their Redis node's circuit breaker was open.",
		}, func() float64 { return float64(bs.skipped.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shardplan_cache_breaker_opened_total",
			Help: "Times a Redis node's circuit breaker opened after consecutive failed calls.",
		}, func() float64 { return float64(bs.opened.Load()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("cache: register breaker metrics: %w", err)
		}
	}
	return nil
}
