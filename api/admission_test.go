package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fill takes every slot of ch and returns a func that gives them back.
func fill(ch chan struct{}) func() {
	for range cap(ch) {
		ch <- struct{}{}
	}
	return func() {
		for range cap(ch) {
			<-ch
		}
	}
}

// TestCachedHitsNeedNoSlot: with every in-flight and compute slot taken, a request
// answered from the memo is still served, and /healthz answers; new work is turned away
// (503 overloaded) or waits for a compute slot until its deadline (503 timeout).
func TestCachedHitsNeedNoSlot(t *testing.T) {
	memo := &fakeMemo{store: map[string][]byte{}}
	s := newTestServer(t, func(d *Deps) {
		d.Memo = memo
		d.Limits.MaxInflight = 2
		d.Limits.MaxCompute = 1
	})
	rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	want := rec.Body.String()
	other := strings.Replace(planReq, "[64,64]", "[32,64]", 1)

	t.Run("compute slots full", func(t *testing.T) {
		defer fill(s.compute)()
		rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "hit", rec.Header().Get("X-Cache"))
		assert.Equal(t, want, rec.Body.String())
		// The waiter's deadline is its own context's: it waits for a slot that never frees.
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/reshard", strings.NewReader(other))
		req.Header.Set("Content-Type", "application/json")
		waiter := httptest.NewRecorder()
		s.ServeHTTP(waiter, req)
		p := requireProblem(t, waiter, http.StatusServiceUnavailable, slugTimeout)
		assert.Contains(t, p.Detail, "SHARDPLAN_REQUEST_TIMEOUT")
		assert.Len(t, s.inflight, 0, "the waiter gave its in-flight slot back")
	})
	t.Run("in-flight slots full", func(t *testing.T) {
		defer fill(s.inflight)()
		rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", planReq)
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "hit", rec.Header().Get("X-Cache"))
		rec = do(t, s, http.MethodPost, "/v1/reshard", "application/json", other)
		requireProblem(t, rec, http.StatusServiceUnavailable, slugOverloaded)
		assert.Equal(t, "1", rec.Header().Get("Retry-After"))
		requireProblem(t, do(t, s, http.MethodPost, "/v1/tiles", "application/json", seed), http.StatusServiceUnavailable, slugOverloaded)
		assert.Equal(t, http.StatusOK, do(t, s, http.MethodGet, "/healthz", "", "").Code)
		metrics := do(t, s, http.MethodGet, "/metrics", "", "")
		assert.Equal(t, http.StatusOK, metrics.Code)
		assert.Contains(t, metrics.Body.String(), "shardplan_inflight_requests 2")
	})
	rec = do(t, s, http.MethodPost, "/v1/reshard", "application/json", other)
	assert.Equal(t, http.StatusOK, rec.Code, "slots free again: %s", rec.Body.String())
}

func TestRateLimit(t *testing.T) {
	s := newTestServer(t, func(d *Deps) {
		d.Limits.RateLimit = 0.5
		d.Limits.RateBurst = 2
	})
	from := func(addr, method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
		req.RemoteAddr = addr
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	for i := range 2 {
		assert.Equal(t, http.StatusOK, from("192.0.2.1:1000", http.MethodPost, "/v1/tiles", seed).Code, "burst request %d", i)
	}
	rec := from("192.0.2.1:1001", http.MethodPost, "/v1/tiles", seed) // same host, another port
	p := requireProblem(t, rec, http.StatusTooManyRequests, slugRateLimited)
	assert.Equal(t, "2", rec.Header().Get("Retry-After"), "one token every 2 s")
	assert.Contains(t, p.Detail, "SHARDPLAN_RATE_LIMIT")
	assert.Equal(t, http.StatusOK, from("192.0.2.2:1000", http.MethodPost, "/v1/tiles", seed).Code, "another client has its own bucket")
	assert.Equal(t, http.StatusOK, from("192.0.2.1:1000", http.MethodGet, "/healthz", "").Code, "operations are not limited")
	assert.Equal(t, http.StatusOK, from("192.0.2.1:1000", http.MethodGet, "/readyz", "").Code)
}

func TestClientLimitsForgetIdleClients(t *testing.T) {
	c := newClientLimits(1000, 1)
	now := time.Now()
	for i := range 3 * minSweep {
		ok, _ := c.allow(fmt.Sprint("client-", i), now.Add(time.Duration(i)*time.Millisecond))
		require.True(t, ok)
	}
	assert.LessOrEqual(t, len(c.buckets), 2*minSweep, "refilled buckets are dropped as the map grows")
	assert.Nil(t, newClientLimits(0, 5), "0 requests/s: off")
}

// TestShutdownCancelsWaiters: a request waiting for a compute slot when shutdown cancels
// it answers 503 shutting-down (not 499).
func TestShutdownCancelsWaiters(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxCompute = 1 })
	defer fill(s.compute)()
	s.SetDraining(true)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/reshard", strings.NewReader(planReq))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	requireProblem(t, rec, http.StatusServiceUnavailable, slugShuttingDown)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
}

// TestMetricsLint runs promlint over every metric the server registers.
func TestMetricsLint(t *testing.T) {
	s := newTestServer(t, nil)
	do(t, s, http.MethodPost, "/v1/tiles", "application/json", seed)
	problems, err := testutil.GatherAndLint(s.reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// TestLendCoresChargesComputeSlots: the cores a request plans on beside its own take
// compute slots without waiting: as many as are free, up to what it asks; they show
// in the computing gauge and go back when it is done.
func TestLendCoresChargesComputeSlots(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxCompute = 4 })
	release, err := s.admit(t.Context())
	require.NoError(t, err)
	defer release()
	for _, tc := range []struct{ want, lent, held int }{
		{want: 0, lent: 0, held: 1},
		{want: 2, lent: 2, held: 3},
		{want: 9, lent: 3, held: 4},
	} {
		n, back := s.lendCores(tc.want)
		assert.Equal(t, tc.lent, n, "want %d", tc.want)
		assert.Len(t, s.compute, tc.held, "want %d", tc.want)
		back()
		assert.Len(t, s.compute, 1, "want %d: the lent slots went back", tc.want)
	}
	_, back := s.lendCores(3)
	n, none := s.lendCores(1)
	assert.Zero(t, n, "every slot is taken: nothing to lend")
	none()
	back()
	assert.Len(t, s.compute, 1)
}
