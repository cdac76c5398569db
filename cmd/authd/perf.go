package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"
)

// defaultPoolMaxConns is the PostgreSQL pool size when the database URL
// has no pool_max_conns: 4 per CPU, at least 8. pgxpool's own default,
// max(4, CPUs), leaves a 2-core node waiting for connections while
// PostgreSQL has capacity left (exchanges/s about halved); more than this
// only adds contention inside PostgreSQL (docs/benchmarks.md).
func defaultPoolMaxConns() int32 {
	return int32(max(8, 4*runtime.GOMAXPROCS(0)))
}

// perfConfig holds the performance settings: the client cache and the
// opt-in profiling listener.
type perfConfig struct {
	// ClientCacheTTL is how long a client read from PostgreSQL is reused
	// in process (oauth.Config.ClientCacheTTL); 0 disables.
	ClientCacheTTL time.Duration
	// Addr is the loopback address of /debug/pprof/ (AUTHD_PPROF_ADDR).
	Addr string
}

func (p *perfConfig) flags(fs *flag.FlagSet) {
	fs.DurationVar(&p.ClientCacheTTL, "client-cache-ttl", 2*time.Second, "how long a client read from the database is reused by this process; other replicas see client changes within it; 0 disables (AUTHD_CLIENT_CACHE_TTL)")
	fs.StringVar(&p.Addr, "pprof-addr", "", "loopback address for Go's /debug/pprof/ endpoints, e.g. 127.0.0.1:6060; empty disables (AUTHD_PPROF_ADDR)")
}

// validate checks the settings. It refuses a non-loopback pprof address:
// profiles expose memory contents and must never be reachable from the
// network.
func (p *perfConfig) validate() error {
	if p.ClientCacheTTL < 0 || p.ClientCacheTTL > time.Minute {
		return usagef("AUTHD_CLIENT_CACHE_TTL: must be between 0 (off) and 1m (got %s)", p.ClientCacheTTL)
	}
	if p.Addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(p.Addr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || !ip.IsLoopback() {
		return usagef("AUTHD_PPROF_ADDR: %q must be a loopback IP and port, such as 127.0.0.1:6060", p.Addr)
	}
	return nil
}

// startPprof serves /debug/pprof/ on p.Addr when set, on its own listener
// and mux (never on the public one). stop shuts it down.
func startPprof(p perfConfig, log *slog.Logger) (stop func(), err error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	if p.Addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return nil, usagef("AUTHD_PPROF_ADDR: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof listener stopped", "error", err)
		}
	}()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}
