package ops

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// sentCounter counts what is sent to a backend — items (statements,
// commands) and the round trips they take — and exposes both as
// Prometheus counters (a prometheus.Collector). DBCounter and RedisCounter
// embed it.
type sentCounter struct {
	items      atomic.Uint64
	roundTrips atomic.Uint64
	metrics    [2]prometheus.CounterFunc
}

// init names the two counters.
func (c *sentCounter) init(items, roundTrips prometheus.CounterOpts) {
	c.metrics = [2]prometheus.CounterFunc{
		prometheus.NewCounterFunc(items, func() float64 { return float64(c.items.Load()) }),
		prometheus.NewCounterFunc(roundTrips, func() float64 { return float64(c.roundTrips.Load()) }),
	}
}

// RoundTrips returns the number of round trips counted so far.
func (c *sentCounter) RoundTrips() uint64 { return c.roundTrips.Load() }

// Describe implements prometheus.Collector.
func (c *sentCounter) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *sentCounter) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics {
		m.Collect(ch)
	}
}

// DBCounter counts what authd sends to PostgreSQL: statements, and the
// network round trips they take. Set it as the pgx tracer
// (pgxpool.Config.ConnConfig.Tracer) and register it on the metrics
// registry: authd_db_statements_total, authd_db_round_trips_total.
//
// Exec, Query and QueryRow are one statement and one round trip each
// (BEGIN and COMMIT, which pgx sends with Exec, included); a pgx.Batch is
// one round trip carrying Len() statements; a CopyFrom is one statement
// and one round trip. Preparing a statement the connection has not seen
// (pgx's statement cache, once per statement and connection) is one more
// round trip and no statement; the preparation pgx pipelines in front of a
// batch is not reported by pgx and is not counted, nor are the pool's
// liveness pings. Counting is two atomic adds per call, no allocation.
type DBCounter struct {
	sentCounter // items: statements
}

// NewDBCounter returns a DBCounter at zero.
func NewDBCounter() *DBCounter {
	c := &DBCounter{}
	c.init(prometheus.CounterOpts{
		Name: "authd_db_statements_total",
		Help: "SQL statements sent to PostgreSQL (BEGIN and COMMIT included; a batch counts each statement it carries).",
	}, prometheus.CounterOpts{
		Name: "authd_db_round_trips_total",
		Help: "Network round trips to PostgreSQL for statements (a batch is one; preparing a statement new to a connection is one more).",
	})
	return c
}

// Statements returns the number of statements counted so far.
func (c *DBCounter) Statements() uint64 { return c.items.Load() }

// TraceQueryStart implements pgx.QueryTracer (Exec, Query, QueryRow).
func (c *DBCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.items.Add(1)
	c.roundTrips.Add(1)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *DBCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer: one round trip, Len()
// statements.
func (c *DBCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if data.Batch != nil {
		c.items.Add(uint64(data.Batch.Len()))
	}
	c.roundTrips.Add(1)
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *DBCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *DBCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TraceCopyFromStart implements pgx.CopyFromTracer: one statement, counted
// as one round trip however many rows it streams.
func (c *DBCounter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.items.Add(1)
	c.roundTrips.Add(1)
	return ctx
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (c *DBCounter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// TracePrepareStart implements pgx.PrepareTracer.
func (c *DBCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

// TracePrepareEnd implements pgx.PrepareTracer: a preparation that went to
// the server (not one the connection already had) is a round trip.
func (c *DBCounter) TracePrepareEnd(_ context.Context, _ *pgx.Conn, data pgx.TracePrepareEndData) {
	if !data.AlreadyPrepared {
		c.roundTrips.Add(1)
	}
}

var (
	_ pgx.QueryTracer    = (*DBCounter)(nil)
	_ pgx.BatchTracer    = (*DBCounter)(nil)
	_ pgx.CopyFromTracer = (*DBCounter)(nil)
	_ pgx.PrepareTracer  = (*DBCounter)(nil)
)

// RedisCounter counts the commands authd sends to Redis and the round
// trips they take. Add it to the client (redis.UniversalClient.AddHook)
// and register it on the metrics registry: authd_redis_commands_total,
// authd_redis_round_trips_total.
//
// A command is one command and one round trip (a script's EVALSHA, and
// the EVAL go-redis sends after NOSCRIPT, are one each); a pipeline or a
// MULTI/EXEC transaction is one round trip carrying each of its commands.
// A new connection's handshake (HELLO, CLIENT SETINFO) passes the hook too
// and is counted.
// On a Redis Cluster client the hook sees the client's commands, before
// they are split between nodes: a pipeline spanning nodes still counts as
// one round trip. Counting is two atomic adds per call, no allocation.
type RedisCounter struct {
	sentCounter // items: commands
}

// NewRedisCounter returns a RedisCounter at zero.
func NewRedisCounter() *RedisCounter {
	c := &RedisCounter{}
	c.init(prometheus.CounterOpts{
		Name: "authd_redis_commands_total",
		Help: "Commands sent to Redis (each command of a pipeline counted).",
	}, prometheus.CounterOpts{
		Name: "authd_redis_round_trips_total",
		Help: "Network round trips to Redis (a pipeline is one).",
	})
	return c
}

// Commands returns the number of commands counted so far.
func (c *RedisCounter) Commands() uint64 { return c.items.Load() }

// DialHook implements redis.Hook.
func (c *RedisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook: one command, one round trip.
func (c *RedisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.items.Add(1)
		c.roundTrips.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook: len(cmds) commands, one round
// trip.
func (c *RedisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.items.Add(uint64(len(cmds)))
		c.roundTrips.Add(1)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*RedisCounter)(nil)
