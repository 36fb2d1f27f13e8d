package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/testgen"
)

// xlaFallbackSet draws seeded random reshards of rank 2-4 on randomSetMesh (each axis,
// or one of the halves of a size-4 axis, on a random dim or replicated; dims 96 to 4096
// and, one in four, an odd size) and keeps the first n on which XLA falls back.
func xlaFallbackSet(t testing.TB, n int) []problem {
	rng := rand.New(rand.NewPCG(2026, 5))
	m := mustMesh(t, randomSetMesh)
	f, _ := cost.Profile("tpu-v5p")
	var out []problem
	for tries := 0; len(out) < n && tries < 100*n; tries++ {
		rank := 2 + rng.IntN(3)
		shape := make([]int64, rank)
		for d := range shape {
			shape[d] = []int64{128, 256, 512, 1024, 2048, 4096, 96, 384}[rng.IntN(8)]
			if rng.IntN(4) == 0 {
				shape[d] += int64(1 + 2*rng.IntN(5))
			}
		}
		src, tgt := testgen.RandomSetSharding(rng, m, rank), testgen.RandomSetSharding(rng, m, rank)
		if src.SameLayout(tgt) {
			continue
		}
		r := &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: src, Target: tgt, Model: f}
		if _, e, err := xlaPlan(r); err == nil && e.fallback {
			out = append(out, problem{m, shape, src, tgt})
		}
	}
	return out
}

// corpusFallbacks is every reshard of testdata/pricing_corpus.json (up to 256 devices)
// on which XLA falls back.
func corpusFallbacks(t testing.TB) []problem {
	raw, err := os.ReadFile("testdata/pricing_corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	f, _ := cost.Profile("tpu-v5p")
	var out []problem
	for _, c := range cases {
		m := mustMesh(t, c.Mesh)
		if m.NumDevices() > 256 {
			continue
		}
		pb := problem{m, c.Shape, mustSharding(t, m, c.Shape, string(c.Source)), mustSharding(t, m, c.Shape, string(c.Target))}
		r := &Request{Mesh: m, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f}
		if _, e, err := xlaPlan(r); err == nil && e.fallback {
			out = append(out, pb)
		}
	}
	return out
}

// BenchmarkXLASuggestions times the suggestion search (suggestXLA, the part of a
// strategy-xla request that runs only after a fallback) on tpu-v5p, per request:
// p50/p90/p99 in µs and how many got suggestions, for the pricing corpus's fallbacks
// and for 200 seeded random fallbacks on randomSetMesh.
//
//	go test -run '^$' -bench BenchmarkXLASuggestions -benchtime 3x ./internal/planner/
func BenchmarkXLASuggestions(b *testing.B) {
	f, _ := cost.Profile("tpu-v5p")
	for _, set := range []struct {
		name string
		pbs  []problem
	}{{"corpus", corpusFallbacks(b)}, {"random", xlaFallbackSet(b, 200)}} {
		b.Run(set.name, func(b *testing.B) {
			var lat []float64
			suggested := 0
			memos := newTestMemos(b)
			for b.Loop() {
				lat, suggested = lat[:0], 0
				for _, pb := range set.pbs {
					r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f, Memos: memos}
					t0 := time.Now()
					sugg, _, _ := suggestXLA(context.Background(), r)
					lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
					if len(sugg) > 0 {
						suggested++
					}
				}
			}
			slices.Sort(lat)
			pct := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
			b.ReportMetric(float64(len(set.pbs)), "fallbacks")
			b.ReportMetric(float64(suggested), "suggested")
			b.ReportMetric(pct(0.5), "p50-µs")
			b.ReportMetric(pct(0.9), "p90-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			b.ReportMetric(lat[len(lat)-1], "max-µs")
		})
	}
}

// TestXLAFallbackSetSuggests: every fallback of the random set gets suggestions or a
// note, and the suggestions' hops pass XLA without the fallback (checkXLA).
func TestXLAFallbackSetSuggests(t *testing.T) {
	n := 60
	switch {
	case raceDetector:
		n = 4 // the set of 20 runs without it (CI's planner step)
	case !*long:
		n = 20
	}
	f, _ := cost.Profile("tpu-v5p")
	set := xlaFallbackSet(t, n)
	suggested := 0
	for i, pb := range set {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f}
			p, info, err := ReshardXLA(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			checkXLA(t, p, info)
			if len(info.Suggested) > 0 {
				suggested++
			} else if info.SuggestionNote == "" {
				t.Errorf("%s %v %s -> %s: no suggestion and no note", pb.mesh, pb.shape, pb.src, pb.tgt)
			}
		})
	}
	t.Logf("%d fallbacks, %d with suggestions", len(set), suggested)
	if len(set) < n {
		t.Errorf("only %d fallbacks drawn, want %d", len(set), n)
	}
}

// TestXLASuggestsThroughRematPlanStates: pricing corpus "d=16,m=16", where the target's
// 128 rows on 256 shards are no slice of the source's and XLA falls back. The plan of
// standard collectives is two all-to-alls through P(None, ('d','m'), None, None) (the
// structured pass finds it; a search that rematerialized suggested the gather of d
// alone, P(None, None, None, 'm')), and that state is the suggestion: XLA's chain
// through it never replicates.
func TestXLASuggestsThroughRematPlanStates(t *testing.T) {
	p, info := xplan(t, "d=16,m=16", []int64{128, 1024, 2048, 128}, 16, `[null,"d",null,"m"]`, `[null,null,null,["d","m"]]`)
	checkXLA(t, p, info)
	require.True(t, info.Fallback)
	assert.Empty(t, info.SuggestionNote)
	require.Len(t, info.Suggested, 1)
	assert.Equal(t, "P(None, ('d','m'), None, None)", info.Suggested[0].PartitionSpec)
	require.NotNil(t, info.Chain)
	assert.False(t, info.Chain.Summary.FullRematerialization)
	assert.Less(t, info.Chain.Summary.TimeUS, p.Summary.TimeUS)
}

// TestXLASuggestionsTakeTheBestChain: the suggestions are the best chain over every
// list of candidate states (betterChain: one P() can name when the ends can, then the
// fastest XLA plan through it); no list's chain beats the one returned, on the corpus's
// fallbacks and a slice of the random ones.
func TestXLASuggestionsTakeTheBestChain(t *testing.T) {
	if raceDetector {
		t.Skip("every list of every case: runs without the race detector (CI's planner step)")
	}
	n := 40
	if !*long {
		n = 12
	}
	f, _ := cost.Profile("tpu-v5p")
	for i, pb := range append(corpusFallbacks(t), xlaFallbackSet(t, n)...) {
		r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f}
		b := boundsOf(r)
		out, chain, _ := suggestXLAWith(context.Background(), r, b)
		tried := 0
		for _, states := range suggestionStates(context.Background(), r, &b) {
			o, c := chainThrough(context.Background(), r, states, b)
			if c == nil {
				continue
			}
			tried++
			require.NotNil(t, chain, "case %d: list gives a chain, the search none", i)
			assert.False(t, betterChain(r, o, c, out, chain), "case %d %s %v %s -> %s: a list's chain (%.4f µs) beats the one returned (%.4f µs)",
				i, pb.mesh, pb.shape, pb.src, pb.tgt, c.Summary.TimeUS, chain.Summary.TimeUS)
		}
		if tried == 0 {
			assert.Nil(t, chain, "case %d: a chain from no list", i)
		}
	}
}

// TestXLASuggestionFromAGreedyListWhenFaster: [a][b] -> [b][a] on a=2,b=3, 6x6 (a
// pricing-corpus case). XLA's plan through {b} on dim 1 is 3.0 µs on tpu-v5p (through
// {b, a} on dim 0, 5.0 µs); the greedy one-collective-per-hop list suggests it, and so
// does the optimal plan's list (gather a, all-to-all b, slice a), which the chain of
// the first list may not beat.
func TestXLASuggestionFromAGreedyListWhenFaster(t *testing.T) {
	m := mustMesh(t, "a=2,b=3")
	shape := []int64{6, 6}
	f, _ := cost.Profile("tpu-v5p")
	r := &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: mustSharding(t, m, shape, `["a","b"]`), Target: mustSharding(t, m, shape, `["b","a"]`), Model: f}
	p, info, err := ReshardXLA(context.Background(), r)
	require.NoError(t, err)
	checkXLA(t, p, info)
	require.True(t, info.Fallback)
	require.Len(t, info.Suggested, 1)
	assert.Equal(t, "P(None, 'b')", info.Suggested[0].PartitionSpec)
	first, firstChain := chainThrough(context.Background(), r, suggestionStates(context.Background(), r, new(boundsOf(r)))[0], boundsOf(r))
	require.NotNil(t, firstChain)
	require.Len(t, first, 1)
	assert.Equal(t, "P(None, 'b')", first[0].PartitionSpec, "the optimal plan's list")
	assert.LessOrEqual(t, info.Chain.Summary.TimeUS, firstChain.Summary.TimeUS*(1+1e-9))
}

// TestXLASuggestionDump writes, for the pricing corpus's fallbacks and 200 random ones,
// one tab-separated line per fallback: its number, the time of XLA's plan through the
// suggestions (0: none), how many there are, their Shardy texts joined by " | ", and
// whether a note stands in. scripts/compare_suggestions.py compares two dumps.
//
//	SHARDPLAN_SUGGEST_OUT=/tmp/after.txt go test -run TestXLASuggestionDump ./internal/planner/
func TestXLASuggestionDump(t *testing.T) {
	out := os.Getenv("SHARDPLAN_SUGGEST_OUT")
	if out == "" {
		t.Skip("set SHARDPLAN_SUGGEST_OUT to write the fallbacks' suggestions")
	}
	f, _ := cost.Profile("tpu-v5p")
	var sb strings.Builder
	for i, pb := range append(corpusFallbacks(t), xlaFallbackSet(t, 200)...) {
		r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f}
		sugg, chain, note := suggestXLA(context.Background(), r)
		texts := make([]string, len(sugg))
		for k, s := range sugg {
			texts[k] = s.Shardy
		}
		tm := 0.0
		if chain != nil {
			tm = chain.Summary.TimeUS
		}
		fmt.Fprintf(&sb, "%d\t%.4f\t%d\t%s\t%v\n", i, tm, len(sugg), strings.Join(texts, " | "), note != "")
	}
	require.NoError(t, os.WriteFile(out, []byte(sb.String()), 0o644))
}

// suggestXLA picks a chain of intermediate shardings whose every hop XLA handles
// without the fallback: per list of candidate states, the shortest, preferring states
// without sub-axes (a PartitionSpec cannot name those). The candidate states come, in order, from the optimal plan of
// standard collectives, from greedy plans that do one collective per hop (the buffer
// limit lifted, so a gather may go through larger tiles than either end, but never
// through full replication), and, when the optimal plan rematerializes, from its
// states short of full replication. Every list's chain is built, and the best one wins
// (betterChain: a chain PartitionSpecs can name, then the fastest XLA plan through it).
// Against taking the first list's chain, on the 216 fallbacks of the pricing corpus
// and the random set: 17 chains 1.2-6.3x faster, one 1.6x slower that P() can name, the
// same ones with suggestions; the other lists' chains cost about 5% of the search. It
// returns the suggestions and XLA's plan through them, or a note saying why there is
// none.
func suggestXLA(ctx context.Context, r *Request) ([]Suggestion, *Plan, string) {
	return suggestXLAWith(ctx, r, boundsOf(r))
}
