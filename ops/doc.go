// Package ops serves authd's operations endpoints on a listener of their
// own (AUTHD_OPS_ADDR): /metrics, /healthz, /readyz and, when enabled,
// /debug/pprof/ (answered to loopback callers only).
//
// Readiness follows docs/architecture.md's principle that Redis is an accelerator:
// /readyz is 200 while the database answers, with the replay cache's state
// in the body ("cache":"ok" or "cache":"degraded") and in the metric
// authd_dependency_up{dependency="replay_cache"}; it is 503 only when the
// database is unreachable or the process is draining ([Server.Drain], on
// SIGTERM). A dependency that is down is logged at most once per
// [Config.WarnEvery] (10 s), however often the probe runs.
//
// For Redis, [RedisHealth] is the cache's Pinger: a PING through a Redis
// Cluster client reaches one node and answered "ok" while a dead master's
// slots failed every call, so it also asks every master, and reports the
// calls' own failures of the last seconds.
//
// The package must never be mounted on the public listener: profiles expose
// memory, and metrics describe traffic.
package ops
