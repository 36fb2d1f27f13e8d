package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowClient opens a connection to addr, announces a body of n bytes and sends it one
// byte per interval (for at most n bytes). It returns the status line it gets back.
func slowClient(t *testing.T, addr string, n int, interval time.Duration) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Duration(n+5) * interval))
	fmt.Fprintf(conn, "POST /v1/reshard HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", n)
	status := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			line = "read: " + err.Error()
		}
		status <- strings.TrimSpace(line)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for range n {
		select {
		case s := <-status:
			return s
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return <-status
			}
		}
	}
	return <-status
}

// TestSlowBodiesDoNotBlock: more clients than in-flight slots send their bodies at 1
// byte/s; /healthz, a cached hit and new work are all answered meanwhile, and the slow
// clients get 408 after the body deadline.
func TestSlowBodiesDoNotBlock(t *testing.T) {
	base, _, _, _ := startServer(t, map[string]string{
		"SHARDPLAN_MAX_INFLIGHT":      "4",
		"SHARDPLAN_BODY_READ_TIMEOUT": "1500ms",
	})
	addr := strings.TrimPrefix(base, "http://")
	_, _, want := postReshard(t, base, reshardArray) // warm the cache

	const slow = 12 // three times the slots
	statuses := make([]string, slow)
	var wg sync.WaitGroup
	for i := range slow {
		wg.Go(func() { statuses[i] = slowClient(t, addr, 100, time.Second) })
	}
	time.Sleep(300 * time.Millisecond) // every slow client is connected and sending

	resp, _ := send(t, http.MethodGet, base+"/healthz", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	xc, _, got := postReshard(t, base, reshardArray)
	assert.Equal(t, "hit", xc)
	assert.Equal(t, string(want), string(got))
	xc, _, _ = postReshard(t, base, strings.Replace(reshardArray, "[64,128]", "[32,128]", 1))
	assert.Equal(t, "miss", xc, "new work finds a slot")

	wg.Wait()
	for i, s := range statuses {
		assert.True(t, strings.HasPrefix(s, "HTTP/1.1 408"), "slow client %d got %q", i, s)
	}
	_, metrics := send(t, http.MethodGet, base+"/metrics", "", nil)
	require.Contains(t, string(metrics), `status="408"`)
}
