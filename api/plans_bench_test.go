package api

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cache"
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/testgen"
)

// BenchmarkReshardCachedHit measures a POST /v1/reshard answered from the in-process plan
// cache through the whole router (decode, validate, parse, key, lookup, write), beside
// GET /healthz, the floor of the same router and middleware.
func BenchmarkReshardCachedHit(b *testing.B) {
	c, err := cache.Open(cache.Config{}, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	s, err := New(Deps{Memo: c})
	require.NoError(b, err)
	body := `{"mesh":"x=2,y=4","shape":[2048,2048],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/reshard", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		return rec
	}
	require.Equal(b, http.StatusOK, post().Code)
	require.Eventually(b, func() bool { return post().Header().Get("X-Cache") == "hit" }, 5e9, 1e6)
	b.Run("reshard_hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			post()
		}
	})
	b.Run("healthz", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		}
	})
}

// BenchmarkReshardRandomSet posts the 250 reshards of testgen.RandomSet
// through the whole router, each a miss (a fresh cache every pass), and reports the
// per-request latency percentiles (µs) and, beside them, the planner's own share
// (planner.Reshard on the same requests in the same pass): the difference is what the
// service adds to a plan (decode, validate, parse, key, render, encode, memo).
//
//	go test -run '^$' -bench BenchmarkReshardRandomSet -benchtime 4x ./api/
func BenchmarkReshardRandomSet(b *testing.B) {
	m, err := sharding.ParseMeshString(testgen.RandomSetMesh, "mesh")
	require.NoError(b, err)
	bodies := testgen.RandomSetBodies(m)
	set := testgen.RandomSet(m)
	f, _ := cost.Profile("tpu-v5p")
	var lat, plan []float64
	for b.Loop() {
		lat, plan = lat[:0], plan[:0]
		c, err := cache.Open(cache.Config{}, nil)
		require.NoError(b, err)
		s, err := New(Deps{Memo: c})
		require.NoError(b, err)
		for i, body := range bodies {
			r := httptest.NewRequest(http.MethodPost, "/v1/reshard", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			t0 := time.Now()
			s.ServeHTTP(rec, r)
			lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
			if rec.Code != http.StatusOK || rec.Header().Get("X-Cache") == "hit" {
				b.Fatalf("body %d: %d %s %s", i, rec.Code, rec.Header().Get("X-Cache"), rec.Body.String())
			}
			rs := set[i]
			t0 = time.Now()
			_, err := planner.Reshard(context.Background(), &planner.Request{Mesh: m, Shape: rs.Shape, ElemBits: 16, Source: rs.Source, Target: rs.Target, Model: f})
			plan = append(plan, float64(time.Since(t0).Nanoseconds())/1e3)
			require.NoError(b, err)
		}
		require.NoError(b, c.Close())
	}
	pct := func(xs []float64, q float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[min(len(xs)-1, int(q*float64(len(xs))))]
	}
	b.ReportMetric(pct(lat, 0.5), "p50-µs")
	b.ReportMetric(pct(lat, 0.9), "p90-µs")
	b.ReportMetric(pct(lat, 0.99), "p99-µs")
	b.ReportMetric(pct(plan, 0.5), "planner-p50-µs")
	diff := make([]float64, len(lat))
	for i := range lat {
		diff[i] = lat[i] - plan[i]
	}
	b.ReportMetric(pct(diff, 0.5), "added-p50-µs")
}
