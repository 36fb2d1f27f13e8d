package hlo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/fielderr"
)

func v5pSchedule(t *testing.T, src, mesh string, measured map[string]float64) (*Analysis, *Schedule) {
	t.Helper()
	a := analyzeText(t, src, mesh)
	r, ok := cost.RooflineOf("tpu-v5p")
	require.True(t, ok)
	s, err := a.Schedule(context.Background(), ScheduleOptions{Roofline: &r, Measured: measured})
	require.NoError(t, err)
	return a, s
}

// overlapModule (testdata/schedule_overlap.hlo): two async all-gathers; a 1024^3 bf16 dot runs while the first is in
// flight, nothing while the second is. On tpu-v5p (459 TFLOP/s bf16, 2765 GB/s HBM):
// the dot is 2*1024^3 FLOPs = 4.678 us (its 6 MiB of operands and result take 2.275
// us at the HBM bandwidth); the negates read and write 8 MiB each: 3.034 us.
var overlapModule = func() string {
	b, err := os.ReadFile(filepath.Join("testdata", "schedule_overlap.hlo"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// TestScheduleHandChecked: the exposed and overlapped times of overlapModule, figured
// by hand from the roofline above and the model's prices.
func TestScheduleHandChecked(t *testing.T) {
	a, s := v5pSchedule(t, overlapModule, "", nil)
	big, small := collectiveNamed(t, a, "big"), collectiveNamed(t, a, "small")
	dot := 2.0 * 1024 * 1024 * 1024 / 459e6
	neg := 2.0 * 2048 * 1024 * 2 / 2765e3
	require.Greater(t, big.Cost.TimeUS, dot, "the test wants the big gather longer than the dot")
	eb, es := s.Sites[0], s.Sites[1]
	assert.InDelta(t, dot, eb.OverlappedUS, 1e-9, "the dot hides its length of the big gather")
	assert.InDelta(t, big.Cost.TimeUS-dot, eb.ExposedUS, 1e-9)
	assert.InDelta(t, small.Cost.TimeUS, es.ExposedUS, 1e-9, "nothing runs behind the small gather")
	assert.Zero(t, es.OverlappedUS)
	assert.InDelta(t, dot+2*neg, s.ComputeUS, 1e-9)
	assert.InDelta(t, s.ComputeUS+s.ExposedUS, s.StepUS, 1e-9)
	assert.InDelta(t, big.Cost.TimeUS+small.Cost.TimeUS, s.ExposedUS+s.OverlappedUS, 1e-9)

	// The synchronous forms wait on everything.
	syncSrc := overlapModule
	for _, r := range [][2]string{
		{"big = (bf16[1024,1024]{1,0}, bf16[2048,1024]{1,0}) all-gather-start(p)", "big = bf16[2048,1024]{1,0} all-gather(p)"},
		{"bigd = bf16[2048,1024]{1,0} all-gather-done(big)", "bigd = bf16[2048,1024]{1,0} bitcast(big)"},
		{"small = (bf16[256,1024]{1,0}, bf16[512,1024]{1,0}) all-gather-start(q)", "small = bf16[512,1024]{1,0} all-gather(q)"},
		{"smalld = bf16[512,1024]{1,0} all-gather-done(small)", "smalld = bf16[512,1024]{1,0} bitcast(small)"},
	} {
		require.Contains(t, syncSrc, r[0])
		syncSrc = strings.Replace(syncSrc, r[0], r[1], 1)
	}
	_, ss := v5pSchedule(t, syncSrc, "", nil)
	assert.InDelta(t, big.Cost.TimeUS, ss.Sites[0].ExposedUS, 1e-9)
	assert.Zero(t, ss.Sites[0].OverlappedUS)
	assert.InDelta(t, s.ComputeUS, ss.ComputeUS, 1e-9, "the same compute")
	assert.Greater(t, ss.StepUS, s.StepUS, "the async schedule hides part of the gather")
}

// TestScheduleRankingDiffers: with the dot lengthened to hide the big gather whole,
// the small gather is the one the step waits on: the ranking by exposed time is not
// the ranking by price.
func TestScheduleRankingDiffers(t *testing.T) {
	src := strings.ReplaceAll(overlapModule, "w = bf16[1024,1024]{1,0} parameter(1)", "w = bf16[1024,16384]{1,0} parameter(1)")
	src = strings.Replace(src, "d = bf16[1024,1024]{1,0} dot(p, w)", "d = bf16[1024,16384]{1,0} dot(p, w)", 1)
	a, s := v5pSchedule(t, src, "", nil)
	big, small := collectiveNamed(t, a, "big"), collectiveNamed(t, a, "small")
	assert.Greater(t, big.Cost.TimeUS, small.Cost.TimeUS, "by price the big gather ranks first")
	assert.Zero(t, s.Sites[0].ExposedUS, "a 16x longer dot hides it")
	assert.InDelta(t, big.Cost.TimeUS, s.Sites[0].OverlappedUS, 1e-9)
	assert.Greater(t, s.Sites[1].ExposedUS, s.Sites[0].ExposedUS, "by exposed time the small one does")
}

// TestScheduleLoops: the windowed einsum of XLA's tests runs its body twice: each
// synchronous collective-permute is exposed twice, and so is the body's compute.
func TestScheduleLoops(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "corpus", "xla", "windowed_einsum_ag_loops_stream_ids.hlo"))
	require.NoError(t, err)
	a, s := v5pSchedule(t, string(src), "", nil)
	cp := collectiveNamed(t, a, "collective-permute.send_first_lhs_shard")
	require.Equal(t, int64(2), cp.TripCount)
	assert.InDelta(t, 2*cp.Cost.TimeUS, s.Sites[0].ExposedUS, 1e-9)
	// each trip: two bf16 [512,24576]x[24576,24576] dots, 2*512*24576*24576 FLOPs each
	dots := 2 * 2 * (2.0 * 512 * 24576 * 24576 / 459e6)
	assert.Greater(t, s.ComputeUS, dots)
	assert.Less(t, s.ComputeUS, dots*1.2, "the dots are most of the loop's compute")
	assert.InDelta(t, s.ComputeUS+s.ExposedUS, s.StepUS, 1e-6)
}

// TestScheduleLHSModule: XLA's latency-hiding-scheduler test module AllGatherAsyncSimple
// as printed (the done right after its start): the gather is exposed whole.
func TestScheduleLHSModule(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "corpus", "xla", "lhs_all_gather_async_simple.hlo"))
	require.NoError(t, err)
	a, s := v5pSchedule(t, string(src), "", nil)
	ag := collectiveNamed(t, a, "ag-start")
	assert.InDelta(t, ag.Cost.TimeUS, s.Sites[0].ExposedUS, 1e-9)
	assert.Positive(t, s.ComputeUS, "two convolutions and an add")
	// Moving the convolutions between its start and done (the order the scheduler
	// aims for) hides it behind them.
	lines := strings.Split(string(src), "\n")
	var head, done, convs, rest []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.Contains(l, "%ag-done = "):
			done = append(done, lines[i:i+3]...)
			i += 2
		case strings.HasPrefix(strings.TrimSpace(l), "c0 =") || strings.HasPrefix(strings.TrimSpace(l), "c1 ="):
			convs = append(convs, lines[i:i+2]...)
			i++
		case len(done) == 0:
			head = append(head, l)
		default:
			rest = append(rest, l)
		}
	}
	params := rest[:4]
	moved := strings.Join(append(append(append(append(head, params...), convs...), done...), rest[4:]...), "\n")
	_, s2 := v5pSchedule(t, moved, "", nil)
	assert.Less(t, s2.Sites[0].ExposedUS, s.Sites[0].ExposedUS)
	assert.Positive(t, s2.Sites[0].OverlappedUS)
	assert.InDelta(t, s.ComputeUS, s2.ComputeUS, 1e-9, "the same compute")
}

// TestScheduleMeasured: a profile's costs replace the model's prices of the
// instructions it names, and what it names that the module lacks is reported.
func TestScheduleMeasured(t *testing.T) {
	a, s := v5pSchedule(t, overlapModule, "", map[string]float64{"big": 100, "d": 30, "nowhere": 1})
	_ = a
	assert.True(t, s.Sites[0].Measured)
	assert.InDelta(t, 100, s.Sites[0].MeasuredUS, 1e-12)
	assert.InDelta(t, 30, s.Sites[0].OverlappedUS, 1e-9, "the measured dot hides 30 us of it")
	assert.InDelta(t, 70, s.Sites[0].ExposedUS, 1e-9)
	assert.False(t, s.Sites[1].Measured)
	assert.Equal(t, 2, s.MeasuredInstructions)
	assert.Equal(t, []string{"nowhere"}, s.UnmatchedProfile)
	// a profile naming the -done prices the pair too
	_, s = v5pSchedule(t, overlapModule, "", map[string]float64{"bigd": 50})
	assert.InDelta(t, 50, s.Sites[0].MeasuredUS, 1e-12)
}

// TestParseProfile: the sample profile of JAX-Toolbox's PGLE guide reads entry by
// entry; other entries and fields are skipped; bad text names its line.
func TestParseProfile(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "profiles", "pgle_sample.pbtxt"))
	require.NoError(t, err)
	p, err := ParseProfile(string(src))
	require.NoError(t, err)
	assert.Len(t, p, 12)
	assert.InDelta(t, 7040.5215, p["all-gather-start.1"], 1e-9)
	assert.InDelta(t, 12205.4735, p["reduce-scatter.295"], 1e-9)

	p, err = ParseProfile("latencies { source: \"a\" target: \"b\" latency_us: 3 }\ncosts {\n  name: 'x.1'\n  cost_us: 2e1\n  extra { k: 1 }\n}\nversion: 2\n")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"x.1": 20}, p)

	for _, tc := range []struct{ text, want string }{
		{"costs { name: \"a\" cost_us: -1 }", "line 1, column 28: cost_us must be a non-negative number"},
		{"costs { name: \"a\" }", "line 1, column 1: a costs entry needs both"},
		{"costs { name: \"a\" cost_us: 1 ", "is not closed"},
		{"costs { name: \"a\n\" cost_us: 1 }", "unterminated string"},
		{"\n\n  } ", "line 3, column 3: expected an entry"},
		{"costs name", "expected '{' after costs"},
	} {
		_, err := ParseProfile(tc.text)
		require.Error(t, err, tc.text)
		var fe *fielderr.FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, ProfileField, fe.Field)
		assert.Contains(t, err.Error(), tc.want, tc.text)
	}
}
