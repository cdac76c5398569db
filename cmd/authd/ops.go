package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/ops"
	"github.com/authd/authd/storage"
)

// opsConfig holds the settings of the operations listener: /metrics,
// /healthz, /readyz and pprof (package ops).
type opsConfig struct {
	Addr       string        // AUTHD_OPS_ADDR; "off" disables the listener
	Pprof      string        // AUTHD_PPROF: on or off
	DrainDelay time.Duration // AUTHD_DRAIN_DELAY: readiness 503 before the listener closes
	// fallback (dev, Addr not set): if Addr is taken, listen on a free
	// port of the same host instead, and say so.
	fallback bool
}

// defaultOpsAddr is the operations listener's default address. The
// Kubernetes manifests (deploy/) name its port; a test keeps them in step.
const defaultOpsAddr = "127.0.0.1:9090"

func (o *opsConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.Addr, "ops-addr", defaultOpsAddr, "address of the operations listener: /metrics, /healthz, /readyz and pprof; \"off\" disables it (AUTHD_OPS_ADDR)")
	fs.StringVar(&o.Pprof, "pprof", "off", "serve Go's /debug/pprof/ on the operations listener, to loopback callers only: on or off (AUTHD_PPROF)")
	fs.DurationVar(&o.DrainDelay, "drain-delay", 5*time.Second, "on SIGTERM, how long /readyz answers 503 while requests are still served, before the listener closes (AUTHD_DRAIN_DELAY); 0 under dev")
}

// validate checks the settings; getenv finds the retired AUTHD_PPROF_ADDR.
func (o *opsConfig) validate(getenv func(string) string) error {
	var errs problems
	if v := getenv("AUTHD_PPROF_ADDR"); v != "" {
		errs.addf("AUTHD_PPROF_ADDR: replaced by AUTHD_PPROF=on, which serves /debug/pprof/ on AUTHD_OPS_ADDR (to loopback callers only); unset AUTHD_PPROF_ADDR")
	}
	if o.Pprof != "on" && o.Pprof != "off" {
		errs.addf("AUTHD_PPROF: %q must be on or off", o.Pprof)
	}
	if o.Addr != "off" {
		if _, _, err := net.SplitHostPort(o.Addr); err != nil {
			errs.addf("AUTHD_OPS_ADDR: %q must be host:port (e.g. 127.0.0.1:9090, or :9090 in a container) or off", o.Addr)
		}
	}
	if o.DrainDelay < 0 || o.DrainDelay > 5*time.Minute {
		errs.addf("AUTHD_DRAIN_DELAY: must be between 0 and 5m (got %s)", o.DrainDelay)
	}
	return errs.err()
}

// opsListener is the running operations listener.
type opsListener struct {
	health *ops.Server
	hs     *http.Server
	done   chan struct{}
	addr   string // where it listens, or "off"
}

// startOps serves the operations endpoints for store and cache, with the
// metrics of reg. With Addr "off" it still returns a readiness state (for
// Drain) but listens nowhere.
func startOps(o opsConfig, store storage.Store, cache exchangecache.Cache, reg *prometheus.Registry, log *slog.Logger) (*opsListener, error) {
	cfg := ops.Config{Gatherer: reg, Registerer: reg, Database: store, Pprof: o.Pprof == "on", Logger: log}
	if p, ok := cache.(ops.Pinger); ok {
		cfg.Cache = p // Redis; the in-process cache cannot be down
	}
	health, err := ops.New(cfg)
	if err != nil {
		return nil, err
	}
	l := &opsListener{health: health, done: make(chan struct{}), addr: "off"}
	if o.Addr == "off" {
		close(l.done)
		return l, nil
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil && o.fallback && errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(o.Addr)
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
			log.Warn("the operations address is taken; listening on a free port instead (set AUTHD_OPS_ADDR to choose one)",
				"taken", o.Addr, "addr", ln.Addr().String())
		}
	}
	if err != nil {
		return nil, usagef("AUTHD_OPS_ADDR (-ops-addr): %v", err)
	}
	l.addr = ln.Addr().String()
	l.hs = &http.Server{
		Handler:           health.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(l.done)
		if err := l.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("operations listener stopped", "error", err)
		}
	}()
	log.Info("operations listening", "addr", ln.Addr().String(), "pprof", o.Pprof)
	return l, nil
}

// stop closes the operations listener (after the public one: probes keep
// answering 503 while the process drains).
func (l *opsListener) stop() {
	if l.hs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.hs.Shutdown(ctx)
	<-l.done
}
