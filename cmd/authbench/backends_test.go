package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParseCounters(t *testing.T) {
	const text = `# HELP authd_db_statements_total SQL statements sent to PostgreSQL.
# TYPE authd_db_statements_total counter
authd_db_statements_total 1.234567e+06
authd_db_round_trips_total 42
authd_redis_commands_total{shard="a"} 9
authd_http_requests_total{route="token",code="200"} 7
`
	s, err := parseCounters(strings.NewReader(text), backendCounters)
	if err != nil {
		t.Fatal(err)
	}
	if s["authd_db_statements_total"] != 1234567 || s["authd_db_round_trips_total"] != 42 || len(s) != 2 {
		t.Errorf("parsed %v", s)
	}
}

// TestBackendCountersExcludePreparation: the counters are read when the
// timed phase starts. A fake /metrics counts token requests as
// "statements": the replay mode redeems every code once while preparing,
// then makes exactly one token request per iteration.
func TestBackendCountersExcludePreparation(t *testing.T) {
	var tokens, authorizes atomic.Int64
	tg := newTargetWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/oauth2/token":
				tokens.Add(1)
			case "/oauth2/authorize":
				authorizes.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "authd_db_statements_total %d\nauthd_db_round_trips_total %d\nauthd_redis_commands_total 5\n", tokens.Load(), tokens.Load()+authorizes.Load())
	}))
	defer metrics.Close()

	res := runJSON(t, "-mode", "replay", "-target", tg.url, "-metrics-url", metrics.URL+"/metrics", "-client-id", tg.public, "-password", testPassword, "-c", "4", "-n", "40")
	if res.Failed != 0 || res.Iterations != 40 {
		t.Fatalf("replay: %+v", res)
	}
	if tokens.Load() <= 40 {
		t.Fatalf("%d token requests: the preparation made none?", tokens.Load())
	}
	if res.DBStatements == nil || *res.DBStatements != 1 || res.DBRoundTrips == nil || *res.DBRoundTrips != 1 {
		t.Errorf("per iteration: statements %v, round trips %v; want 1 and 1 (preparation excluded)", perIter(res.DBStatements), perIter(res.DBRoundTrips))
	}
	if res.RedisCommands == nil || *res.RedisCommands != 0 {
		t.Errorf("redis commands per iteration %s, want 0", perIter(res.RedisCommands))
	}
	if res.RedisRoundTrips != nil {
		t.Errorf("redis round trips per iteration %s, want unknown (not exposed)", perIter(res.RedisRoundTrips))
	}
}
