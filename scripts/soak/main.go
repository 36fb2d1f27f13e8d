// Command soak runs the real shardplan server under bounded mixed load while a private
// redis-server behind it is stalled (SIGSTOP/SIGCONT) and killed and restarted empty,
// and checks every answer against a fault-free run of the same requests.
//
//	go run ./scripts/soak                      # 60 s, 8 clients
//	go run ./scripts/soak -duration 20s -clients 4
//	go run ./scripts/soak -duration 10s -hogs 8   # then slot-hogging requests
//	go run ./scripts/soak -duration 30s -hog-mix 2 -request-timeout 2s
//	                                           # prime-axis hogs mixed into the load
//
// It builds ./cmd/shardplan-server, starts a private redis-server on a free 127.0.0.1 port (no
// persistence, its own temp dir) and two servers on 127.0.0.1:0: a reference one without
// Redis, asked each distinct request once (the fault-free answers), and the one under
// test, pointed at the private Redis. Then clients post the requests (examples/ files and
// generated reshards, cached and uncached), fetch permalinks of plans they have seen and
// probe /healthz, while the fault schedule runs. Everything listens on loopback only,
// every loop ends with the run's deadline, and every process started is stopped.
//
// It prints requests, answers by status, unexpected answers (transport errors, a 5xx
// other than a permalink's 503 store-unavailable while Redis is stalled or down, any
// status the fault-free run did not give), wrong answers (a 200 whose bytes differ from
// the fault-free run's), p50/p99 latency and the server's peak RSS (VmHWM), and exits 1
// when there is any unexpected or wrong answer. With -hog-mix N, N more clients send
// prime-axis reshards (hogs) back to back during the soak, the server under test runs
// with -request-timeout, and the run reports /healthz's latencies and the 503s of small
// requests; a 503 (timed out or overloaded behind the hogs) is then expected of any
// request, and counted.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	duration := flag.Duration("duration", 60*time.Second, "how long the load and fault schedule run")
	clients := flag.Int("clients", 8, "concurrent clients")
	seed := flag.Uint64("seed", 1, "seed of the request mix")
	near := flag.Int64("near-bytes", 256<<10, "SHARDPLAN_CACHE_MAX_BYTES of the server under test: a small near cache sends most hits to Redis")
	overload := flag.Int("overload", 0, "after the soak, send this many concurrent uncached 256-device plans (each ~0.1 s of CPU) and measure /healthz and a cached hit meanwhile (0: skip)")
	hogCount := flag.Int("hogs", 0, "after the soak, send this many slot-hogging requests at once (testdata/hostile's: a 65,536-device axis, a concatenate of 20,000, 40 tensors of 100,000 axes, a mesh nested 9,000 deep) and check that /healthz (p99 under 50 ms), a cached hit and small uncached plans keep answering meanwhile (0: skip)")
	hogMixN := flag.Int("hog-mix", 0, "during the soak, this many more clients send prime-axis reshards (each uncached) back to back; /healthz p99 and the 503s of small requests are reported (0: off)")
	timeout := flag.Duration("request-timeout", 0, "SHARDPLAN_REQUEST_TIMEOUT of the server under test (0: its default)")
	flag.Parse()
	if err := soak(*duration, *clients, *seed, *near, *overload, *hogCount, *hogMixN, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// request is one distinct request of the mix and what the fault-free server answered.
type request struct {
	name, method, path string
	body               []byte
	status             int
	want               []byte // the fault-free 200 body
	planID             string
}

func soak(duration time.Duration, clients int, seed uint64, nearBytes int64, overload, hogCount, hogMixN int, timeout time.Duration) error {
	if duration <= 0 || duration > 10*time.Minute || clients < 1 || clients > 256 || overload < 0 || overload > 2000 || hogCount < 0 || hogCount > 64 || hogMixN < 0 || hogMixN > 64 || timeout < 0 {
		return errors.New("want 0 < -duration <= 10m, 1 <= -clients <= 256, 0 <= -overload <= 2000, 0 <= -hogs <= 64, 0 <= -hog-mix <= 64 and -request-timeout >= 0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+2*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "shardplan-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	bin := filepath.Join(tmp, "shardplan")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/shardplan-server").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/shardplan-server (run from the repository root): %v\n%s", err, out)
	}
	reqs, err := requests()
	if err != nil {
		return err
	}

	// The fault-free answers.
	ref, err := startServer(ctx, bin, tmp, "ref", nil)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if r.method != http.MethodPost {
			continue
		}
		status, body, err := do(ctx, ref.base, r.method, r.path, r.body)
		if err != nil {
			ref.stop()
			return fmt.Errorf("fault-free %s: %w", r.name, err)
		}
		r.status, r.want = status, body
		if status == http.StatusOK && r.path == "/v1/reshard" {
			var p struct {
				PlanID string `json:"plan_id"`
			}
			_ = json.Unmarshal(body, &p)
			r.planID = p.PlanID
		}
	}
	ref.stop()

	rs, err := startRedis(ctx, tmp)
	if err != nil {
		return err
	}
	defer rs.stop()
	env := []string{"REDIS_URL=redis://" + rs.addr, "SHARDPLAN_CACHE_MAX_BYTES=" + strconv.FormatInt(nearBytes, 10)}
	if timeout > 0 {
		env = append(env, "SHARDPLAN_REQUEST_TIMEOUT="+timeout.String())
	}
	srv, err := startServer(ctx, bin, tmp, "soak", env)
	if err != nil {
		return err
	}
	defer srv.stop()

	var st stats
	var seen sync.Map // plan ids the server under test has answered: permalink candidates
	runCtx, stopRun := context.WithTimeout(ctx, duration)
	defer stopRun()
	var wg sync.WaitGroup
	var mix *hogMix
	if hogMixN > 0 {
		mix = runHogMix(runCtx, srv.base, hogMixN)
	}
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for runCtx.Err() == nil {
				o := oneRequest(runCtx, rng, srv.base, reqs, &seen)
				if mix != nil && o.status == http.StatusServiceUnavailable {
					o.unexpected, o.refused = "", true // behind the hogs: expected, counted
				}
				st.record(o)
			}
		})
	}
	faults := runFaults(runCtx, rs, duration)
	wg.Wait()

	rss := peakRSS(srv.cmd.Process.Pid)
	st.print(os.Stdout, duration, clients, faults, rss)
	bad := st.wrong.Load() + st.unexpected.Load()
	if mix != nil {
		fmt.Printf("  load's 503s behind the hogs: %d\n", st.refused.Load())
		bad += mix.print(hogMixN)
	}
	if overload > 0 {
		bad += overloadRun(ctx, srv, reqs, overload)
	}
	if hogCount > 0 {
		bad += hogRun(ctx, srv, reqs, hogCount)
	}
	if bad > 0 {
		return fmt.Errorf("%d wrong or unexpected answers", bad)
	}
	return nil
}

// overloadRun sends n concurrent uncached plans for a 256-device mesh while probing
// /healthz and a cached hit every 50 ms: only SHARDPLAN_MAX_COMPUTE of them compute at
// once, so the probes stay fast and every answer is out by the request deadline. It
// prints the heavy answers by status, their slowest, and the probes' latencies; it
// returns how many answers were unexpected (a probe that is not 200 with the right bytes, a heavy
// answer other than 200 or 503).
func overloadRun(ctx context.Context, srv *server, reqs []*request, n int) int64 {
	var hit *request
	for _, r := range reqs {
		if r.status == http.StatusOK && r.path == "/v1/reshard" {
			hit = r
			break
		}
	}
	var bad atomic.Int64
	statuses := map[int]int{}
	var mu sync.Mutex
	var slowest time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"mesh":"C=1,D=2,Y=8,X=4,T=4","shape":[%d,2048],"dtype":"f32","source":[null,["X","T"]],"target":[["D","Y","X","T"],null]}`, 4096+16*i)
			t0 := time.Now()
			status, _, err := do(ctx, srv.base, http.MethodPost, "/v1/reshard", []byte(body))
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				status = -1
			}
			statuses[status]++
			slowest = max(slowest, d)
			if status != http.StatusOK && status != http.StatusServiceUnavailable {
				bad.Add(1)
			}
		})
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	var health, hits []time.Duration
	probes := make(chan struct{})
	go func() {
		defer close(probes)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-probeCtx.Done():
				return
			case <-tick.C:
			}
			t0 := time.Now()
			status, _, err := do(probeCtx, srv.base, http.MethodGet, "/healthz", nil)
			if probeCtx.Err() != nil {
				return
			}
			health = append(health, time.Since(t0))
			if err != nil || status != http.StatusOK {
				bad.Add(1)
			}
			t0 = time.Now()
			status, got, err := do(probeCtx, srv.base, hit.method, hit.path, hit.body)
			if probeCtx.Err() != nil {
				return
			}
			hits = append(hits, time.Since(t0))
			if err != nil || status != http.StatusOK || !bytes.Equal(got, hit.want) {
				bad.Add(1)
			}
		}
	}()
	wg.Wait()
	took := time.Since(start)
	stopProbes()
	<-probes
	worst := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "none"
		}
		slices.Sort(ds)
		return fmt.Sprintf("p50 %s  p99 %s  max %s (%d probes)", ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)], ds[len(ds)-1], len(ds))
	}
	codes := slices.Sorted(maps.Keys(statuses))
	fmt.Printf("overload: %d concurrent uncached 256-device plans, all answered in %s (slowest %s)\n", n, took.Round(time.Millisecond), slowest.Round(time.Millisecond))
	for _, c := range codes {
		fmt.Printf("  status %d: %d\n", c, statuses[c])
	}
	fmt.Printf("  /healthz     %s\n", worst(health))
	fmt.Printf("  cached hit   %s\n", worst(hits))
	fmt.Printf("  unexpected   %d\n", bad.Load())
	return bad.Load()
}

// requests is the mix: every JSON request in examples/, generated reshards (new shapes:
// misses at first, hits after) and requests built to amplify.
func requests() ([]*request, error) {
	files, err := filepath.Glob("examples/*.json")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no examples/*.json (run from the repository root): %v", err)
	}
	var out []*request
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(f)
		path := "/v1/reshard"
		switch {
		case strings.HasPrefix(name, "tiles-"):
			path = "/v1/tiles"
		case strings.HasPrefix(name, "graph-"):
			path = "/v1/graph"
		}
		out = append(out, &request{name: name, method: http.MethodPost, path: path, body: b})
	}
	targets := []string{`[["y"],["x"]]`, `[null,["x","y"]]`, `[["x","y"],null]`, `[["y"],null]`}
	for i := 1; i <= 32; i++ {
		for j, tgt := range targets {
			body := fmt.Sprintf(`{"mesh":"x=2,y=4","shape":[%d,256],"dtype":"bf16","source":[["x"],["y"]],"target":%s}`, 64*i, tgt)
			out = append(out, &request{name: fmt.Sprintf("gen-%d-%d", i, j), method: http.MethodPost, path: "/v1/reshard", body: []byte(body)})
		}
	}
	// Requests built to amplify: refused (422, 400) before any work.
	for _, n := range []int{32, 64} {
		body := fmt.Sprintf(`{"mesh":"a=%d,b=%d","shape":[1024,1024],"dtype":"f32","source":[["a","b"],null],"target":[null,["a","b"]],"include":["transfers"]}`, n, n)
		out = append(out, &request{name: fmt.Sprintf("amplifying-%d", n), method: http.MethodPost, path: "/v1/reshard", body: []byte(body)})
	}
	deep := `{"mesh":"x=2","tensors":{"t":{"shape":[4]}},"ops":[` +
		strings.Repeat(`{"op":"while","operands":[],"results":[],"cond":{"params":[],"ops":[],"returns":[]},"body":{"params":[],"returns":[],"ops":[`, 2490) +
		strings.Repeat(`]}}`, 2490) + `]}`
	out = append(out, &request{name: "while-2490-deep", method: http.MethodPost, path: "/v1/graph", body: []byte(deep)})
	return out, nil
}

// outcome is one answer, classified.
type outcome struct {
	status     int
	latency    time.Duration
	unexpected string // why, or ""
	wrong      bool
	refused    bool // a 503 expected behind hogs
}

// oneRequest sends a random request of the mix (80% posts, 15% permalinks, 5% /healthz)
// and classifies the answer.
func oneRequest(ctx context.Context, rng *rand.Rand, base string, reqs []*request, seen *sync.Map) outcome {
	roll := rng.IntN(100)
	var r *request
	method, path, body := http.MethodGet, "/healthz", []byte(nil)
	switch {
	case roll < 80:
		r = reqs[rng.IntN(len(reqs))]
		method, path, body = r.method, r.path, r.body
	case roll < 95:
		var ids []*request
		seen.Range(func(_, v any) bool { ids = append(ids, v.(*request)); return len(ids) < 64 })
		if len(ids) > 0 {
			r = ids[rng.IntN(len(ids))]
			path = "/v1/plans/" + r.planID
		}
	}
	start := time.Now()
	status, got, err := do(ctx, base, method, path, body)
	o := outcome{status: status, latency: time.Since(start)}
	switch {
	case err != nil && ctx.Err() != nil:
		o.status = -1 // the run ended mid-request: not counted
	case err != nil:
		o.unexpected = "transport: " + err.Error()
	case r == nil: // /healthz
		if status != http.StatusOK {
			o.unexpected = "healthz " + strconv.Itoa(status)
		}
	case method == http.MethodGet: // a permalink
		switch {
		case status == http.StatusOK:
			o.wrong = !bytes.Equal(got, r.want)
		case status == http.StatusNotFound, status == http.StatusServiceUnavailable && bytes.Contains(got, []byte("store-unavailable")):
			// lost with a restart, or Redis stalled: expected
		default:
			o.unexpected = fmt.Sprintf("permalink %d: %.200s", status, got)
		}
	default:
		switch {
		case status != r.status:
			o.unexpected = fmt.Sprintf("%s: %d, fault-free %d: %.200s", r.name, status, r.status, got)
		case status == http.StatusOK:
			o.wrong = !bytes.Equal(got, r.want)
			if r.planID != "" {
				seen.Store(r.planID, r)
			}
		}
	}
	return o
}

func do(ctx context.Context, base, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// ---- statistics ----

type stats struct {
	mu         sync.Mutex
	latencies  []time.Duration
	byStatus   map[int]int
	examples   []string
	wrong      atomic.Int64
	unexpected atomic.Int64
	refused    atomic.Int64
}

func (s *stats) record(o outcome) {
	if o.status == -1 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byStatus == nil {
		s.byStatus = map[int]int{}
	}
	s.byStatus[o.status]++
	s.latencies = append(s.latencies, o.latency)
	if o.wrong {
		s.wrong.Add(1)
	}
	if o.refused {
		s.refused.Add(1)
	}
	if o.unexpected != "" {
		s.unexpected.Add(1)
		if len(s.examples) < 5 {
			s.examples = append(s.examples, o.unexpected)
		}
	}
}

func (s *stats) print(w io.Writer, d time.Duration, clients int, faults []string, rss int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slices.Sort(s.latencies)
	pct := func(p float64) time.Duration {
		if len(s.latencies) == 0 {
			return 0
		}
		return s.latencies[min(len(s.latencies)-1, int(p*float64(len(s.latencies))))]
	}
	codes := make([]int, 0, len(s.byStatus))
	for c := range s.byStatus {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	fmt.Fprintf(w, "soak: %s, %d clients, private redis-server on loopback\n", d, clients)
	for _, f := range faults {
		fmt.Fprintf(w, "  fault  %s\n", f)
	}
	fmt.Fprintf(w, "requests    %d (%.0f/s)\n", len(s.latencies), float64(len(s.latencies))/d.Seconds())
	for _, c := range codes {
		fmt.Fprintf(w, "  status %d: %d\n", c, s.byStatus[c])
	}
	fmt.Fprintf(w, "unexpected  %d\n", s.unexpected.Load())
	for _, e := range s.examples {
		fmt.Fprintf(w, "  e.g. %s\n", e)
	}
	fmt.Fprintf(w, "wrong       %d\n", s.wrong.Load())
	fmt.Fprintf(w, "latency     p50 %s  p99 %s  max %s\n", pct(0.50), pct(0.99), pct(1))
	fmt.Fprintf(w, "peak RSS    %.1f MiB (server VmHWM)\n", float64(rss)/(1<<20))
}

// peakRSS is the VmHWM of pid in bytes, 0 when unknown.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// ---- faults ----

// runFaults stalls Redis (SIGSTOP) at 1/6 of the run for 1/12 of it, kills it at 5/12
// and restarts it empty at 7/12, and stalls it again at 3/4 for 1/20; it returns what it
// did, with offsets. It stops at ctx's end, leaving Redis running.
func runFaults(ctx context.Context, rs *redisServer, d time.Duration) []string {
	start := time.Now()
	var log []string
	at := func(frac float64) bool {
		t := time.NewTimer(time.Until(start.Add(time.Duration(frac * float64(d)))))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	note := func(what string) { log = append(log, fmt.Sprintf("%6.1fs %s", time.Since(start).Seconds(), what)) }
	defer rs.signal(syscall.SIGCONT) // never leave it stopped
	steps := []struct {
		frac float64
		do   func() string
	}{
		{1.0 / 6, func() string { rs.signal(syscall.SIGSTOP); return "SIGSTOP redis" }},
		{1.0/6 + 1.0/12, func() string { rs.signal(syscall.SIGCONT); return "SIGCONT redis" }},
		{5.0 / 12, func() string { rs.kill(); return "kill redis" }},
		{7.0 / 12, func() string {
			if err := rs.start(ctx); err != nil {
				return "restart redis FAILED: " + err.Error()
			}
			return "restart redis (empty)"
		}},
		{3.0 / 4, func() string { rs.signal(syscall.SIGSTOP); return "SIGSTOP redis" }},
		{3.0/4 + 1.0/20, func() string { rs.signal(syscall.SIGCONT); return "SIGCONT redis" }},
	}
	for _, s := range steps {
		if !at(s.frac) {
			break
		}
		note(s.do())
	}
	<-ctx.Done()
	return log
}

// ---- processes ----

type redisServer struct {
	addr, dir string
	mu        sync.Mutex
	cmd       *exec.Cmd
}

func startRedis(ctx context.Context, tmp string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	rs := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: filepath.Join(tmp, "redis")}
	if err := os.MkdirAll(rs.dir, 0o700); err != nil {
		return nil, err
	}
	return rs, rs.start(ctx)
}

func (rs *redisServer) start(ctx context.Context) error {
	_, port, _ := net.SplitHostPort(rs.addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", rs.dir, "--logfile", filepath.Join(rs.dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	rs.mu.Lock()
	rs.cmd = cmd
	rs.mu.Unlock()
	for range 250 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c, err := net.DialTimeout("tcp", rs.addr, 100*time.Millisecond); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("redis-server did not answer PING")
}

func (rs *redisServer) signal(sig syscall.Signal) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.cmd != nil {
		_ = rs.cmd.Process.Signal(sig)
	}
}

func (rs *redisServer) kill() {
	rs.mu.Lock()
	cmd := rs.cmd
	rs.cmd = nil
	rs.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

func (rs *redisServer) stop() {
	rs.signal(syscall.SIGCONT)
	rs.kill()
}

type server struct {
	base string
	cmd  *exec.Cmd
}

var listenRE = regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)

// startServer runs bin on 127.0.0.1:0 with env added and waits for its address.
func startServer(ctx context.Context, bin, tmp, name string, env []string) (*server, error) {
	out, err := os.Create(filepath.Join(tmp, name+".out"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), append([]string{"SHARDPLAN_LOG_LEVEL=error"}, env...)...)
	cmd.Stdout = out
	if cmd.Stderr, err = os.Create(filepath.Join(tmp, name+".err")); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd}
	for range 500 {
		b, _ := os.ReadFile(out.Name())
		if m := listenRE.FindSubmatch(b); m != nil {
			s.base = "http://" + string(m[1])
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.stop()
	return nil, errors.New(name + " server did not print its address")
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
