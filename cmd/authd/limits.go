package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/limits"
)

// openLimits returns the abuse budgets every entry point spends (package
// limits): kept in Redis when AUTHD_REDIS_URL names one, so every replica
// spends one budget, else in this process. The limiter has a Redis client
// of its own (the same bounds as the replay cache's: one call is bounded,
// never retried); when Redis does not answer it falls back to per-process
// budgets, counted in authd_limits_fallback_total.
func openLimits(redisURL string, log *slog.Logger, reg prometheus.Registerer) (*limits.Limiter, func(), error) {
	if redisURL == "" || redisURL == "memory" {
		return limits.New(limits.Options{Logger: log, Registerer: reg}), func() {}, nil
	}
	opts, err := parseRedisURL(redisURL)
	if err != nil {
		return nil, nil, usagef("AUTHD_REDIS_URL: %v", err)
	}
	client := newRedisClient(opts) // bounded, and following a Cluster's failovers
	l := limits.New(limits.Options{Redis: client, Prefix: "authd:", Logger: log, Registerer: reg})
	return l, func() { _ = client.Close() }, nil
}
