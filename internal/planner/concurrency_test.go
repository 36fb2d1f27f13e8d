package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// TestPlansDoNotDependOnTimingOrHistory: a request's plan, expansions and candidates
// are the same whether it is planned first or after others (pooled routers and memos
// are warm), alone or beside other requests on other goroutines (the pools are
// shared), and whatever the timing of its own goroutines (the direct candidates and the
// time bound beside the search, the exact pass beside the anytime pass). Each
// request runs once cold and sequentially, then four times more, shuffled, from four
// goroutines; every answer must equal the first.
func TestPlansDoNotDependOnTimingOrHistory(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	set := randomSet(t)[:underRace(40, 16)]
	f, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	memos := newTestMemos(t)
	fingerprint := func(i int) string {
		pb := set[i]
		r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f, Memos: memos}
		p, err := Reshard(context.Background(), r)
		require.NoError(t, err)
		// The bound the side work computes on its fork of the space is the request's.
		tb, _ := TimeLowerBound(r)
		require.Equal(t, tb, p.Summary.TimeLowerBoundUS, "case %d", i)
		return planFingerprint(p)
	}
	want := make([]string, len(set))
	for i := range set {
		want[i] = fingerprint(i)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[int][]string{}
	for g := range 4 {
		order := rand.New(rand.NewPCG(uint64(g), 9)).Perm(len(set))
		wg.Go(func() {
			for _, i := range order {
				fp := fingerprint(i)
				mu.Lock()
				got[i] = append(got[i], fp)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range set {
		for _, fp := range got[i] {
			assert.Equal(t, want[i], fp, "case %d", i)
		}
	}
}

// planFingerprint is what two plans of one request must agree on: the summary, the
// candidates and the steps.
func planFingerprint(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %.9g %.9g %d %v|", p.Summary.SearchExpansions, p.Summary.TimeUS, p.Summary.TimeLowerBoundUS, p.Summary.Collectives, p.Summary.FullRematerialization)
	for _, c := range p.Summary.Candidates {
		fmt.Fprintf(&b, "%s %.9g %v|", c.Name, c.TimeUS, c.Chosen)
	}
	for _, st := range p.Steps {
		fmt.Fprintf(&b, "%s %v->%v|", st.Op, st.Before, st.After)
	}
	return b.String()
}

// TestGroupBoundsMemoIsExact: groupBounds memoized across requests (by model, mesh and
// atoms) answers what a fresh scan of the groups answers, for models that differ only
// in their figures and for meshes that share axis names, so a key that left one of
// them out would serve another's bounds.
func TestGroupBoundsMemoIsExact(t *testing.T) {
	v5p, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	slow, err := cost.Resolve([]byte(`{"base":"tpu-v5p","links":{"ici":{"bandwidth_gbps":45,"latency_us":3,"topology":"torus","wrap":"cube"}}}`), "cost_model")
	require.NoError(t, err)
	h100, ok := cost.Profile("h100")
	require.True(t, ok)
	type probe struct {
		r  *Request
		sp *space
	}
	var probes []probe
	for _, model := range []cost.Model{v5p, slow, h100} {
		for _, spec := range []struct{ mesh, src, tgt string }{
			{"x=4,y=4", `["x", "y"]`, `["y", null]`},
			{"x=4,y=8", `["x", "y"]`, `["y", null]`},
			{"x=4,y=4,z=4", `["x", "y"]`, `[["z", "y"], "x"]`},
		} {
			m := mustMesh(t, spec.mesh)
			shape := []int64{64, 64}
			r := &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: mustSharding(t, m, shape, spec.src), Target: mustSharding(t, m, shape, spec.tgt), Model: model}
			sp, ok := newSpace(m, shape, 16, r.Source, r.Target)
			require.True(t, ok)
			probes = append(probes, probe{r, sp})
		}
	}
	type bounds struct {
		inj, lat float64
		ok       bool
	}
	fresh := make([]bounds, len(probes))
	for i, p := range probes { // without memos: a scan each
		inj, lat, ok := groupBounds(p.sp, p.r, p.r.Model.(lowerBounder))
		fresh[i] = bounds{inj, lat, ok}
	}
	memos := newTestMemos(t)
	for _, p := range probes {
		p.r.Memos = memos
	}
	for range 2 { // the first round fills the memo, the second reads it
		for i, p := range probes {
			inj, lat, ok := groupBounds(p.sp, p.r, p.r.Model.(lowerBounder))
			assert.Equal(t, fresh[i], bounds{inj, lat, ok}, "probe %d", i)
		}
	}
	assert.NotEqual(t, fresh[0], fresh[3], "the slower model's bounds differ")
	st := memos.Stats()
	assert.Equal(t, len(probes), st.GroupBounds, "one entry per model, mesh and atoms")
	assert.Equal(t, int64(len(probes)), st.GroupMisses)
	assert.Equal(t, int64(len(probes)), st.GroupHits)
}

// TestSideWorkPanicReachesTheCaller: a panic in the work Reshard runs on another
// goroutine is raised on the caller's goroutine, where the server's recovery turns it
// into a 500 for that request (on the worker's own goroutine it would end the
// process), and the next request plans normally. The panic comes from a model that
// fails to price the direct all_to_all_v, which only the side work prices (EffortFast:
// no anytime pass prices hybrids on the request's goroutine before it).
func TestSideWorkPanicReachesTheCaller(t *testing.T) {
	f, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	pb := randomSet(t)[0]
	req := func(m cost.Model) *Request {
		return &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: m, Effort: EffortFast}
	}
	got := func() (rec any) {
		defer func() { rec = recover() }()
		_, _ = Reshard(context.Background(), req(exchangePanics{f}))
		return nil
	}()
	require.NotNil(t, got, "the panic reaches the caller")
	wp, ok := got.(*workerPanic)
	require.True(t, ok, "%T", got)
	assert.Equal(t, "injected", wp.value)
	assert.Contains(t, wp.Error(), "planner goroutine")
	assert.Contains(t, string(wp.stack), "startSideWork", "the side work panicked")
	_, err := Reshard(context.Background(), req(f))
	require.NoError(t, err)
}

// exchangePanics is a model that panics when asked to price an all_to_all_v.
type exchangePanics struct{ cost.Model }

func (m exchangePanics) Estimate(c cost.Collective) cost.Estimate {
	if c.Kind == cost.AllToAllV {
		panic("injected")
	}
	return m.Model.Estimate(c)
}

// TestWorkerRunsOnceWhereverItRuns: a worker's fn runs exactly once, on the goroutine
// started for it or, when that one has not begun, on the goroutine that waits; drop
// gives up an unstarted fn; a panic is raised on the first wait only, wherever it ran.
func TestWorkerRunsOnceWhereverItRuns(t *testing.T) {
	t.Run("unstarted: wait runs it", func(t *testing.T) {
		runs := 0
		w := newWorker(func() { runs++ })
		w.wait()
		w.wait()
		go w.run() // a late goroutine finds it claimed
		w.wait()
		assert.Equal(t, 1, runs)
	})
	t.Run("started: wait waits", func(t *testing.T) {
		var runs atomic.Int32
		begun, release := make(chan struct{}), make(chan struct{})
		w := goWorker(func() {
			runs.Add(1)
			close(begun)
			<-release
		})
		<-begun
		waited := make(chan struct{})
		go func() { w.wait(); close(waited) }()
		select {
		case <-waited:
			t.Fatal("wait returned before fn did")
		case <-time.After(20 * time.Millisecond):
		}
		close(release)
		<-waited
		assert.Equal(t, int32(1), runs.Load())
	})
	t.Run("drop gives up an unstarted fn", func(t *testing.T) {
		runs := 0
		w := newWorker(func() { runs++ })
		w.drop()
		w.run()
		w.wait()
		assert.Zero(t, runs)
	})
	t.Run("a panic inline is raised once", func(t *testing.T) {
		w := newWorker(func() { panic("boom") })
		got := func() (rec any) {
			defer func() { rec = recover() }()
			w.wait()
			return nil
		}()
		wp, ok := got.(*workerPanic)
		require.True(t, ok, "%T", got)
		assert.Equal(t, "boom", wp.value)
		assert.NotPanics(t, w.wait)
	})
}

// TestWorkerThen: work offered to a running worker's goroutine runs there after its fn
// (and before the goroutine leaves); offered after the goroutine has left, it gets a
// goroutine of its own; either way it runs exactly once, and wait runs it itself when
// nothing has begun it.
func TestWorkerThen(t *testing.T) {
	t.Run("runs after fn on the same goroutine", func(t *testing.T) {
		var order []string
		begun, release := make(chan struct{}), make(chan struct{})
		var fnGoroutine, nextGoroutine string
		w := goWorker(func() {
			fnGoroutine = goroutineLabel()
			close(begun)
			<-release
			order = append(order, "fn")
		})
		<-begun
		next := newWorker(func() {
			nextGoroutine = goroutineLabel()
			order = append(order, "next")
		})
		w.then(next)
		close(release)
		w.wait()
		// The goroutine claims next on its own; a wait before that would run it here.
		require.Eventually(t, next.claimed.Load, 5*time.Second, time.Millisecond)
		next.wait()
		assert.Equal(t, []string{"fn", "next"}, order)
		assert.Equal(t, fnGoroutine, nextGoroutine, "next ran on another goroutine")
	})
	t.Run("after the goroutine left: a goroutine of its own", func(t *testing.T) {
		w := goWorker(func() {})
		w.wait()
		require.Eventually(t, func() bool { return w.next.Load() == finished }, time.Second, time.Millisecond)
		var runs atomic.Int32
		ran := make(chan struct{})
		next := newWorker(func() { runs.Add(1); close(ran) })
		w.then(next)
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("next never ran")
		}
		next.wait()
		assert.Equal(t, int32(1), runs.Load())
	})
	t.Run("wait runs it before the goroutine gets to it", func(t *testing.T) {
		begun, release := make(chan struct{}), make(chan struct{})
		w := goWorker(func() { close(begun); <-release })
		<-begun
		var runs atomic.Int32
		next := newWorker(func() { runs.Add(1) })
		w.then(next)
		next.wait() // w's fn is still blocked: the waiter runs next itself
		assert.Equal(t, int32(1), runs.Load())
		close(release)
		w.wait()
		next.wait()
		assert.Equal(t, int32(1), runs.Load())
	})
}

// goroutineLabel is the calling goroutine's number, from its stack header.
func goroutineLabel() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}
