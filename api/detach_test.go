package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leavingMemo memoizes nothing and runs each request's computation on a goroutine of its
// own that starts only when the test says so, answering the request at once as a cache
// answers a caller who left while the computation it started goes on. A memo consulted
// inside a computation runs there, as the cache does.
type leavingMemo struct {
	start chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	errs  []error // what each detached computation returned
}

type leavingKey struct{}

func (m *leavingMemo) Do(ctx context.Context, _ string, compute func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	if ctx.Value(leavingKey{}) != nil {
		b, err := compute(ctx)
		return b, false, err
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-m.start
		_, err := compute(context.WithValue(context.WithoutCancel(ctx), leavingKey{}, true))
		m.mu.Lock()
		m.errs = append(m.errs, err)
		m.mu.Unlock()
	}()
	return nil, false, context.DeadlineExceeded
}

// TestComputationOutlivesItsRequest plans reshards whose computations run only after
// their requests have ended and the router has served other routes with the same
// pooled route contexts: each computation still bounds its answer by its own route's
// remedies (the reshard's, which name a request field). Under -race this is also the
// regression test for reading chi's route context after the request.
func TestComputationOutlivesItsRequest(t *testing.T) {
	memo := &leavingMemo{start: make(chan struct{})}
	s := newTestServer(t, func(d *Deps) {
		d.Memo = memo
		d.Limits.MaxAnswerBytes = 64 // every reshard answer is over it
	})
	const planned = 4
	for i := range planned {
		body := `{"mesh":"x=2,y=4","shape":[64,` + string(rune('1'+i)) + `28],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`
		rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", body)
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s", rec.Body)
	}
	// Other routes take the route contexts the reshards left in chi's pool.
	var others sync.WaitGroup
	for range 4 {
		others.Go(func() {
			for _, path := range []string{"/healthz", "/v1/cost-models", "/v1/tiles?mesh=x=2&sharding=x"} {
				do(t, s, http.MethodGet, path, "", "")
			}
		})
	}
	close(memo.start) // the computations run while those requests are served
	others.Wait()
	memo.wg.Wait()

	require.Len(t, memo.errs, planned)
	want := answerParts["/v1/reshard"]
	for _, err := range memo.errs {
		var p *Problem
		require.True(t, errors.As(err, &p), "the computation answers a problem, got %v", err)
		assert.Equal(t, http.StatusUnprocessableEntity, p.Status)
		require.Len(t, p.Errors, 1, "%+v", p)
		field := p.Errors[0].Field
		fix := ""
		for _, part := range want {
			if part.field == field && strings.Contains(p.Errors[0].Message, part.fix) {
				fix = part.fix
			}
		}
		assert.NotEmpty(t, fix, "the 422 of a reshard's answer names one of the reshard's remedies: %+v", p.Errors[0])
	}
}
