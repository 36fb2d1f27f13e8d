package api

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardplan/shardplan/internal/planner"
)

// memoCollector exposes the planner memos' sizes and lookups, read at each scrape:
// shardplan_planner_memo_entries, shardplan_planner_memo_hits_total and
// shardplan_planner_memo_misses_total, labelled by memo:
//
//   - group_bounds: the heuristic's group bounds (one per model, mesh and atoms);
//   - hop_bounds: the heuristic's hop bounds;
//   - routers: the cost model's idle routers (hits: a request took a pooled one);
//   - digit_units: the cost model's digit units and axis loads shared by its routers.
type memoCollector struct {
	memos                 *planner.Memos
	entries, hits, misses *prometheus.Desc
}

func newMemoCollector(m *planner.Memos) *memoCollector {
	label := []string{"memo"}
	return &memoCollector{
		memos: m,
		entries: prometheus.NewDesc("shardplan_planner_memo_entries",
			"Entries the planner memos hold (each memo is bounded; one past its bound starts over).", label, nil),
		hits: prometheus.NewDesc("shardplan_planner_memo_hits_total",
			"Planner memo lookups that found their entry.", label, nil),
		misses: prometheus.NewDesc("shardplan_planner_memo_misses_total",
			"Planner memo lookups that computed their entry.", label, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *memoCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.entries
	ch <- c.hits
	ch <- c.misses
}

// Collect implements prometheus.Collector.
func (c *memoCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.memos.Stats()
	for _, m := range []struct {
		name         string
		entries      int
		hits, misses int64
	}{
		{"group_bounds", st.GroupBounds, st.GroupHits, st.GroupMisses},
		{"hop_bounds", st.HopBounds, st.HopHits, st.HopMisses},
		{"routers", st.Cost.IdleRouters, st.Cost.RouterHits, st.Cost.RouterMisses},
		{"digit_units", st.Cost.Units, st.Cost.UnitHits, st.Cost.UnitMisses},
	} {
		ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(m.entries), m.name)
		ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(m.hits), m.name)
		ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(m.misses), m.name)
	}
}

// registerMemoMetrics exposes s's planner memos (memoCollector).
func (s *Server) registerMemoMetrics(reg prometheus.Registerer) error {
	if err := reg.Register(newMemoCollector(s.planMemos)); err != nil {
		return fmt.Errorf("register planner memo metrics: %w", err)
	}
	return nil
}
