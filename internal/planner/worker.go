package planner

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// worker is work a request may run on a goroutine of its own (the side work of Reshard,
// the exact pass beside the anytime pass). Whoever comes to it first runs it: the
// goroutine goWorker starts, or the request's goroutine when it waits for the result
// before that goroutine has been scheduled (after an idle spell a second core can take
// hundreds of µs to wake; the request then does the work itself rather than wait).
// What it computes does not depend on where it runs. A panic there would end the
// process, where the same panic on the request's goroutine reaches the server's
// recovery (a 500 for that request); so the worker recovers it and wait raises it again
// on the goroutine that waits, once, with the worker's stack.
type worker struct {
	fn       func()
	claimed  atomic.Bool
	done     chan struct{}
	panicked *workerPanic
	raised   atomic.Bool
	// next is work offered to this worker's goroutine (then), to run after fn: finished
	// once that goroutine has looked for it and left.
	next atomic.Pointer[worker]
}

// finished marks a worker's next once its goroutine has left (then starts a goroutine
// of its own for what comes after).
var finished = &worker{}

// workerPanic is a panic of a worker, raised again where it is waited for.
type workerPanic struct {
	value any
	stack []byte
}

func (p *workerPanic) Error() string {
	return fmt.Sprintf("%v (on a planner goroutine)\n%s", p.value, p.stack)
}

// goWorker offers fn to a new goroutine (wait runs it if that goroutine has not begun).
func goWorker(fn func()) *worker {
	w := newWorker(fn)
	go w.runChain()
	return w
}

// runChain runs w, then whatever then offered it meanwhile (and what was offered to that).
func (w *worker) runChain() {
	for w != nil {
		w.run()
		if w.next.CompareAndSwap(nil, finished) {
			return
		}
		w = w.next.Load()
	}
}

// then offers next to the goroutine goWorker started for w, to run once w's fn has
// returned: a core already awake takes it, where a new goroutine waits for one (on this
// machine the handover to a goroutine queued behind a busy one cost 75-100 µs; the
// idle core's wake-up as much again). When that goroutine has left already, next gets
// a goroutine of its own. Either way wait runs next itself if nothing has begun it.
func (w *worker) then(next *worker) {
	if !w.next.CompareAndSwap(nil, next) {
		go next.runChain()
	}
}

// newWorker is a worker no goroutine has been started for: wait runs it.
func newWorker(fn func()) *worker {
	return &worker{fn: fn, done: make(chan struct{})}
}

// run runs fn unless it has been claimed already, recovering a panic for wait.
func (w *worker) run() {
	if !w.claimed.CompareAndSwap(false, true) {
		return
	}
	defer close(w.done)
	defer func() {
		switch p := recover().(type) {
		case nil:
		case *workerPanic:
			w.panicked = p // another worker's, raised where this one waited for it
		default:
			w.panicked = &workerPanic{value: p, stack: debug.Stack()}
		}
	}()
	w.fn()
}

// wait runs fn on the calling goroutine if no goroutine has begun it, else blocks until
// it has returned; the first wait after it panicked panics with a *workerPanic (any
// number of calls, from any goroutine).
func (w *worker) wait() {
	w.run()
	<-w.done
	if w.panicked != nil && w.raised.CompareAndSwap(false, true) {
		panic(w.panicked)
	}
}

// isDone reports whether fn has returned (or was dropped).
func (w *worker) isDone() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// drop gives up fn if no goroutine has begun it, then waits for one that has (a request
// that ends early, with an error, leaves nothing running behind it). A panic is not
// raised again.
func (w *worker) drop() {
	if w.claimed.CompareAndSwap(false, true) {
		close(w.done)
	}
	<-w.done
}
