package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/stretchr/testify/require"
)

// TestLargeMeshesDump writes BenchmarkLargeMeshes' plans as TestRandomSetDump writes
// the random set's (time, expansions, whether the exact pass finished; one line each,
// numbered i on tpu-v5p and 1000+i on h100), to the file SHARDPLAN_LARGEMESH_OUT names
// (skipped without it), for scripts/compare_plans.py:
//
//	SHARDPLAN_LARGEMESH_OUT=/tmp/after-large.txt go test -run TestLargeMeshesDump ./internal/planner/
func TestLargeMeshesDump(t *testing.T) {
	out := os.Getenv("SHARDPLAN_LARGEMESH_OUT")
	if out == "" {
		t.Skip("set SHARDPLAN_LARGEMESH_OUT to write the large-mesh set's plans")
	}
	w, err := os.Create(out)
	require.NoError(t, err)
	defer w.Close()
	for pi, name := range []string{"tpu-v5p", "h100"} {
		f, _ := cost.Profile(name)
		eachLargeMeshReshard(t, func(i int, r *Request) {
			r.Model = f
			p, err := Reshard(context.Background(), r)
			require.NoError(t, err)
			exact := p.search.exact
			_, err = fmt.Fprintf(w, "%d %.6f %d %v\n", pi*1000+i, p.Summary.TimeUS, p.Summary.SearchExpansions, exact)
			require.NoError(t, err)
		})
	}
}

// BenchmarkLargeMeshes plans 150 seeded random reshards on meshes of 4,096 to 65,536
// devices (up to four axes of 1-16 devices, so newSpace's atoms are often whole axes)
// per profile, and reports the latency quantiles, the plans that go through a full
// rematerialization while neither end is replicated (fullremat), and how many of those
// had no all_to_all_v candidate to weigh (it was left out: too many transfers to route).
func BenchmarkLargeMeshes(b *testing.B) {
	for _, name := range []string{"tpu-v5p", "h100"} {
		f, _ := cost.Profile(name)
		b.Run(name, func(b *testing.B) {
			var lat, eff []float64
			remat, without := 0, 0
			memos := newTestMemos(b)
			for b.Loop() {
				lat, eff, remat, without = lat[:0], eff[:0], 0, 0
				eachLargeMeshReshard(b, func(_ int, r *Request) {
					r.Model, r.Memos = f, memos
					t0 := time.Now()
					p, err := Reshard(context.Background(), r)
					lat = append(lat, float64(time.Since(t0).Microseconds()))
					if err == nil {
						eff = append(eff, p.Summary.TimeEfficiency)
					}
					if err != nil || !p.Summary.FullRematerialization {
						return
					}
					remat++
					if !slices.ContainsFunc(p.Summary.Candidates, func(c Candidate) bool { return c.Name == string(OpAllToAllV) }) {
						without++
					}
				})
			}
			slices.Sort(lat)
			pct := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
			b.ReportMetric(float64(len(lat)), "reshards")
			b.ReportMetric(pct(0.5), "p50-µs")
			b.ReportMetric(pct(0.9), "p90-µs")
			b.ReportMetric(lat[len(lat)-1], "max-µs")
			slices.Sort(eff)
			b.ReportMetric(eff[len(eff)/2], "eff-p50")
			b.ReportMetric(eff[len(eff)/10], "eff-p10")
			b.ReportMetric(float64(remat), "fullremat")
			b.ReportMetric(float64(without), "fullremat-without-a2av")
		})
	}
}

// eachLargeMeshReshard calls fn with the large-mesh set's reshards (150 seeded random
// ones on 4,096 to 65,536 devices, less those with a replicated end), numbered by their
// place among the 150, as requests without a model.
func eachLargeMeshReshard(tb testing.TB, fn func(i int, r *Request)) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 150 {
		m, shape, src, tgt := randomReshard(tb, rng, 4096, 65536, []int64{1, 16, 64, 1024})
		if src.IsFullyReplicated() || tgt.IsFullyReplicated() {
			continue
		}
		fn(i, &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: src, Target: tgt})
	}
}
