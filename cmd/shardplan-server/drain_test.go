package main

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDrainTakesQueuedConnections dials connections the server has not accepted yet (the
// kernel queues them), then shuts the listener down as shutdown does: every queued
// connection is accepted before the socket closes (closing it first reset them), and
// Accept then reports the listener closed.
func TestDrainTakesQueuedConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dl := newDrainListener(ln)
	const n = 12
	clients := make([]net.Conn, n)
	for i := range clients {
		clients[i], err = net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = clients[i].Close() })
	}
	// Draining begins before anything accepts: every connection is taken by a polling
	// Accept, as when the server's accept loop is behind its queue.
	dl.beginDrain()
	accepted := make(chan net.Conn, n+1)
	done := make(chan error, 1)
	go func() {
		for {
			c, err := dl.Accept()
			if err != nil {
				done <- err
				return
			}
			accepted <- c
		}
	}()
	dl.waitEmpty(time.Minute) // a generous cap: it returns once the queue is empty
	require.NoError(t, dl.Close())
	assert.ErrorIs(t, <-done, net.ErrClosed)
	require.Len(t, accepted, n, "every queued connection was accepted")
	// Each accepted connection is live: a byte from its client arrives.
	for i, c := range clients {
		_, err := c.Write([]byte{byte(i)})
		require.NoError(t, err)
	}
	for range n {
		c := <-accepted
		buf := make([]byte, 1)
		_, err := c.Read(buf)
		require.NoError(t, err)
		_ = c.Close()
	}
}

// TestDrainListenerServesNormally checks Accept before drain is the listener's own, and
// that Close without drain is a plain close.
func TestDrainListenerServesNormally(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dl := newDrainListener(ln)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			_ = c.Close()
		}
	}()
	c, err := dl.Accept()
	require.NoError(t, err)
	_ = c.Close()
	require.NoError(t, dl.Close())
	_, err = dl.Accept()
	assert.True(t, errors.Is(err, net.ErrClosed), "%v", err)
}
