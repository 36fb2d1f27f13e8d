package main

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// drainListener is the API's listener. Closing a listening socket resets the
// connections the kernel has accepted that the server has not yet taken (its accept
// queue): their clients connected and never get an answer. On shutdown, drain first
// takes every queued connection (the server serves them like any other), then Close
// closes the socket:
//
//	serving ── drain() ──► accept what is queued ── queue empty ──► Close (hs.Shutdown)
type drainListener struct {
	net.Listener
	deadline interface{ SetDeadline(time.Time) error } // the socket's (nil: cannot drain)

	draining  atomic.Bool
	emptyOnce sync.Once
	empty     chan struct{} // closed when a draining Accept found the queue empty
	closeOnce sync.Once
	closed    chan struct{}
}

// drainPoll is how long a draining Accept waits for a queued connection: one already in
// the queue is taken at once, so this only bounds the wait once the queue is empty.
const drainPoll = 10 * time.Millisecond

func newDrainListener(l net.Listener) *drainListener {
	dl := &drainListener{Listener: l, empty: make(chan struct{}), closed: make(chan struct{})}
	dl.deadline, _ = l.(interface{ SetDeadline(time.Time) error })
	return dl
}

// Accept is the listener's, until drain: then it returns what is queued and, once the
// queue is empty, blocks until Close.
func (dl *drainListener) Accept() (net.Conn, error) {
	for {
		polled := dl.draining.Load() && dl.deadline != nil
		if polled {
			_ = dl.deadline.SetDeadline(time.Now().Add(drainPoll))
		}
		c, err := dl.Listener.Accept()
		if err == nil || !dl.draining.Load() || !errors.Is(err, os.ErrDeadlineExceeded) {
			return c, err
		}
		if !polled {
			continue // woken by drain from a wait without a deadline: poll the queue
		}
		dl.emptyOnce.Do(func() { close(dl.empty) })
		<-dl.closed
		return nil, net.ErrClosed
	}
}

// drain stops waiting for new connections and returns once every queued one has been
// accepted (or after limit). New connections that arrive meanwhile are accepted too.
func (dl *drainListener) drain(limit time.Duration) {
	if dl.deadline == nil {
		return
	}
	dl.beginDrain()
	dl.waitEmpty(limit)
}

// beginDrain makes Accept poll the queue, waking one that waits without a deadline.
func (dl *drainListener) beginDrain() {
	dl.draining.Store(true)
	_ = dl.deadline.SetDeadline(time.Now())
}

// waitEmpty returns once a polling Accept found the queue empty, or after limit.
func (dl *drainListener) waitEmpty(limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-dl.empty:
	case <-t.C:
	}
}

// Close closes the socket and releases a drained Accept.
func (dl *drainListener) Close() error {
	dl.closeOnce.Do(func() { close(dl.closed) })
	return dl.Listener.Close()
}
