package cache

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The fault tests check that the cache's own deadline (Config.Timeout) cuts a call to a
// stalled, dead or silent Redis. They give the Redis client's own dial, read and write
// timeouts a minute (withSlowClient): a call the cache's deadline did not cut would then
// take a minute, so callBudget, far above any deadline and far below a minute, tells the
// two apart however loaded the machine is.
const (
	slowClientTimeout = time.Minute
	callBudget        = 15 * time.Second
)

// withSlowClient returns cfg with the Redis client's own timeouts at slowClientTimeout.
func withSlowClient(cfg Config) Config {
	cfg.DialTimeout, cfg.ReadTimeout, cfg.WriteTimeout = slowClientTimeout, slowClientTimeout, slowClientTimeout
	return cfg
}

// redisURL is the shared test Redis: REDIS_URL, default 127.0.0.1:6379.
func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379"
}

// unavailable fails the test under CI=true and skips it otherwise.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format, args...)
}

// sharedRedis returns a Config for the shared test Redis with a key prefix
// unique to the test, so parallel runs never collide; it skips (or fails
// under CI) when no Redis answers.
func sharedRedis(tb testing.TB) Config {
	tb.Helper()
	cfg := Config{RedisURL: redisURL(), Prefix: "shardplan-test:" + randomHex(6) + ":", Version: "t"}
	r, err := NewRedis(cfg)
	if err != nil {
		tb.Fatalf("NewRedis(%s): %v", redactURL(cfg.RedisURL), err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.Ping(ctx); err != nil {
		unavailable(tb, "no Redis at %s: %v", redactURL(cfg.RedisURL), err)
	}
	return cfg
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lookPath finds a Redis binary or skips (fails under CI).
func lookPath(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		unavailable(tb, "%s not found: %v", name, err)
	}
	return p
}

// freePort returns a loopback TCP port that was free a moment ago. With
// bus=true the port+10000 cluster bus port is free too.
func freePort(tb testing.TB, bus bool) int {
	tb.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("listen: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !bus {
			l.Close()
			return port
		}
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		lb, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		l.Close()
		if err != nil {
			continue
		}
		lb.Close()
		return port
	}
	tb.Fatalf("no free port")
	return 0
}

// redisServer is a redis-server process owned by a test.
type redisServer struct {
	tb   testing.TB
	bin  string
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

func (s *redisServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// startRedis starts redis-server on port (0: a free one) with no persistence,
// waits until it answers PING, and stops it in t.Cleanup.
func startRedis(tb testing.TB, port int, extra ...string) *redisServer {
	tb.Helper()
	if port == 0 {
		port = freePort(tb, false)
	}
	s := &redisServer{tb: tb, bin: lookPath(tb, "redis-server"), port: port, dir: tb.TempDir(), args: extra}
	s.start()
	tb.Cleanup(s.stop)
	return s
}

func (s *redisServer) start() {
	s.tb.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.port)),
	}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr(), DisableIdentity: true, MaxRetries: -1, DialerRetries: 1, MaintNotificationsConfig: quiet()})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.stop()
			s.tb.Fatalf("redis-server on %s did not answer: %v\n%s", s.addr(), err, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and reaps it; it is idempotent.
func (s *redisServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *redisServer) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.port)))
	return string(b)
}

// clusterInfo returns CLUSTER INFO of one node as a map.
func clusterInfo(ctx context.Context, addr string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaintNotificationsConfig: quiet()})
	defer c.Close()
	s, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

func quiet() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// execOutput runs a command in dir and returns its combined output.
func execOutput(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}
