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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/shardplan/shardplan/api"
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

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)

	// The plan cache: in-process LRU, or Redis when REDIS_URL / SHARDPLAN_REDIS_ADDRS is
	// set. It does not connect here: a Redis that is down means misses and a failing
	// "cache" readiness check, never a failed start or request. Closed after the drain.
	memo, cacheCheck, err := openCache(cfg, reg, logger)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer memo.Close() // early returns; idempotent after the shutdown's Close
	logger.LogAttrs(ctx, slog.LevelInfo, "plan cache", slog.Any("cache", cfg.cacheConfig()), slog.String("backend", memo.Backend()))
	checks := map[string]api.Check{"cache": cacheCheck}

	keys, err := cfg.apiKeys()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var tlsConfig *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("config: SHARDPLAN_TLS_CERT/SHARDPLAN_TLS_KEY: %w", err)
		}
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}

	srv, err := api.New(api.Deps{
		Logger:   logger,
		Limits:   cfg.limits(),
		Registry: reg,
		Memo:     memo,
		Checks:   checks,
		OpenAPI:  openapi.JSON,
		OpenAPI3: openapi.JSON3,
		Access:   api.Access{APIKeys: keys, CORSOrigins: splitList(cfg.CORSOrigins), MetricsElsewhere: cfg.MetricsAddr != ""},
	})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (SHARDPLAN_ADDR): %w", cfg.Addr, err)
	}
	addr := ln.Addr().String()
	logger.Info("listening", slog.String("addr", addr), slog.Bool("tls", tlsConfig != nil), slog.Bool("api_keys", len(keys) > 0))
	fmt.Fprintf(stdout, "listening on %s\n", addr)

	// /metrics and pprof on their own address (bind it where only operators reach it).
	var ms *http.Server
	var mln net.Listener
	if cfg.MetricsAddr != "" {
		if mln, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			_ = ln.Close()
			return fmt.Errorf("listen on %s (SHARDPLAN_METRICS_ADDR): %w", cfg.MetricsAddr, err)
		}
		ms = &http.Server{
			Handler:           metricsMux(srv.Metrics()),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      2 * time.Minute, // CPU profiles take their seconds parameter
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
		logger.Info("metrics listening", slog.String("addr", mln.Addr().String()))
		fmt.Fprintf(stdout, "metrics listening on %s\n", mln.Addr())
	}

	// baseCtx is every request's parent; it is cancelled when the drain times out, so
	// in-flight work that polls ctx stops instead of being cut off mid-write.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      cfg.RequestTimeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		TLSConfig:         tlsConfig,
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		serve := hs.Serve
		if tlsConfig != nil {
			serve = func(l net.Listener) error { return hs.ServeTLS(l, "", "") }
		}
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	if ms != nil {
		g.Go(func() error {
			if err := ms.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve metrics: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		stop() // a second SIGINT/SIGTERM now kills the process
		logger.Info("shutting down", slog.Duration("drain_delay", cfg.DrainDelay), slog.Duration("timeout", cfg.ShutdownTimeout))
		srv.SetDraining(true)
		if cfg.DrainDelay > 0 {
			// Keep serving (readiness 503) so load balancers stop routing here first.
			time.Sleep(cfg.DrainDelay)
		}
		err := drain(ctx, hs, cancelBase, cfg.ShutdownTimeout, logger)
		if ms != nil {
			// Metrics stay up through the drain; they go with the API.
			_ = ms.Close()
		}
		// Close the cache (Redis) last: after the last request, waiting for its pending writes.
		if cerr := memo.Close(); cerr != nil {
			logger.Warn("closing the plan cache", slog.String("error", cerr.Error()))
		}
		logger.Info("stopped")
		return err
	})
	return g.Wait()
}

// shutdownGrace is how long, after the shutdown timeout, requests still in flight get to
// write their 503 once their contexts are cancelled.
const shutdownGrace = 2 * time.Second

// drain stops hs: the listener closes and in-flight requests get timeout to finish. Those
// still running then have their contexts cancelled (cancelBase) and answer 503
// shutting-down (requests waiting for a slot or a body included) within shutdownGrace.
// It returns nil when every request was answered, and an error only when connections
// had to be dropped without an answer.
func drain(ctx context.Context, hs *http.Server, cancelBase context.CancelFunc, timeout time.Duration, logger *slog.Logger) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err == nil {
		return nil
	}
	logger.Warn("shutdown timeout passed: answering the requests still in flight 503", slog.Duration("timeout", timeout))
	cancelBase()
	gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer gcancel()
	if err := hs.Shutdown(gctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("shutdown: requests still running %s after the shutdown timeout were dropped: %w", shutdownGrace, err)
	}
	return nil
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
