package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/shardplan/shardplan/api"
	"github.com/shardplan/shardplan/internal/cache"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/openapi"
)

// run is the whole service: it loads the config from args and getenv, listens, serves
// until ctx is cancelled or SIGINT/SIGTERM arrives, then drains gracefully. It prints
// "listening on HOST:PORT" to stdout once the listener is bound (tests parse that line)
// and logs to stderr. A second signal during the drain kills the process (the default
// signal behaviour is restored after the first).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("config: %w", err)
	}
	logger := newLogger(cfg, stderr)
	logger.LogAttrs(ctx, slog.LevelInfo, "config", cfg.logAttrs()...)
	logger.LogAttrs(ctx, slog.LevelInfo, "garbage collector", applyGC(cfg, getenv).logAttrs()...)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := newRegistry()
	// The plan cache: in-process LRU, or Redis when REDIS_URL / SHARDPLAN_REDIS_ADDRS is
	// set. It does not connect here: a Redis that is down means misses and a "degraded"
	// readiness, never a failed start or request. Closed after the drain.
	memo, cacheCheck, err := openCache(cfg, reg, logger)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer memo.Close() // early returns; idempotent after the shutdown's Close
	logger.LogAttrs(ctx, slog.LevelInfo, "plan cache", slog.Any("cache", cfg.cacheConfig()), slog.String("backend", memo.Backend()))

	keys, err := cfg.apiKeys()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		return err
	}
	srv, err := api.New(api.Deps{
		Logger:   logger,
		Limits:   cfg.limits(),
		Registry: reg,
		Memo:     memo,
		// The cache is optional: without it every answer is computed, so its outage is
		// "degraded", not "not ready" (a load balancer keeps the replica in rotation).
		Optional: map[string]api.Check{"cache": cacheCheck},
		OpenAPI:  openapi.JSON,
		OpenAPI3: openapi.JSON3,
		Access:   api.Access{APIKeys: keys, CORSOrigins: splitList(cfg.CORSOrigins), MetricsElsewhere: cfg.MetricsAddr != ""},

		// What planning computes from a model and a mesh alone, shared by every request
		// (about 30 MiB at most).
		PlannerMemos: planner.NewMemos(planner.DefaultMemoLimits),
	})
	if err != nil {
		return err
	}

	svc := &service{cfg: cfg, logger: logger, api: srv, memo: memo}
	if err := svc.listen(stdout, tlsConfig, len(keys) > 0); err != nil {
		return err
	}
	// baseCtx is every request's parent; it is cancelled when the drain times out, so
	// in-flight work that polls ctx stops instead of being cut off mid-write.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	svc.cancelBase = cancelBase
	svc.requests = &activeConns{}
	svc.hs = apiServer(cfg, srv, logger, baseCtx, tlsConfig)
	svc.hs.ConnState = svc.requests.track
	return svc.serve(ctx, stop)
}

// newRegistry is the private metrics registry, with the Go runtime, process and build
// info collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	return reg
}

// loadTLS loads the certificate and key the config names; nil when it names none.
func loadTLS(cfg config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("config: SHARDPLAN_TLS_CERT/SHARDPLAN_TLS_KEY: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// service is what run serves and drains: the API's server and listener and, when the
// metrics have their own address, the metrics server and listener.
type service struct {
	cfg        config
	logger     *slog.Logger
	api        *api.Server
	memo       *cache.Cache
	hs         *http.Server
	ln         *drainListener
	ms         *http.Server // nil: the metrics are served with the API
	mln        net.Listener
	cancelBase context.CancelFunc // cancels every request's context
	requests   *activeConns       // the API's connections with a request being handled
}

// listen binds the API's address and the metrics' own address, if any, and prints
// "listening on HOST:PORT" (and "metrics listening on HOST:PORT") to stdout.
func (s *service) listen(stdout io.Writer, tlsConfig *tls.Config, apiKeys bool) error {
	var err error
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (SHARDPLAN_ADDR): %w", s.cfg.Addr, err)
	}
	s.ln = newDrainListener(ln)
	addr := s.ln.Addr().String()
	s.logger.Info("listening", slog.String("addr", addr), slog.Bool("tls", tlsConfig != nil), slog.Bool("api_keys", apiKeys))
	fmt.Fprintf(stdout, "listening on %s\n", addr)

	// /metrics and pprof on their own address (bind it where only operators reach it).
	if s.cfg.MetricsAddr == "" {
		return nil
	}
	if s.mln, err = net.Listen("tcp", s.cfg.MetricsAddr); err != nil {
		_ = s.ln.Close()
		return fmt.Errorf("listen on %s (SHARDPLAN_METRICS_ADDR): %w", s.cfg.MetricsAddr, err)
	}
	s.ms = &http.Server{
		Handler:           metricsMux(s.api.Metrics()),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      2 * time.Minute, // CPU profiles take their seconds parameter
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	s.logger.Info("metrics listening", slog.String("addr", s.mln.Addr().String()))
	fmt.Fprintf(stdout, "metrics listening on %s\n", s.mln.Addr())
	return nil
}

// apiServer is the API's http.Server, with every timeout set and baseCtx as every
// request's parent context.
func apiServer(cfg config, h http.Handler, logger *slog.Logger, baseCtx context.Context, tlsConfig *tls.Config) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      cfg.RequestTimeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		TLSConfig:         tlsConfig,
	}
}

// serve serves the API (and the metrics) until ctx is done or a server fails, then
// shuts down; stop restores the default signal behaviour.
func (s *service) serve(ctx context.Context, stop context.CancelFunc) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		if s.hs.TLSConfig != nil {
			err = s.hs.ServeTLS(s.ln, "", "")
		} else {
			err = s.hs.Serve(refusedListener{Listener: s.ln, headerLimit: s.hs.MaxHeaderBytes})
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	if s.ms != nil {
		g.Go(func() error {
			if err := s.ms.Serve(s.mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve metrics: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		stop() // a second SIGINT/SIGTERM now kills the process
		return s.shutdown(ctx)
	})
	return g.Wait()
}

// shutdown fails readiness, waits the drain delay, accepts what the listener's queue
// holds, drains the API (every accepted request is answered), then closes the metrics
// server and, last, the plan cache.
func (s *service) shutdown(ctx context.Context) error {
	cfg, logger := s.cfg, s.logger
	logger.Info("shutting down", slog.Duration("drain_delay", cfg.DrainDelay), slog.Duration("timeout", cfg.ShutdownTimeout))
	s.api.SetDraining(true)
	if cfg.DrainDelay > 0 {
		// Keep serving (readiness 503) so load balancers stop routing here first.
		time.Sleep(cfg.DrainDelay)
	}
	// Take every connection the kernel accepted before the socket closes: closing it
	// would reset them unanswered.
	s.ln.drain(cfg.ShutdownTimeout)
	err := drain(ctx, s.hs, s.requests, s.cancelBase, cfg.ShutdownTimeout, logger)
	if s.ms != nil {
		// Metrics stay up through the drain; they go with the API.
		_ = s.ms.Close()
	}
	// Close the cache (Redis) last: after the last request, waiting for its pending writes.
	if cerr := s.memo.Close(); cerr != nil {
		logger.Warn("closing the plan cache", slog.String("error", cerr.Error()))
	}
	logger.Info("stopped")
	return err
}

// shutdownGrace is how long, after the shutdown timeout, requests still in flight get to
// write their 503 once their contexts are cancelled.
const shutdownGrace = 2 * time.Second

// drainPollEvery is how often the drain looks whether every request was answered.
const drainPollEvery = 5 * time.Millisecond

// activeConns counts the connections that carry a request not yet answered (net/http's
// StateActive: from the first byte of a request read until its response is written
// out). Set track as the server's ConnState.
type activeConns struct {
	mu     sync.Mutex
	active map[net.Conn]bool
}

func (a *activeConns) track(c net.Conn, st http.ConnState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active == nil {
		a.active = map[net.Conn]bool{}
	}
	if st == http.StateActive {
		a.active[c] = true
	} else {
		delete(a.active, c)
	}
}

// inFlight is how many requests are being handled or answered now.
func (a *activeConns) inFlight() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.active)
}

// drain stops hs: the listener closes and in-flight requests get timeout to finish. Those
// still running then have their contexts cancelled (cancelBase) and answer 503
// shutting-down (requests waiting for a slot or a body included) within shutdownGrace.
// Once no connection carries a request being handled or answered, those left (opened
// and silent, which http.Server.Shutdown waits for up to 5 s) are closed: they hold
// nothing to answer. It returns nil when every request was answered, and an error naming how
// many were not when requests were still running at the end of the grace.
func drain(ctx context.Context, hs *http.Server, requests *activeConns, cancelBase context.CancelFunc, timeout time.Duration, logger *slog.Logger) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err == nil {
		return nil
	}
	logger.Warn("shutdown timeout passed: answering the requests still in flight 503",
		slog.Duration("timeout", timeout), slog.Int("in_flight", requests.inFlight()))
	cancelBase()
	gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer gcancel()
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(gctx) }()
	tick := time.NewTicker(drainPollEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-shut:
			if err == nil {
				return nil
			}
			_ = hs.Close()
			if n := requests.inFlight(); n > 0 {
				return fmt.Errorf("shutdown: %d requests still running %s after the shutdown timeout were dropped: %w", n, shutdownGrace, err)
			}
			return nil
		case <-tick.C:
			if requests.inFlight() == 0 {
				_ = hs.Close() // every request answered: only connections without one are left
				<-shut
				return nil
			}
		}
	}
}

// metricsMux serves /metrics and net/http/pprof's /debug/pprof/ endpoints.
func metricsMux(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With(slog.String("service", "shardplan"))
}
