package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Admission: what a request must get through before it costs anything.
//
//	rate limit (per client) -> body read under its own deadline -> request deadline
//	-> exact-request memo hit?  yes: answered, no slot taken
//	                            no:  in-flight slot (or 503) -> compute slot (wait up to
//	                                 the deadline) -> decode, plan, encode
//
// Slow bodies never hold a slot, cached answers never wait for one, and at most
// Limits.MaxCompute requests compute at once, so /healthz, /readyz and /metrics (which
// take no slot) are scheduled promptly however many requests wait. A compute slot is a
// core: a request that plans on several goroutines (a graph's distinct reshards) uses
// one more core for each slot it takes beside its own without waiting (lendCores), so
// the compute slots count the cores requests plan on, not only the requests.

// bufferBody reads the whole body (capped by limitBody) under Limits.BodyReadTimeout
// before the request goes on, so a client sending slowly is cut off with 408 and never
// holds an in-flight slot or eats into the request deadline. A JSON body nested more
// than Limits.MaxJSONDepth deep is a 400 before anything decodes it. Handlers read the
// buffered copy.
func (s *Server) bufferBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if d := s.limits.BodyReadTimeout; d > 0 {
			_ = rc.SetReadDeadline(time.Now().Add(d)) // unsupported (tests' recorders): no deadline
		}
		// A cancelled request (shutdown) stops waiting for its body at once.
		stop := context.AfterFunc(r.Context(), func() { _ = rc.SetReadDeadline(time.Now()) })
		body, err := readAllSized(r.Body, r.ContentLength)
		stop()
		_ = rc.SetReadDeadline(time.Time{})
		if err != nil {
			if r.Context().Err() != nil && s.draining.Load() {
				s.writeProblem(w, r, shuttingDown())
				return
			}
			s.writeProblem(w, r, bodyReadProblem(err, s.limits.BodyReadTimeout))
			return
		}
		if path, deep := jsonTooDeep(body, s.limits.MaxJSONDepth); deep && isJSONBody(r) {
			s.writeProblem(w, r, tooDeep(path, s.limits.MaxJSONDepth))
			return
		}
		r.Body = &bufferedBody{Reader: bytes.NewReader(body), b: body}
		next.ServeHTTP(w, r)
	})
}

// bufferedBody is a request body bufferBody has read whole. readBody takes its bytes
// instead of copying them (a 100k-op graph body is tens of MB).
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func (*bufferedBody) Close() error { return nil }

// take returns the whole body when nothing of it was read yet, and consumes it.
func (bb *bufferedBody) take() ([]byte, bool) {
	if bb.Len() != len(bb.b) {
		return nil, false
	}
	_, _ = bb.Seek(0, io.SeekEnd)
	return bb.b, true
}

// maxPresize caps the buffer readAllSized allocates up front from a claimed length.
const maxPresize = 64 << 20

// readAllSized is io.ReadAll into a buffer sized from the request's Content-Length
// (n; unknown when negative), so a large body is not copied again at every doubling of
// the buffer. The buffer still grows past a wrong or capped claim.
func readAllSized(r io.Reader, n int64) ([]byte, error) {
	if n <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, min(n, maxPresize)+1) // +1: the final read sees EOF without growing
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		k, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func bodyReadProblem(err error, timeout time.Duration) *Problem {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return bodyTooLarge(mbe.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return NewProblem(http.StatusRequestTimeout, slugBodyTimeout, "Request body too slow",
			"the request body did not arrive within %s (SHARDPLAN_BODY_READ_TIMEOUT); send it at once", timeout).
			WithHeader("Connection", "close")
	}
	return NewProblem(http.StatusBadRequest, slugInvalidJSON, "Malformed JSON", "could not read the request body: %v", err)
}

// shuttingDown is the 503 of a request the shutdown timeout cut short.
func shuttingDown() *Problem {
	return NewProblem(http.StatusServiceUnavailable, slugShuttingDown, "Shutting down",
		"this instance is shutting down and stopped the request after SHARDPLAN_SHUTDOWN_TIMEOUT; retry it (another instance will answer)").
		WithHeader("Retry-After", "1").WithHeader("Connection", "close")
}

// overloaded is the 503 of a request that finds every in-flight slot taken.
func (s *Server) overloaded() *Problem {
	return NewProblem(http.StatusServiceUnavailable, slugOverloaded, "Service overloaded",
		"more than %d requests are computing or waiting to (SHARDPLAN_MAX_INFLIGHT); retry shortly", s.limits.MaxInflight).
		WithHeader("Retry-After", "1")
}

// admit takes an in-flight slot (none free: 503 overloaded at once) and then a compute
// slot, waiting for one until ctx is done (then ctx's error: a deadline renders as 503
// timeout). release gives both back; call it once.
func (s *Server) admit(ctx context.Context) (release func(), err error) {
	if s.inflight != nil {
		select {
		case s.inflight <- struct{}{}:
		default:
			return nil, s.overloaded()
		}
	}
	releaseInflight := func() {
		if s.inflight != nil {
			<-s.inflight
		}
	}
	if s.compute != nil {
		select {
		case s.compute <- struct{}{}:
		case <-ctx.Done():
			releaseInflight()
			return nil, ctx.Err()
		}
	}
	return func() {
		if s.compute != nil {
			<-s.compute
		}
		releaseInflight()
	}, nil
}

// lendCores takes up to want more compute slots without waiting, for a request that
// computes on several goroutines (a graph's or an audit's distinct reshards): a request
// computes on as many cores as the compute slots it holds, admit's and these. It
// returns how many it took and a func giving them back (call it once). Without a
// compute limit it lends all it is asked.
func (s *Server) lendCores(want int) (int, func()) {
	if s.compute == nil {
		return want, func() {}
	}
	n := 0
take:
	for n < want {
		select {
		case s.compute <- struct{}{}:
			n++
		default:
			break take
		}
	}
	return n, func() {
		for range n {
			<-s.compute
		}
	}
}

// throttle runs next under admit (for handlers that compute on every request).
func (s *Server) throttle(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := s.admit(r.Context())
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// registerSlotGauges exposes how many slots are taken: shardplan_inflight_requests
// (computing or waiting to) and shardplan_computing_requests.
func (s *Server) registerSlotGauges(reg prometheus.Registerer) error {
	for _, g := range []struct {
		name, help string
		ch         *chan struct{}
	}{
		{"shardplan_inflight_requests", "Requests holding an in-flight slot: computing or waiting for a compute slot (SHARDPLAN_MAX_INFLIGHT).", &s.inflight},
		{"shardplan_computing_requests", "Requests holding a compute slot (SHARDPLAN_MAX_COMPUTE).", &s.compute},
	} {
		ch := *g.ch
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, func() float64 { return float64(len(ch)) })); err != nil {
			return fmt.Errorf("register %s: %w", g.name, err)
		}
	}
	return nil
}

// ---- per-client rate limits ----

// clientLimits holds one token bucket per client (Limits.RateLimit requests/s, burst
// Limits.RateBurst). Buckets that have refilled are dropped when the map grows, so
// memory follows the active clients.
type clientLimits struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	sweepAt int
}

const minSweep = 1024

func newClientLimits(perSecond float64, burst int) *clientLimits {
	if perSecond <= 0 {
		return nil
	}
	return &clientLimits{rate: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[string]*rate.Limiter{}, sweepAt: minSweep}
}

// allow takes a token for client, or says how long until one is available.
func (c *clientLimits) allow(client string, now time.Time) (bool, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lim, ok := c.buckets[client]
	if !ok {
		if len(c.buckets) >= c.sweepAt {
			c.sweep(now)
		}
		lim = rate.NewLimiter(c.rate, c.burst)
		c.buckets[client] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops the buckets that are full again (their clients are idle).
func (c *clientLimits) sweep(now time.Time) {
	for k, lim := range c.buckets {
		if lim.TokensAt(now) >= float64(c.burst) {
			delete(c.buckets, k)
		}
	}
	c.sweepAt = max(minSweep, 2*len(c.buckets))
}

// clientKey identifies the client a request's rate limit is charged to: its API key
// (hashed; set by requireAPIKey) when keys are on, else the connection's address. No
// forwarding header is trusted: behind a proxy, every client shares the proxy's bucket
// unless API keys are on.
func clientKey(r *http.Request) string {
	if id, ok := r.Context().Value(apiKeyIDKey{}).(string); ok {
		return "key:" + id
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// keyID is a short, non-reversible id of an API key, for rate-limit buckets and logs.
func keyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

type apiKeyIDKey struct{}

// rateLimit answers 429 with Retry-After to a client over its token bucket.
func (s *Server) rateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := s.overRate(r); p != nil {
			s.writeProblem(w, r, p)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// overRate takes a token from r's client and returns the 429 when there is none (nil
// when rate limits are off).
func (s *Server) overRate(r *http.Request) *Problem {
	if s.clients == nil {
		return nil
	}
	ok, wait := s.clients.allow(clientKey(r), time.Now())
	if ok {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	return NewProblem(http.StatusTooManyRequests, slugRateLimited, "Too many requests",
		"this client sent more than %g requests/s (burst %d) (SHARDPLAN_RATE_LIMIT, SHARDPLAN_RATE_BURST); retry after %d s",
		float64(s.clients.rate), s.clients.burst, secs).WithHeader("Retry-After", strconv.Itoa(secs))
}
