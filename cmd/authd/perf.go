package main

import (
	"flag"
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

// perfConfig holds the performance settings: the client cache.
type perfConfig struct {
	// ClientCacheTTL is how long a client read from PostgreSQL is reused
	// in process (storage.CachingStore, built in newServer); 0 disables.
	ClientCacheTTL time.Duration
}

func (p *perfConfig) flags(fs *flag.FlagSet) {
	fs.DurationVar(&p.ClientCacheTTL, "client-cache-ttl", 2*time.Second, "how long a client read from the database is reused by this process; other replicas see client changes within it; 0 disables (AUTHD_CLIENT_CACHE_TTL)")
}

// validate checks the settings.
func (p *perfConfig) validate() error {
	var errs problems
	if p.ClientCacheTTL < 0 || p.ClientCacheTTL > time.Minute {
		errs.addf("AUTHD_CLIENT_CACHE_TTL: must be between 0 (off) and 1m (got %s)", p.ClientCacheTTL)
	}
	return errs.err()
}
