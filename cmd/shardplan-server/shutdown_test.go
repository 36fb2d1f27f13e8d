package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShutdownExitCodeMatchesAnswers: connections that carry no request (opened and
// silent, as a client's connection pool leaves them) do not make a drain that answered
// every request fail: run returns nil (exit 0), and the request in flight got its 503.
func TestShutdownExitCodeMatchesAnswers(t *testing.T) {
	base, cancel, done, stderr := startServer(t, nil, "-shutdown-timeout", "300ms")
	addr := strings.TrimPrefix(base, "http://")
	var silent []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		silent = append(silent, c)
	}
	defer func() {
		for _, c := range silent {
			_ = c.Close()
		}
	}()

	pr, pw := io.Pipe()
	defer pw.Close()
	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/reshard", pr)
		req.Header.Set("Content-Type", "application/json")
		resp, err := inFlightClient.Do(expectContinue(req))
		if err != nil {
			status <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	_, err := pw.Write([]byte(`{"mesh":"x=2",`))
	require.NoError(t, err)

	cancel()
	assert.Equal(t, http.StatusServiceUnavailable, <-status)
	select {
	case err := <-done:
		require.NoError(t, err, "exit 0: the one request was answered; the silent connections carried none\n%s", stderr.String())
	case <-time.After(testBudget):
		t.Fatal("run did not return")
	}
	assert.NotContains(t, stderr.String(), "dropped")
}
