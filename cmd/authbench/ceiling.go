package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/ops"
	"github.com/authd/authd/storage/postgres"
)

// ---- HTTP ceiling ----

// fixedTokenBody is a token response of the size authd sends for an
// authorization_code exchange with scope "openid offline_access": the same
// members in the same order, tokens of the same lengths, and an ES256 ID
// token of 597 characters (a JWT header with kid, iss, sub, aud, azp, exp,
// iat, auth_time, at_hash and sid): 910 bytes, as authd's replay answer in
// bench/run.sh.
var fixedTokenBody = []byte(`{"access_token":"ory_at_` + strings.Repeat("A", 43) + "." + strings.Repeat("B", 43) +
	`","token_type":"bearer","expires_in":3600,"scope":"openid offline_access","refresh_token":"ory_rt_` + strings.Repeat("C", 43) + "." + strings.Repeat("D", 43) +
	`","id_token":"` + strings.Repeat("h", 106) + "." + strings.Repeat("p", 403) + "." + strings.Repeat("s", 86) + `"}` + "\n")

// fixedTokenHandler is the HTTP ceiling's handler: it reads the form, as
// any token endpoint must, and answers a fixed token-sized JSON with the
// headers authd sends. No routing, logging, storage or crypto.
func fixedTokenHandler(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Content-Length", fixedTokenBodyLen)
	h.Set("X-Request-Id", "ceilingreqid")
	_, _ = w.Write(fixedTokenBody)
}

var fixedTokenBodyLen = strconv.Itoa(len(fixedTokenBody))

// cmdCeilingHTTP serves fixedTokenHandler on a loopback address and, unless
// -serve-only, loads it with the same engine as every mode.
func cmdCeilingHTTP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := options{Mode: "ceiling-http"}
	var listen string
	var serveOnly bool
	fs := flag.NewFlagSet("ceiling-http", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&listen, "listen", "127.0.0.1:0", "loopback address to serve the fixed handler on")
	fs.BoolVar(&serveOnly, "serve-only", false, "only serve (until interrupted); load it from another process with -mode ceiling-http -target URL")
	o.loadFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil || !isLoopbackHost(host) {
		return usagef("-listen: %q must be a loopback address such as 127.0.0.1:0", listen)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return usagef("-listen: %v", err)
	}
	hs := &http.Server{
		Handler:           http.HandlerFunc(fixedTokenHandler),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String()
	if serveOnly {
		fmt.Fprintf(stdout, "serving the fixed token handler on %s (pid %d)\n", url, os.Getpid())
		<-ctx.Done()
		return nil
	}
	o.Target = url
	if err := o.validate(); err != nil {
		return err
	}
	res, err := runLoad(ctx, &o, modes["ceiling-http"], stderr)
	if err != nil {
		return err
	}
	res.Note = "in-process server"
	return o.emit(res, stdout, stderr)
}

// ---- PostgreSQL ceiling ----

// The statements of one authorization code exchange, exactly as
// storage/postgres issues them in a deferred transaction (deferred.go,
// lazytx.go, requests.go, replay.go), in two round trips: BEGIN with the
// code (read FOR UPDATE; its row is also its PKCE session); then the
// code's redemption (checked: no row aborts the transaction), the access
// and refresh tokens, the replay record and COMMIT. Keep them in step with
// those files.
const (
	sqlClientColumns = `c.id, c.secret_hash, c.name, c.redirect_uris, c.grant_types, c.response_types,
		c.scopes, c.token_endpoint_auth_method, c.client_uri, c.logo_uri, c.contacts, c.skip_consent,
		c.created_at, c.updated_at`
	sqlGetCode = `SELECT t.active, t.request_id, t.client_id,
		t.subject, t.requested_at, t.scopes, t.granted_scopes, t.audience, t.granted_audience,
		t.form, t.session, ` + sqlClientColumns + `
		FROM authorize_codes t JOIN clients c ON c.id = t.client_id
		WHERE t.signature = $1 FOR UPDATE OF t`
	sqlInvalidateCode = `WITH checked AS (UPDATE authorize_codes SET active = false
		WHERE signature = $1 AND active RETURNING 1) SELECT 1 / (SELECT count(*) FROM checked)`
	sqlInsertAccess = `INSERT INTO access_tokens (signature, request_id, client_id, subject, requested_at, expires_at, scopes,
		granted_scopes, audience, granted_audience, form, session) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
	sqlInsertRefresh = `INSERT INTO refresh_tokens (signature, request_id, client_id, subject, requested_at, expires_at, scopes,
		granted_scopes, audience, granted_audience, form, session, access_signature) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`
	sqlPutReplay = `WITH ins AS (
			INSERT INTO replay_records (key, request_id, client_id, subject, fingerprint, sealed, window_end, revoked)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		)
		UPDATE replay_records SET revoked = true
		WHERE request_id = $2 AND key <> $1 AND NOT revoked
		RETURNING key`
)

// dbCeiling is the state of a ceiling-db run.
type dbCeiling struct {
	pool    *pgxpool.Pool
	sigs    []string
	session string
	form    string
}

const benchClientID = "authbench-ceiling-client"

// cmdCeilingDB measures the transaction rate of one exchange's SQL on a
// scratch schema (created, migrated with authd's migrations, dropped).
func cmdCeilingDB(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := options{Mode: "ceiling-db"}
	var dbURL string
	var maxConns, prefill int
	fs := flag.NewFlagSet("ceiling-db", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&dbURL, "database-url", os.Getenv("AUTHD_DATABASE_URL"), "PostgreSQL URL on this machine (AUTHD_DATABASE_URL)")
	fs.IntVar(&maxConns, "max-conns", 0, "connection pool size (default: -c, at most 16, the best size measured on 2 cores)")
	fs.IntVar(&prefill, "prefill", 0, "codes inserted before the timed phase (default: -n, or 6000 per second of -d)")
	o.loadFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Target = "http://127.0.0.1" // unused; keeps validate happy
	if err := o.validate(); err != nil {
		return err
	}
	if dbURL == "" {
		return usagef("-database-url: required")
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return usagef("-database-url: %v", err)
	}
	if h := cfg.ConnConfig.Host; !isLoopbackHost(h) && !strings.HasPrefix(h, "/") {
		return usagef("-database-url: %q is not this machine; the ceiling runs only against a local PostgreSQL", h)
	}
	if maxConns <= 0 {
		maxConns = min(o.Concurrency, 16)
	}
	if prefill <= 0 {
		prefill = o.Count
		if prefill == 0 {
			prefill = int(6000 * o.Duration.Seconds())
		}
	}

	var rb [6]byte
	_, _ = rand.Read(rb[:])
	schema := "authbench_ceiling_" + hex.EncodeToString(rb[:])
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("create scratch schema: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(cctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintf(stderr, "authbench: drop scratch schema %s: %v\n", schema, err)
		}
	}()
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = int32(maxConns)
	cfg.MinConns = int32(maxConns)
	// The same counting as authd serve's (ops.DBCounter): the table shows
	// both sides' statements and round trips per iteration.
	count := ops.NewDBCounter()
	cfg.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		return err
	}
	db := &dbCeiling{pool: pool}
	if err := db.seed(ctx, prefill, stderr, o.Quiet); err != nil {
		return err
	}
	m := mode{steps: []string{"exchange-sql"}, iter: db.iter}
	res, err := runLoadWith(ctx, &o, m, stderr, func(r *runner) {
		r.db = db
		r.sample = func(context.Context) (counterSample, error) {
			return counterSample{"authd_db_statements_total": float64(count.Statements()), "authd_db_round_trips_total": float64(count.RoundTrips())}, nil
		}
	})
	if err != nil {
		return err
	}
	res.Target = "postgresql (scratch schema " + schema + ")"
	res.Note = fmt.Sprintf("pool %d connections; two round trips: begin + get code (for update); invalidate code + insert access + insert refresh + put replay record + commit", maxConns)
	res.Prepared = fmt.Sprintf("%d codes (each its own PKCE session) inserted before timing", len(db.sigs))
	return o.emit(res, stdout, stderr)
}

// seed inserts the client and n codes (with their code_challenge, as authd
// stores them), with keys that look like real HMAC signatures (random, 43
// characters).
func (db *dbCeiling) seed(ctx context.Context, n int, stderr io.Writer, quiet bool) error {
	exp := time.Now().Add(time.Hour)
	sess, _ := json.Marshal(map[string]any{
		"expires_at": map[string]time.Time{"access_token": exp, "authorize_code": exp, "refresh_token": exp.Add(720 * time.Hour)},
		"username":   "bench", "subject": "bench", "extra": nil,
	})
	db.session = string(sess)
	db.form = url.Values{
		"client_id": {benchClientID}, "redirect_uri": {"dev.authd.authbench:/callback"}, "response_type": {"code"},
		"scope": {"openid offline_access"}, "state": {"authbench-0-1"}, "grant_type": {"authorization_code"},
		"code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"},
	}.Encode()
	if _, err := db.pool.Exec(ctx, `INSERT INTO clients (id, name, redirect_uris, grant_types, response_types, scopes, token_endpoint_auth_method, skip_consent)
		VALUES ($1, 'authbench', '{dev.authd.authbench:/callback}', '{authorization_code,refresh_token}', '{code}', '{openid,offline_access}', 'none', true)`, benchClientID); err != nil {
		return fmt.Errorf("seed client: %w", err)
	}
	if !quiet {
		fmt.Fprintf(stderr, "ceiling-db: inserting %d codes (not timed)\n", n)
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO authorize_codes (signature, request_id, client_id, subject, requested_at, expires_at,
		scopes, granted_scopes, form, session)
		SELECT substr(translate(encode(sha256(('c' || g)::bytea), 'base64'), '+/', '-_'), 1, 43), 'req-' || g, $1, 'bench', now(),
			now() + interval '1 hour', '{openid,offline_access}', '{openid,offline_access}', $2, $3::jsonb
		FROM generate_series(1, $4) g`, benchClientID, db.form, db.session, n)
	if err != nil {
		return fmt.Errorf("prefill authorize_codes: %w", err)
	}
	if _, err := db.pool.Exec(ctx, "ANALYZE"); err != nil {
		return err
	}
	rows, err := db.pool.Query(ctx, `SELECT signature FROM authorize_codes`)
	if err != nil {
		return err
	}
	db.sigs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return err
}

// scanRequest scans every column of the code's SELECT, as storage/postgres
// does.
func scanRequest(row pgx.Row) error {
	var (
		active                                         bool
		reqID, clientID, subject, form                 string
		requestedAt, createdAt, updatedAt              time.Time
		scopes, granted, aud, grantedAud               []string
		session, secretHash                            []byte
		cID, name, method, clientURI, logoURI          string
		redirects, grants, responses, cScopes, contact []string
		skip                                           bool
	)
	return row.Scan(&active, &reqID, &clientID, &subject, &requestedAt, &scopes, &granted, &aud, &grantedAud,
		&form, &session, &cID, &secretHash, &name, &redirects, &grants, &responses, &cScopes, &method, &clientURI, &logoURI,
		&contact, &skip, &createdAt, &updatedAt)
}

func randomSig() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sealedSize is about the size of a sealed token response with an ES256
// ID token (exchangecache.Seal of oauth's sealedResponse).
const sealedSize = 900

// iter is one exchange's statements, in authd's two round trips.
func (db *dbCeiling) iter(ctx context.Context, w *worker) error {
	i := w.r.codeNext.Add(1) - 1
	if i >= int64(len(db.sigs)) {
		return errExhausted
	}
	sig := db.sigs[i]
	return w.step("exchange-sql", func() error {
		conn, err := db.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release() // a connection left in a transaction is closed, not reused
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(sqlGetCode, sig)
		br := conn.SendBatch(ctx, b)
		_, err = br.Exec()
		if err == nil {
			err = scanRequest(br.QueryRow())
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("begin, get code: %w", err)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		scopes := []string{"openid", "offline_access"}
		access := randomSig()
		reqID := "req-" + sig[:8]
		sealed := make([]byte, sealedSize)
		_, _ = rand.Read(sealed)
		b = &pgx.Batch{}
		b.Queue(sqlInvalidateCode, sig)
		b.Queue(sqlInsertAccess, access, reqID, benchClientID, "bench", now, now.Add(time.Hour),
			scopes, scopes, []string{}, []string{}, db.form, db.session)
		b.Queue(sqlInsertRefresh, randomSig(), reqID, benchClientID, "bench", now, now.Add(720*time.Hour),
			scopes, scopes, []string{}, []string{}, db.form, db.session, access)
		b.Queue(sqlPutReplay, "c:"+sig, reqID, benchClientID, "bench", randomSig(), sealed, now.Add(30*time.Second), false)
		b.Queue("COMMIT")
		br = conn.SendBatch(ctx, b)
		for _, what := range []string{"invalidate code", "insert access", "insert refresh", "put replay record", "commit"} {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		return br.Close()
	})
}

// isLoopbackHost reports whether host is a loopback IP or "localhost".
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
