// Command cacheoutage measures what a dead Redis node costs uncached requests: it starts
// a private Redis (one server, or a 3-master Cluster), the real shardplan server pointed
// at it, and times uncached POST /v1/reshard requests (each shape new) with Redis up,
// then with the node (the Cluster: one master) killed, then after it is restarted (and
// whether hits resume).
//
//	go run ./scripts/cacheoutage                     # one redis-server
//	go run ./scripts/cacheoutage -cluster -n 200     # 3 masters, one killed
//
// Everything listens on loopback, in a temp dir, and every process started is stopped.
// It prints p50/p99 per phase, the ratio of the dead-node p50 to the up p50, the
// readiness answer while the node is dead, and the breaker metrics.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	cluster := flag.Bool("cluster", false, "a 3-master Redis Cluster (one master killed) instead of one redis-server")
	n := flag.Int("n", 200, "uncached requests per phase")
	flag.Parse()
	if err := run(*cluster, *n); err != nil {
		fmt.Fprintln(os.Stderr, "cacheoutage:", err)
		os.Exit(1)
	}
}

func run(cluster bool, n int) error {
	if n < 10 || n > 100000 {
		return errors.New("want 10 <= -n <= 100000")
	}
	tmp, err := os.MkdirTemp("", "shardplan-outage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "shardplan")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/shardplan-server").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/shardplan-server (run from the repository root): %v\n%s", err, out)
	}

	var nodes []*redisNode
	count := 1
	if cluster {
		count = 3
	}
	for i := range count {
		port, err := freePort(cluster)
		if err != nil {
			return err
		}
		rn := &redisNode{port: port, dir: filepath.Join(tmp, fmt.Sprint("redis-", i)), cluster: cluster}
		if err := os.MkdirAll(rn.dir, 0o755); err != nil {
			return err
		}
		if err := rn.start(); err != nil {
			return err
		}
		defer rn.stop()
		nodes = append(nodes, rn)
	}
	url := "redis://" + nodes[0].addr()
	if cluster {
		args := []string{"--cluster", "create"}
		for _, rn := range nodes {
			args = append(args, rn.addr())
		}
		args = append(args, "--cluster-replicas", "0", "--cluster-yes")
		if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
		}
		for !clusterOK(nodes) {
			time.Sleep(50 * time.Millisecond)
		}
		url = fmt.Sprintf("redis://%s?addr=%s&addr=%s", nodes[0].addr(), nodes[1].addr(), nodes[2].addr())
	}

	srv, err := startServer(bin, tmp, []string{"REDIS_URL=" + url, "SHARDPLAN_LOG_LEVEL=error"})
	if err != nil {
		return err
	}
	defer srv.stop()

	shape := 1000
	phase := func(name string) (time.Duration, error) {
		ds := make([]time.Duration, 0, n)
		for range n {
			shape++
			body := fmt.Appendf(nil, `{"mesh":"x=2,y=4","shape":[%d,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`, 8*shape)
			t0 := time.Now()
			status, _, hdr, err := do(srv.base, http.MethodPost, "/v1/reshard", body)
			ds = append(ds, time.Since(t0))
			if err != nil || status != http.StatusOK || hdr.Get("X-Cache") != "miss" {
				return 0, fmt.Errorf("%s: status %d, X-Cache %q, %v", name, status, hdr.Get("X-Cache"), err)
			}
		}
		slices.Sort(ds)
		p50 := ds[len(ds)/2]
		fmt.Printf("%-28s uncached p50 %-10s p99 %-10s max %s (%d requests)\n", name, p50.Round(time.Microsecond), ds[len(ds)*99/100].Round(time.Microsecond), ds[len(ds)-1].Round(time.Microsecond), n)
		return p50, nil
	}

	what := "redis-server"
	if cluster {
		what = "3-master Redis Cluster"
	}
	fmt.Printf("%s on loopback, shardplan with REDIS_URL=%s\n", what, url)
	if _, err := phase("warm-up"); err != nil {
		return err
	}
	up, err := phase("Redis up")
	if err != nil {
		return err
	}
	killed := nodes[len(nodes)-1]
	killed.stop()
	dead, err := phase("one node dead")
	if err != nil {
		return err
	}
	status, body, _, _ := do(srv.base, http.MethodGet, "/readyz", nil)
	fmt.Printf("/readyz with the node dead: %d %s\n", status, bytes.TrimSpace(body))
	fmt.Printf("dead-node p50 / up p50: %.2f\n", float64(dead)/float64(up))
	printMetrics(srv.base)

	if err := killed.start(); err != nil {
		return err
	}
	if cluster {
		for !clusterOK(nodes) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The breaker's probe (every second) closes it; then a repeated request hits.
	deadline := time.Now().Add(30 * time.Second)
	hits := 0
	for k := 0; time.Now().Before(deadline) && hits < 10; k++ {
		body := fmt.Appendf(nil, `{"mesh":"x=2,y=4","shape":[%d,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`, 8*(900000+k))
		_, _, _, _ = do(srv.base, http.MethodPost, "/v1/reshard", body)
		_, _, hdr, _ := do(srv.base, http.MethodPost, "/v1/reshard", body)
		if hdr.Get("X-Cache") == "hit" {
			hits++
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := phase("node back"); err != nil {
		return err
	}
	status, body, _, _ = do(srv.base, http.MethodGet, "/readyz", nil)
	fmt.Printf("/readyz with the node back: %d %s; repeated requests hit again: %d of 10\n", status, bytes.TrimSpace(body), hits)
	printMetrics(srv.base)
	return nil
}

func printMetrics(base string) {
	_, body, _, _ := do(base, http.MethodGet, "/metrics", nil)
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "shardplan_cache_breaker") || strings.HasPrefix(line, "shardplan_cache_nodes_unreachable") || strings.HasPrefix(line, "shardplan_degraded") {
			fmt.Println("  " + line)
		}
	}
}

var client = &http.Client{Timeout: 30 * time.Second}

func do(base, method, path string, body []byte) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

type redisNode struct {
	port    int
	dir     string
	cluster bool
	cmd     *exec.Cmd
}

func (r *redisNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

func (r *redisNode) start() error {
	args := []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir}
	if r.cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
	}
	r.cmd = exec.Command("redis-server", args...)
	r.cmd.Dir = r.dir
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	for range 250 {
		if out, err := exec.Command("redis-cli", "-p", strconv.Itoa(r.port), "ping").Output(); err == nil && strings.TrimSpace(string(out)) == "PONG" {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer", r.addr())
}

func (r *redisNode) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

func clusterOK(nodes []*redisNode) bool {
	for _, rn := range nodes {
		out, err := exec.Command("redis-cli", "-p", strconv.Itoa(rn.port), "cluster", "info").Output()
		if err != nil || !strings.Contains(string(out), "cluster_state:ok") {
			return false
		}
	}
	return true
}

// freePort is a loopback port free a moment ago; bus: its cluster bus port (+10000) too.
func freePort(bus bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !bus {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		if lb, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
			lb.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

type server struct {
	cmd  *exec.Cmd
	base string
}

var listenRE = regexp.MustCompile(`listening on (\S+)`)

func startServer(bin, tmp string, env []string) (*server, error) {
	outPath := filepath.Join(tmp, "server.out")
	out, err := os.Create(outPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd}
	for range 500 {
		b, _ := os.ReadFile(outPath)
		if m := listenRE.FindSubmatch(b); m != nil {
			s.base = "http://" + string(m[1])
			return s, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.stop()
	return nil, errors.New("the server did not print its address")
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
