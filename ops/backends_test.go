package ops_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/ops"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// gathered returns the value of each unlabelled counter in reg.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestDBCounter checks the counting rules on a real PostgreSQL: a statement
// is one round trip, a batch one round trip for all its statements, BEGIN
// and COMMIT are statements, a first preparation is a round trip.
func TestDBCounter(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.BaseDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	dbc := ops.NewDBCounter()
	cfg.ConnConfig.Tracer = dbc
	cfg.MaxConns = 1 // one connection: its statement cache is warm after the first pass
	ctx := t.Context()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(dbc)

	work := func() {
		var n int
		if err := pool.QueryRow(ctx, "SELECT $1::int", 1).Scan(&n); err != nil { // 1 statement, 1 round trip
			t.Fatal(err)
		}
		b := &pgx.Batch{} // 3 statements, 1 round trip
		for i := range 3 {
			b.Queue("SELECT $1::int + 1", i)
		}
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { // BEGIN, SELECT, COMMIT: 3 and 3
			return tx.QueryRow(ctx, "SELECT $1::int + 2", 1).Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	work() // prepares what the connection has not seen
	cold := dbc.RoundTrips()
	if got := dbc.Statements(); got != 7 {
		t.Errorf("first pass: %d statements, want 7", got)
	}
	if cold <= 5 {
		t.Errorf("first pass: %d round trips, want more than 5 (preparations)", cold)
	}
	s0, r0 := dbc.Statements(), dbc.RoundTrips()
	work()
	if s, r := dbc.Statements()-s0, dbc.RoundTrips()-r0; s != 7 || r != 5 {
		t.Errorf("warm pass: %d statements, %d round trips; want 7 and 5", s, r)
	}
	m := gathered(t, reg)
	if m["authd_db_statements_total"] != float64(dbc.Statements()) || m["authd_db_round_trips_total"] != float64(dbc.RoundTrips()) {
		t.Errorf("metrics %v, counters %d/%d", m, dbc.Statements(), dbc.RoundTrips())
	}
}

// TestRedisCounter: a command is one round trip, a pipeline one round trip
// for all its commands; a script's EVALSHA is one command.
func TestRedisCounter(t *testing.T) {
	// One connection: its handshake (HELLO, CLIENT SETINFO: counted too)
	// happens in the first pass only.
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t), PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	rc := ops.NewRedisCounter()
	client.AddHook(rc)
	reg := prometheus.NewRegistry()
	reg.MustRegister(rc)
	ctx := context.Background()
	key := "authd:test:ops-counter:" + t.Name()
	t.Cleanup(func() { client.Del(context.Background(), key) })

	script := redis.NewScript(`return 1`)
	work := func() {
		if err := client.Ping(ctx).Err(); err != nil { // 1 and 1
			t.Fatal(err)
		}
		if _, err := client.Pipelined(ctx, func(p redis.Pipeliner) error { // 3 and 1
			p.Set(ctx, key, "1", 0)
			p.Incr(ctx, key)
			p.Get(ctx, key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := script.Run(ctx, client, []string{key}).Err(); err != nil { // EVALSHA (and EVAL after NOSCRIPT the first time)
			t.Fatal(err)
		}
	}
	work()
	if rc.Commands() < 5 || rc.RoundTrips() < 3 {
		t.Errorf("first pass: %d commands, %d round trips; want at least 5 and 3", rc.Commands(), rc.RoundTrips())
	}
	c0, r0 := rc.Commands(), rc.RoundTrips()
	work()
	if c, r := rc.Commands()-c0, rc.RoundTrips()-r0; c != 5 || r != 3 {
		t.Errorf("warm pass: %d commands, %d round trips; want 5 and 3", c, r)
	}
	m := gathered(t, reg)
	if m["authd_redis_commands_total"] != float64(rc.Commands()) || m["authd_redis_round_trips_total"] != float64(rc.RoundTrips()) {
		t.Errorf("metrics %v, counters %d/%d", m, rc.Commands(), rc.RoundTrips())
	}
}

// BenchmarkDBCounter shows the tracer's cost per statement (no allocation).
func BenchmarkDBCounter(b *testing.B) {
	dbc := ops.NewDBCounter()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ctx2 := dbc.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "SELECT 1"})
		dbc.TraceQueryEnd(ctx2, nil, pgx.TraceQueryEndData{})
	}
}
