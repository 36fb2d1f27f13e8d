package planner

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// worker is work a request runs on a goroutine of its own (the side work of Reshard,
// the exact pass beside the anytime pass). A panic there would end the process, where
// the same panic on the request's goroutine reaches the server's recovery (a 500 for
// that request); so the worker recovers it and wait raises it again on the goroutine
// that waits, once, with the worker's stack.
type worker struct {
	done     chan struct{}
	panicked *workerPanic
	raised   atomic.Bool
}

// workerPanic is a panic of a worker, raised again where it is waited for.
type workerPanic struct {
	value any
	stack []byte
}

func (p *workerPanic) Error() string {
	return fmt.Sprintf("%v (on a planner goroutine)\n%s", p.value, p.stack)
}

// goWorker runs fn on a new goroutine.
func goWorker(fn func()) *worker {
	w := &worker{done: make(chan struct{})}
	go func() {
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
		fn()
	}()
	return w
}

// wait blocks until the worker's fn has returned; the first wait after it panicked
// panics with a *workerPanic (any number of calls, from any goroutine).
func (w *worker) wait() {
	<-w.done
	if w.panicked != nil && w.raised.CompareAndSwap(false, true) {
		panic(w.panicked)
	}
}
