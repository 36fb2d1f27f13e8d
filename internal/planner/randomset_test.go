package planner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/testgen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomSetMesh is the random set's 256-device mesh (testgen.RandomSetMesh).
const randomSetMesh = testgen.RandomSetMesh

// randomSet is testgen.RandomSet's 250 reshards (testgen.RandomSet: seeded, the same set
// on every run).
func randomSet(t testing.TB) []problem {
	m := mustMesh(t, randomSetMesh)
	var out []problem
	for _, rs := range testgen.RandomSet(m) {
		out = append(out, problem{m, rs.Shape, rs.Source, rs.Target})
	}
	return out
}

// BenchmarkRandomSet plans the 250 reshards once per iteration on tpu-v5p and reports
// the per-request latency percentiles (µs), the expansion percentiles (which do not
// depend on the machine's load) and how many searches stopped at their expansion budget
// (the plan is then the best found so far, not a proven optimum).
// SHARDPLAN_RANDOMSET_EFFORT=fast plans them with EffortFast.
//
//	go test -run '^$' -bench BenchmarkRandomSet -benchtime 3x ./internal/planner/
func BenchmarkRandomSet(b *testing.B) {
	f, _ := cost.Profile("tpu-v5p")
	effort := Effort(os.Getenv("SHARDPLAN_RANDOMSET_EFFORT"))
	set := randomSet(b)
	if n := benchSetSize; n > 0 {
		set = set[:n]
	}
	memos := newTestMemos(b) // one server's, warm after the first iteration
	var lat, exps []float64
	capped, complete, byRank := 0, 0, map[int][]float64{}
	for b.Loop() {
		lat, exps, capped, complete, byRank = lat[:0], exps[:0], 0, 0, map[int][]float64{}
		for _, pb := range set {
			r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f, Effort: effort, Memos: memos}
			t0 := time.Now()
			p, err := Reshard(context.Background(), r)
			us := float64(time.Since(t0).Microseconds())
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, us)
			exps = append(exps, float64(p.Summary.SearchExpansions))
			byRank[len(pb.shape)] = append(byRank[len(pb.shape)], us)
			if p.search.ran && !p.search.exact {
				capped++ // the exact pass stopped at its budget
			}
			if p.kind == kindComplete {
				complete++ // the complete pass beat every candidate
			}
		}
	}
	slices.Sort(lat)
	pct := func(xs []float64, q float64) float64 { return xs[min(len(xs)-1, int(q*float64(len(xs))))] }
	b.ReportMetric(pct(lat, 0.5), "p50-µs")
	b.ReportMetric(pct(lat, 0.9), "p90-µs")
	b.ReportMetric(pct(lat, 0.99), "p99-µs")
	b.ReportMetric(float64(capped), "capped")
	b.ReportMetric(float64(complete), "complete")
	slices.Sort(exps)
	b.ReportMetric(pct(exps, 0.5), "p50-expansions")
	b.ReportMetric(pct(exps, 0.99), "p99-expansions")
	for rank := 2; rank <= 4; rank++ {
		xs := byRank[rank]
		slices.Sort(xs)
		b.ReportMetric(pct(xs, 0.5), fmt.Sprintf("rank%d-p50-µs", rank))
	}
}

// BenchmarkRandomSetCase plans one reshard of the random set, the one
// SHARDPLAN_RANDOMSET_CASE numbers (skipped without it): run for run, one case's time
// shows what a change does to it without the set's spread (profile it with -cpuprofile).
//
//	SHARDPLAN_RANDOMSET_CASE=160 go test -run '^$' -bench BenchmarkRandomSetCase -benchtime 30x ./internal/planner/
func BenchmarkRandomSetCase(b *testing.B) {
	i, err := strconv.Atoi(os.Getenv("SHARDPLAN_RANDOMSET_CASE"))
	if err != nil {
		b.Skip("set SHARDPLAN_RANDOMSET_CASE to a case number of the random set (0-249)")
	}
	set := randomSet(b)
	if i < 0 || i >= len(set) {
		b.Fatalf("SHARDPLAN_RANDOMSET_CASE=%d: the random set has cases 0-%d", i, len(set)-1)
	}
	f, _ := cost.Profile("tpu-v5p")
	pb := set[i]
	memos := newTestMemos(b)
	for b.Loop() {
		r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f, Memos: memos}
		if _, err := Reshard(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
}

// benchSetSize, when positive, plans only the first problems of the set (profiling).
var benchSetSize = 0

// TestRandomSetDump writes, for every reshard of the random set, its plan's time, the
// search's expansions and whether the exact pass finished, one line each, to the file
// SHARDPLAN_RANDOMSET_OUT names (skipped without it): two commits' files compared with
// scripts/compare_plans.py show what a search change does to plan quality.
//
//	SHARDPLAN_RANDOMSET_OUT=/tmp/after.txt go test -run TestRandomSetDump ./internal/planner/
//
// SHARDPLAN_RANDOMSET_BODIES names a file for the same reshards as POST /v1/reshard
// bodies, one per line (scripts/load/replay posts them to a running server).
// SHARDPLAN_RANDOMSET_REFERENCE=1 plans them as the reference that plan quality is
// measured against: every move in the exact pass and a budget of 20,000 expansions
// (about 20 s for the set). SHARDPLAN_RANDOMSET_PROFILE names another cost profile than
// tpu-v5p (h100), SHARDPLAN_RANDOMSET_EFFORT another effort (fast).
func TestRandomSetDump(t *testing.T) {
	if bodies := os.Getenv("SHARDPLAN_RANDOMSET_BODIES"); bodies != "" {
		writeRandomSetBodies(t, bodies)
	}
	out := os.Getenv("SHARDPLAN_RANDOMSET_OUT")
	if out == "" {
		t.Skip("set SHARDPLAN_RANDOMSET_OUT to write the random set's plans")
	}
	profile := cmp.Or(os.Getenv("SHARDPLAN_RANDOMSET_PROFILE"), "tpu-v5p")
	f, ok := cost.Profile(profile)
	require.True(t, ok, "SHARDPLAN_RANDOMSET_PROFILE=%s is no built-in profile", profile)
	w, err := os.Create(out)
	require.NoError(t, err)
	defer w.Close()
	reference := os.Getenv("SHARDPLAN_RANDOMSET_REFERENCE") == "1"
	for i, pb := range randomSet(t) {
		r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f,
			Effort: Effort(os.Getenv("SHARDPLAN_RANDOMSET_EFFORT"))}
		if reference {
			r.MaxExpansions, r.allMoves = 20000, true
		}
		p, err := Reshard(context.Background(), r)
		require.NoError(t, err)
		exact := p.search.exact
		_, err = fmt.Fprintf(w, "%d %.6f %d %v\n", i, p.Summary.TimeUS, p.Summary.SearchExpansions, exact)
		require.NoError(t, err)
	}
}

// writeRandomSetBodies writes the random set as POST /v1/reshard bodies (JSON lines).
func writeRandomSetBodies(t *testing.T, path string) {
	w, err := os.Create(path)
	require.NoError(t, err)
	defer w.Close()
	for _, body := range testgen.RandomSetBodies(mustMesh(t, randomSetMesh)) {
		_, err = fmt.Fprintf(w, "%s\n", body)
		require.NoError(t, err)
	}
}

// BenchmarkRandomSetMiddle plans the middle 40% of the random set (by each case's best
// of three times, chosen before the timer starts) and reports their mean (µs): the
// median request's own cost without the set's spread. SHARDPLAN_IDLE_GAP (a duration)
// sleeps before each request, as a server idles between a client's requests: a core
// waking from idle takes hundreds of µs to run a new goroutine.
//
//	SHARDPLAN_IDLE_GAP=300us go test -run '^$' -bench BenchmarkRandomSetMiddle -benchtime 5x ./internal/planner/
func BenchmarkRandomSetMiddle(b *testing.B) {
	gap, _ := time.ParseDuration(os.Getenv("SHARDPLAN_IDLE_GAP"))
	f, _ := cost.Profile("tpu-v5p")
	set := randomSet(b)
	memos := newTestMemos(b)
	plan := func(pb problem) time.Duration {
		r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f, Memos: memos}
		t0 := time.Now()
		if _, err := Reshard(context.Background(), r); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	type timed struct {
		pb   problem
		best time.Duration
	}
	cases := make([]timed, len(set))
	for i, pb := range set {
		cases[i] = timed{pb, min(plan(pb), plan(pb), plan(pb))}
	}
	slices.SortFunc(cases, func(x, y timed) int { return cmp.Compare(x.best, y.best) })
	mid := cases[len(cases)*3/10 : len(cases)*7/10]
	var total time.Duration
	n := 0
	b.ResetTimer()
	for b.Loop() {
		for _, c := range mid {
			if gap > 0 {
				time.Sleep(gap)
			}
			total += plan(c.pb)
			n++
		}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n), "mean-µs")
}

// TestEffortFast: EffortFast leaves out the anytime pass. Over the first 60 reshards of
// the random set its plans replay to the target, its searches expand far fewer states,
// and some plans differ from the thorough search's (the option reaches the search).
func TestEffortFast(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	f, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	var fastN, thoroughN, differ int
	for i, pb := range randomSet(t)[:60] {
		plan := func(e Effort) *Plan {
			p, err := Reshard(context.Background(), &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f, Effort: e})
			require.NoError(t, err, "case %d %s", i, e)
			return p
		}
		fast, thorough := plan(EffortFast), plan(EffortThorough)
		replay(t, fast)
		fastN += fast.Summary.SearchExpansions
		thoroughN += thorough.Summary.SearchExpansions
		if math.Abs(fast.Summary.TimeUS-thorough.Summary.TimeUS) > 1e-9*thorough.Summary.TimeUS {
			differ++
		}
	}
	assert.Less(t, float64(fastN), 0.8*float64(thoroughN), "expansions: fast %d, thorough %d", fastN, thoroughN)
	assert.Positive(t, differ, "no plan differs")
}
