package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// The scale-out test (issue 14 item 5): three "authd serve" processes on
// one PostgreSQL schema and one Redis Cluster, behind a round-robin proxy,
// under a mixed workload, while one Redis node and one authd are killed
// with SIGKILL and PostgreSQL is cut off and restored.

// Headers between the workload and the test's front proxy.
const (
	// hdrAvoid names a backend (its index) the proxy must not pick: a
	// retry sets it to the backend of the attempt it repeats, so it lands
	// on another replica.
	hdrAvoid = "X-Scaleout-Avoid"
	// hdrPin names the backend (its index) a request should go to, if it
	// is alive: concurrent duplicates are pinned to different replicas.
	hdrPin = "X-Scaleout-Pin"
	// hdrBackend is set on every proxied response: the backend's index.
	hdrBackend = "X-Scaleout-Backend"
	// hdrProxyError is set on the proxy's own 502, after a connection
	// error to a backend.
	hdrProxyError = "X-Scaleout-Proxy-Error"
)

// frontProxy is a round-robin reverse proxy over the authd processes. A
// backend that gives a connection error is marked dead and no longer
// picked; the request that hit the error gets a 502 marked with
// hdrProxyError.
type frontProxy struct {
	backends []*httputil.ReverseProxy
	dead     []atomic.Bool
	next     atomic.Uint64
	// connErrors counts connection errors by backend.
	connErrors []atomic.Int64
	// served counts proxied requests by backend.
	served []atomic.Int64
}

// newFrontProxy returns a proxy for the given base URLs.
func newFrontProxy(bases []string) *frontProxy {
	p := &frontProxy{dead: make([]atomic.Bool, len(bases)), connErrors: make([]atomic.Int64, len(bases)),
		served: make([]atomic.Int64, len(bases))}
	transport := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	for i, b := range bases {
		u, _ := url.Parse(b)
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(u)
				pr.Out.Host = pr.In.Host // authd sees the issuer's host, as behind a real load balancer
				pr.Out.Header.Del(hdrAvoid)
				pr.Out.Header.Del(hdrPin)
			},
			Transport: transport,
			ModifyResponse: func(resp *http.Response) error {
				resp.Header.Set(hdrBackend, strconv.Itoa(i))
				return nil
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				p.connErrors[i].Add(1)
				p.dead[i].Store(true)
				w.Header().Set(hdrBackend, strconv.Itoa(i))
				w.Header().Set(hdrProxyError, "1")
				http.Error(w, "bad gateway: "+err.Error(), http.StatusBadGateway)
			},
		}
		p.backends = append(p.backends, rp)
	}
	return p
}

// ServeHTTP sends the request to the backend in hdrPin if it is alive, else
// to the next live backend other than the one in hdrAvoid.
func (p *frontProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	avoid, err := strconv.Atoi(r.Header.Get(hdrAvoid))
	if err != nil {
		avoid = -1
	}
	n := uint64(len(p.backends))
	if pin, err := strconv.Atoi(r.Header.Get(hdrPin)); err == nil && pin >= 0 && pin < len(p.backends) && !p.dead[pin].Load() {
		p.served[pin].Add(1)
		p.backends[pin].ServeHTTP(w, r)
		return
	}
	for range 2 * n {
		i := int(p.next.Add(1) % n)
		if i == avoid || p.dead[i].Load() {
			continue
		}
		p.served[i].Add(1)
		p.backends[i].ServeHTTP(w, r)
		return
	}
	http.Error(w, "no live backend", http.StatusServiceUnavailable)
}

// scaleStats collects what the workload saw. Every answer is recorded
// with its kind (signin, exchange, exchange_retry, …) and classified.
type scaleStats struct {
	mu sync.Mutex
	// requests by kind.
	requests map[string]int
	// answers by kind and status ("exchange 200").
	answers map[string]int
	// errors by class ("502 dead backend", "503 database cut", …).
	errors map[string]int
	// violations: answers the test does not allow.
	violations []string
	// retriesAcross counts retries answered by another replica than the
	// attempt they repeated, by kind.
	retriesAcross map[string]int
	// slowest answer, and its kind.
	slowest     time.Duration
	slowestKind string

	start time.Time // the test's start, for the times of violations

	codes     int // codes redeemed (a 200 seen for them)
	refreshes int // refresh tokens rotated (a 200 seen)
	revoked   int // grants revoked
}

func newScaleStats() *scaleStats {
	return &scaleStats{start: time.Now(), requests: map[string]int{}, answers: map[string]int{}, errors: map[string]int{}, retriesAcross: map[string]int{}}
}

func (s *scaleStats) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.violations) < 50 {
		s.violations = append(s.violations, fmt.Sprintf("%5.2fs ", time.Since(s.start).Seconds())+fmt.Sprintf(format, args...))
	}
}

func (s *scaleStats) add(field *int) {
	s.mu.Lock()
	*field++
	s.mu.Unlock()
}

// scaleAnswer is one response through the proxy.
type scaleAnswer struct {
	status  int
	backend int // -1 when unknown
	proxy   bool
	body    []byte
	json    map[string]any
	header  http.Header
	err     error
}

// retryable reports whether the answer is a failure the client repeats:
// a connection error, the proxy's 502 for a dead backend, or a 503.
func (a scaleAnswer) retryable() bool {
	return a.err != nil || a.status == http.StatusBadGateway || a.status == http.StatusServiceUnavailable
}

// scaleRun is the running test: the proxy's URL, the outages and the
// stats.
type scaleRun struct {
	base   string // the proxy's URL
	stats  *scaleStats
	client *http.Client // no cookies, no redirects

	mu sync.Mutex
	// cutFrom and cutTo bracket the PostgreSQL outage (cutTo zero while
	// it lasts); a 503 is allowed only within it (plus recovery grace).
	cutFrom, cutTo time.Time
	// killedAt is when the authd process was killed, and which.
	killedAt time.Time
	killed   int
	// noRevoke: iterations never revoke (TestClusterFailover: see there).
	noRevoke bool
}

// pgRecoveryGrace is how long after PostgreSQL is restored a 503 still
// counts as part of the outage (the pool reconnecting).
const pgRecoveryGrace = 2 * time.Second

// inCut reports whether a request from start to end overlaps the
// PostgreSQL outage or its grace.
func (r *scaleRun) inCut(start, end time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cutFrom.IsZero() || end.Before(r.cutFrom) {
		return false
	}
	return r.cutTo.IsZero() || start.Before(r.cutTo.Add(pgRecoveryGrace))
}

// do sends one request through the proxy and classifies the answer:
// 502 from the proxy (dead backend) and 503 during the database outage
// are allowed failures, counted by class; any other 5xx, and a 503
// outside the outage, is a violation.
func (r *scaleRun) do(kind string, c *http.Client, req *http.Request, avoid int) scaleAnswer {
	if avoid >= 0 {
		req.Header.Set(hdrAvoid, strconv.Itoa(avoid))
	}
	start := time.Now()
	resp, err := c.Do(req)
	end := time.Now()
	a := scaleAnswer{backend: -1, err: err}
	st := r.stats
	st.mu.Lock()
	st.requests[kind]++
	if d := end.Sub(start); d > st.slowest {
		st.slowest, st.slowestKind = d, kind
	}
	st.mu.Unlock()
	if err != nil {
		st.mu.Lock()
		st.errors["client error"]++
		st.mu.Unlock()
		r.stats.violate("%s: %v", kind, err)
		return a
	}
	a.status, a.header = resp.StatusCode, resp.Header
	a.body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	_ = json.Unmarshal(a.body, &a.json)
	if b, err := strconv.Atoi(resp.Header.Get(hdrBackend)); err == nil {
		a.backend = b
	}
	a.proxy = resp.Header.Get(hdrProxyError) != ""
	st.mu.Lock()
	st.answers[fmt.Sprintf("%s %d", kind, a.status)]++
	st.mu.Unlock()
	if a.status < 500 {
		return a
	}
	class := ""
	switch {
	case a.proxy && a.status == http.StatusBadGateway:
		class = "502 connection error (dead authd)"
		r.mu.Lock()
		ok := !r.killedAt.IsZero() && a.backend == r.killed
		r.mu.Unlock()
		if !ok {
			r.stats.violate("%s: connection error to live backend %d: %s", kind, a.backend, a.body)
		}
	case a.status == http.StatusServiceUnavailable && r.inCut(start, end):
		class = "503 during the database outage"
		if a.header.Get("Retry-After") == "" {
			r.stats.violate("%s: 503 without Retry-After: %s", kind, a.body)
		}
	default:
		class = fmt.Sprintf("%d outside the outages", a.status)
		r.stats.violate("%s: %d from backend %d at %s: %s", kind, a.status, a.backend, start.Format("15:04:05.000"), strings.TrimSpace(string(a.body)))
	}
	st.mu.Lock()
	st.errors[class]++
	st.mu.Unlock()
	return a
}

// postForm sends a form POST (kind names it in the figures).
func (r *scaleRun) postForm(kind, path string, form url.Values, avoid int, bearer string) scaleAnswer {
	return r.postPinned(kind, path, form, avoid, -1, bearer)
}

// postPinned is postForm pinned to a backend (-1: round robin).
func (r *scaleRun) postPinned(kind, path string, form url.Values, avoid, pin int, bearer string) scaleAnswer {
	req, _ := http.NewRequest(http.MethodPost, r.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if pin >= 0 {
		req.Header.Set(hdrPin, strconv.Itoa(pin))
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return r.do(kind, r.client, req, avoid)
}

// until repeats the request until it gets an answer that is not
// retryable (or the deadline passes), each retry avoiding the backend of
// the first attempt (or, for a first attempt, the previous one). It
// returns the last answer.
func (r *scaleRun) until(kind, path string, form url.Values, avoid int, bearer string) scaleAnswer {
	deadline := time.Now().Add(15 * time.Second)
	first := avoid < 0
	for {
		a := r.postForm(kind, path, form, avoid, bearer)
		if !a.retryable() || time.Now().After(deadline) {
			return a
		}
		if first {
			// A first attempt's retry goes elsewhere; a retry's retries
			// keep avoiding the replica of the attempt they repeat (the
			// proxy skips dead backends by itself).
			avoid = a.backend
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const (
	scaleClient   = "scale-app"
	scaleRedirect = "com.example.scale:/cb"
	scaleUser     = "scale"
	scalePassword = "scale-password-1"
	scaleAdmin    = "scale-admin-token"
)

// signIn runs authorize → login form → code through the proxy with a new
// browser (cookie jar); the login form goes to another replica than the
// page. A failure the user would retry (a dead replica, the database
// outage) restarts it; it returns "" after recording a violation.
func (r *scaleRun) signIn(verifier, state string) string {
	deadline := time.Now().Add(15 * time.Second)
	q := url.Values{"response_type": {"code"}, "client_id": {scaleClient}, "redirect_uri": {scaleRedirect},
		"scope": {"openid offline_access"}, "state": {state},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}
	for time.Now().Before(deadline) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: r.client.Transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest(http.MethodGet, r.base+"/oauth2/authorize?"+q.Encode(), nil)
		a := r.do("signin_page", c, req, -1)
		if a.retryable() {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		csrf, action := csrfRe.FindSubmatch(a.body), actionRe.FindSubmatch(a.body)
		if a.status != 200 || csrf == nil || action == nil {
			r.stats.violate("sign-in page: %d %.120q", a.status, a.body)
			return ""
		}
		form := url.Values{"step": {"login"}, "username": {scaleUser}, "password": {scalePassword}, "csrf_token": {string(csrf[1])}}
		act := strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(string(action[1]))
		req, _ = http.NewRequest(http.MethodPost, r.base+act, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		posted := time.Now()
		a = r.do("signin_login", c, req, a.backend) // the form lands on another replica
		if a.retryable() {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		loc, err := url.Parse(a.header.Get("Location"))
		if a.status == http.StatusSeeOther && err == nil && loc.Query().Get("error") == "temporarily_unavailable" {
			// The code could not be stored: RFC 6749 §4.1.2.1's answer
			// for an outage, allowed only during it.
			r.stats.mu.Lock()
			r.stats.errors["temporarily_unavailable redirect during the database outage"]++
			r.stats.mu.Unlock()
			if !r.inCut(posted, time.Now()) {
				r.stats.violate("login: %s outside the database outage", loc)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if a.status != http.StatusSeeOther || err != nil || loc.Query().Get("code") == "" || loc.Query().Get("state") != state {
			r.stats.violate("login: %d %s %.120q", a.status, a.header.Get("Location"), a.body)
			return ""
		}
		return loc.Query().Get("code")
	}
	r.stats.violate("sign-in kept failing for 15 s")
	return ""
}

// redeemTwice redeems form (a code exchange or a refresh) and retries it
// on another replica: both answers must carry the same access and refresh
// tokens. A first attempt that failed (dead process, database outage) is
// repeated until it is answered; then the retry. It returns the tokens,
// or nil after recording a violation.
func (r *scaleRun) redeemTwice(kind string, form url.Values) map[string]any {
	first := r.until(kind, "/oauth2/token", form, -1, "")
	if first.status != 200 || first.json["access_token"] == nil || first.json["refresh_token"] == nil {
		r.stats.violate("%s on %d: %d %s", kind, first.backend, first.status, first.body)
		return nil
	}
	retry := r.until(kind+"_retry", "/oauth2/token", form, first.backend, "")
	if retry.status != 200 || retry.json["access_token"] != first.json["access_token"] || retry.json["refresh_token"] != first.json["refresh_token"] {
		r.stats.violate("%s retry on backend %d (first on %d): %d %s, want the original tokens", kind, retry.backend, first.backend, retry.status, retry.body)
		return nil
	}
	if retry.backend != first.backend {
		r.stats.mu.Lock()
		r.stats.retriesAcross[kind]++
		r.stats.mu.Unlock()
	} else {
		r.stats.violate("%s retry landed on the same backend %d", kind, first.backend)
	}
	return first.json
}

// redeemConcurrently sends form twice at once, pinned to two replicas, as
// a deep link firing twice does: one redeems, the other waits for it (in
// Redis, or on the row lock) and both get the same tokens. A failed
// attempt (dead process, outage) is repeated. It returns the tokens, or
// nil after recording a violation.
func (r *scaleRun) redeemConcurrently(kind string, form url.Values, pins [2]int) map[string]any {
	var answers [2]scaleAnswer
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := r.postPinned(kind, "/oauth2/token", form, -1, pins[i], "")
			if a.retryable() {
				a = r.until(kind, "/oauth2/token", form, a.backend, "")
			}
			answers[i] = a
		}()
	}
	wg.Wait()
	a, b := answers[0], answers[1]
	if a.status != 200 || b.status != 200 || a.json["access_token"] == nil ||
		a.json["access_token"] != b.json["access_token"] || a.json["refresh_token"] != b.json["refresh_token"] {
		r.stats.violate("%s concurrently on %d and %d: %d %s / %d %s, want the same tokens", kind, a.backend, b.backend, a.status, a.body, b.status, b.body)
		return nil
	}
	if a.backend != b.backend {
		r.stats.mu.Lock()
		r.stats.retriesAcross[kind]++
		r.stats.mu.Unlock()
	}
	return a.json
}

// introspectActive reports whether token is active, asked of any replica.
func (r *scaleRun) introspectActive(token string) (bool, bool) {
	a := r.until("introspect", "/oauth2/introspect", url.Values{"token": {token}}, -1, scaleAdmin)
	if a.status != 200 {
		r.stats.violate("introspect: %d %s", a.status, a.body)
		return false, false
	}
	active, _ := a.json["active"].(bool)
	return active, true
}

// iteration is one user's session: sign in, exchange (and its retry on
// another replica; every third time two concurrent duplicates on two
// replicas first), refresh (and its retry), then either revoke the new
// refresh token and check that neither retry returns the revoked tokens,
// or check that rotation deactivated the first access token.
func (r *scaleRun) iteration(worker, n int) {
	verifier := oauth2.GenerateVerifier()
	code := r.signIn(verifier, fmt.Sprintf("state-%d-%d", worker, n))
	if code == "" {
		return
	}
	exForm := url.Values{"grant_type": {"authorization_code"}, "client_id": {scaleClient}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {scaleRedirect}}
	var tok map[string]any
	if n%3 == 2 {
		// A duplicate in flight at the same time on another replica;
		// then the sequential retry too.
		if tok = r.redeemConcurrently("exchange_concurrent", exForm, [2]int{worker % 3, (worker + 1) % 3}); tok == nil {
			return
		}
		if again := r.until("exchange_retry", "/oauth2/token", exForm, -1, ""); again.status != 200 || again.json["access_token"] != tok["access_token"] {
			r.stats.violate("exchange retry after concurrent duplicates: %d %s", again.status, again.body)
			return
		}
	} else if tok = r.redeemTwice("exchange", exForm); tok == nil {
		return
	}
	r.stats.add(&r.stats.codes)
	rtForm := url.Values{"grant_type": {"refresh_token"}, "client_id": {scaleClient}, "refresh_token": {tok["refresh_token"].(string)}}
	next := r.redeemTwice("refresh", rtForm)
	if next == nil {
		return
	}
	r.stats.add(&r.stats.refreshes)
	if n%2 == 0 && !r.noRevoke {
		rev := r.until("revoke", "/oauth2/revoke", url.Values{"client_id": {scaleClient}, "token": {next["refresh_token"].(string)}}, -1, "")
		if rev.status != 200 {
			r.stats.violate("revoke: %d %s", rev.status, rev.body)
			return
		}
		r.stats.add(&r.stats.revoked)
		// The retries of the refresh and of the exchange whose answers
		// were revoked: invalid_grant, never the revoked tokens.
		for _, c := range []struct {
			kind string
			form url.Values
		}{{"revoked_refresh_retry", rtForm}, {"revoked_exchange_retry", exForm}} {
			a := r.until(c.kind, "/oauth2/token", c.form, -1, "")
			if a.status != 400 || a.json["error"] != "invalid_grant" || strings.Contains(string(a.body), next["access_token"].(string)) {
				r.stats.violate("%s after revocation (revoked on %d, retried on %d; the revoked tokens: %v): %d %s, want invalid_grant",
					c.kind, rev.backend, a.backend, a.json["access_token"] == next["access_token"], a.status, a.body)
			}
		}
		if active, ok := r.introspectActive(next["access_token"].(string)); ok && active {
			r.stats.violate("the access token of a revoked grant is active")
		}
		return
	}
	if active, ok := r.introspectActive(next["access_token"].(string)); ok && !active {
		r.stats.violate("the refreshed access token is not active")
	}
	if active, ok := r.introspectActive(tok["access_token"].(string)); ok && active {
		r.stats.violate("the access token replaced by the refresh is still active")
	}
}

// TestScaleOut: three authd serve processes share one PostgreSQL schema
// and a three-master Redis Cluster behind a round-robin proxy. Several
// workers sign in, exchange codes (each exchange retried on another
// replica), refresh (retried too) and revoke. Midway one Redis node and
// one authd are killed with SIGKILL, and PostgreSQL is cut off for two
// seconds through a TCP proxy and restored. The test asserts:
//   - no 5xx but the proxy's 502s for the killed process's requests and
//     503s (with Retry-After) during the database outage; no answer slower
//     than a few seconds;
//   - every retried exchange or refresh is answered with the original
//     tokens, from Redis or the durable record;
//   - a revoked grant's retries get invalid_grant, its tokens inactive;
//   - nothing issued twice or half-written: one access token row per
//     redeemed code and per rotation, each with its replay record; no
//     code redeemed without tokens or with its PKCE session left;
//   - afterwards everything works.
//
// The figures (requests by kind, retries across replicas, errors by kind)
// are logged.
func TestScaleOut(t *testing.T) {
	dsn := pgtest.DSN(t)
	// Masters without replicas: a revocation cannot drop the Redis
	// entries that lived on the killed node, and a replica promoted with
	// them would replay them (TestClusterFailover, which has replicas,
	// does not revoke; issue 31's closing note).
	nodes := redistest.StartCluster(t)
	bin := buildAuthd(t)

	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := t.Context()
	seedScale(t, pool)

	// PostgreSQL through a TCP proxy the test can cut (the machine's
	// PostgreSQL is shared: it is never restarted).
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pgProxy := startProxy(t, u.Host)
	u.Host = pgProxy.ln.Addr().String()
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()

	// The front proxy first: its URL is the issuer of all three.
	var front *frontProxy
	frontSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { front.ServeHTTP(w, r) }))
	defer frontSrv.Close()

	redisAddrs := make([]string, len(nodes))
	for i, n := range nodes {
		redisAddrs[i] = n.Addr
	}
	env := withoutAuthdEnv()
	env = append(env, "AUTHD_DATABASE_URL="+u.String(), "AUTHD_SECRET=scaleout-test-secret-0123456789-0123456789",
		"AUTHD_REDIS_URL=redis://"+strings.Join(redisAddrs, ","), "AUTHD_ADMIN_TOKEN="+scaleAdmin,
		"AUTHD_JANITOR=off", "AUTHD_ISSUER="+frontSrv.URL)
	procs := make([]*authdProcess, 3)
	bases := make([]string, 3)
	for i := range procs {
		procs[i] = startReplica(t, bin, env, frontSrv.URL)
		bases[i] = procs[i].base
	}
	front = newFrontProxy(bases)
	r := &scaleRun{base: frontSrv.URL, stats: newScaleStats(),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}

	// One session before anything fails.
	r.iteration(-1, 1)
	if len(r.stats.violations) > 0 {
		t.Fatalf("before any failure: %s", strings.Join(r.stats.violations, "\n"))
	}

	const (
		workers   = 6
		duration  = 12 * time.Second
		killRedis = 2500 * time.Millisecond
		killAuthd = 4 * time.Second
		cutPG     = 6500 * time.Millisecond
		cutFor    = 2 * time.Second
	)
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var iterations atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r.iteration(w, n)
				iterations.Add(1)
			}
		}()
	}
	// One more browser user who only signs in, so the pages meet the
	// outages too (the workers spend them retrying token requests).
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			r.signIn(oauth2.GenerateVerifier(), fmt.Sprintf("state-signin-%d", n))
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var (
		timelineMu sync.Mutex
		timeline   []string
	)
	mark := func(what string) {
		timelineMu.Lock()
		defer timelineMu.Unlock()
		timeline = append(timeline, fmt.Sprintf("%5.1fs %s", time.Since(start).Seconds(), what))
	}
	// When the surviving nodes declare the cluster down (a slot has no
	// live master after cluster-node-timeout), every Redis call fails and
	// PostgreSQL answers every retry.
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := redis.NewClient(&redis.Options{Addr: nodes[0].Addr, MaxRetries: -1})
		defer c.Close()
		state := "ok"
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			info, err := c.ClusterInfo(context.Background()).Result()
			if err != nil {
				continue
			}
			if now := clusterStateRe.FindStringSubmatch(info); now != nil && now[1] != state {
				state = now[1]
				mark("Redis Cluster state: " + state)
			}
		}
	}()
	time.Sleep(killRedis)
	nodes[1].Kill()
	mark("Redis node " + nodes[1].Addr + " killed (SIGKILL)")
	time.Sleep(killAuthd - time.Since(start))
	const victim = 1
	r.mu.Lock()
	r.killedAt, r.killed = time.Now(), victim
	r.mu.Unlock()
	_ = procs[victim].cmd.Process.Kill()
	mark(fmt.Sprintf("authd %d killed (SIGKILL)", victim))
	time.Sleep(cutPG - time.Since(start))
	r.mu.Lock()
	r.cutFrom = time.Now()
	r.mu.Unlock()
	pgProxy.setCut(true)
	mark("PostgreSQL cut")
	time.Sleep(cutFor)
	pgProxy.setCut(false)
	r.mu.Lock()
	r.cutTo = time.Now()
	r.mu.Unlock()
	mark("PostgreSQL restored")
	time.Sleep(duration - time.Since(start))
	close(stop)
	mark("workload stopped")
	wg.Wait()
	mark("workers done")
	timelineMu.Lock() // nothing marks it any more
	defer timelineMu.Unlock()

	// Afterwards everything works: a clean session, no 5xx at all.
	before := len(r.stats.violations)
	r.mu.Lock()
	r.cutFrom, r.cutTo = time.Time{}, time.Time{} // a 503 now is a violation
	r.mu.Unlock()
	for n := range 4 {
		r.iteration(-2, n)
	}
	if len(r.stats.violations) > before {
		t.Errorf("after the outages: %s", strings.Join(r.stats.violations[before:], "\n"))
	}

	// Nothing issued twice, nothing half-written.
	st := r.stats
	checks := []struct {
		what string
		sql  string
		want int
	}{
		{"access token rows (one per redeemed code and per rotation)", `SELECT count(*) FROM access_tokens`, st.codes + st.refreshes},
		{"grants with access tokens (one per redeemed code)", `SELECT count(DISTINCT request_id) FROM access_tokens`, st.codes},
		{"redeemed codes", `SELECT count(*) FROM authorize_codes WHERE NOT active`, st.codes},
		{"code replay records", `SELECT count(*) FROM replay_records WHERE key LIKE 'c:%'`, st.codes},
		{"refresh replay records", `SELECT count(*) FROM replay_records WHERE key LIKE 'r:%'`, st.refreshes},
		{"grants whose access token rows and replay records differ in number", `SELECT count(*) FROM
			(SELECT request_id, count(*) n FROM access_tokens GROUP BY 1) a
			FULL JOIN (SELECT request_id, count(*) n FROM replay_records GROUP BY 1) r USING (request_id)
			WHERE a.n IS DISTINCT FROM r.n`, 0},
		{"redeemed codes without tokens", `SELECT count(*) FROM authorize_codes c WHERE NOT c.active
			AND NOT EXISTS (SELECT 1 FROM access_tokens a WHERE a.request_id = c.request_id)`, 0},
		{"redeemed codes with a PKCE session left", `SELECT count(*) FROM pkce_sessions p
			JOIN authorize_codes c USING (signature) WHERE NOT c.active`, 0},
		{"grants with more than one active refresh token", `SELECT count(*) FROM
			(SELECT request_id FROM refresh_tokens WHERE active GROUP BY 1 HAVING count(*) > 1) x`, 0},
		{"grants with an active refresh token (redeemed minus revoked)", `SELECT count(DISTINCT request_id) FROM refresh_tokens WHERE active`, st.codes - st.revoked},
		{"active access tokens of revoked grants", `SELECT count(*) FROM access_tokens a WHERE a.active
			AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.request_id = a.request_id AND r.active)`, 0},
	}
	for _, c := range checks {
		var got int
		if err := pool.QueryRow(ctx, c.sql).Scan(&got); err != nil {
			t.Errorf("%s: %v", c.what, err)
		} else if got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}

	// The figures.
	t.Logf("timeline:\n  %s", strings.Join(timeline, "\n  "))
	t.Logf("%d workers and a sign-in user, %s, %d sessions: %d codes redeemed, %d refreshes, %d grants revoked; %d sign-ins",
		workers, duration, iterations.Load(), st.codes, st.refreshes, st.revoked, st.answers["signin_login 303"])
	t.Logf("requests by kind: %s", sortedCounts(st.requests))
	t.Logf("answers by kind and status: %s", sortedCounts(st.answers))
	t.Logf("retries answered by another replica: %s", sortedCounts(st.retriesAcross))
	t.Logf("errors by kind: %s", sortedCounts(st.errors))
	var served, connErrs []string
	for i := range front.backends {
		served = append(served, fmt.Sprintf("%d: %d", i, front.served[i].Load()))
		connErrs = append(connErrs, fmt.Sprintf("%d: %d", i, front.connErrors[i].Load()))
	}
	t.Logf("proxied by backend: %s; connection errors by backend: %s", strings.Join(served, ", "), strings.Join(connErrs, ", "))
	t.Logf("slowest answer: %s (%s)", st.slowest.Round(time.Millisecond), st.slowestKind)
	paths := map[string]int{}
	for i, p := range procs {
		if i == victim {
			continue
		}
		figures, counts := exchangeFigures(t, p)
		t.Logf("authd %d: %s; revoked grants' Redis entries not dropped: %s", i, figures, notDropped(p))
		for k, v := range counts {
			paths[k] += v
		}
		// The pool recovered by itself: ready, database ok.
		if code, body := readyz(t, p.ops); code != 200 || body["database"] != "ok" {
			t.Errorf("authd %d /readyz after the outages: %d %v", i, code, body)
		}
	}
	for _, path := range []string{"path=fresh", "path=replay", "path=record"} {
		if paths[path] == 0 {
			t.Errorf("no exchange answered with %s on the live replicas: %v", path, paths)
		}
	}
	if st.errors["503 during the database outage"] == 0 {
		t.Error("no request failed during the database outage: the cut did not take")
	}

	if len(st.violations) > 0 {
		for i, p := range procs {
			b, _ := os.ReadFile(p.log)
			n := 0
			for _, l := range strings.Split(string(b), "\n") {
				if (strings.Contains(l, "endpoint error") || strings.Contains(l, "not dropped")) && n < 10 {
					t.Logf("authd %d: %.300s", i, l)
					n++
				}
			}
		}
		t.Errorf("%d violations:\n%s", len(st.violations), strings.Join(st.violations, "\n"))
	}
	if st.codes < 10 || st.retriesAcross["exchange"] < 10 {
		t.Errorf("only %d codes redeemed and %d exchanges retried across replicas: the workload did not run", st.codes, st.retriesAcross["exchange"])
	}
	if st.slowest > 5*time.Second {
		t.Errorf("slowest answer took %s (%s), want a few seconds at most", st.slowest, st.slowestKind)
	}
	if front.connErrors[victim].Load() == 0 {
		t.Logf("the killed process had no request in flight")
	}
}

// notDropped counts, by cause, the process's warnings that a revoked
// grant's replay cache entry could not be dropped.
func notDropped(p *authdProcess) string {
	b, _ := os.ReadFile(p.log)
	counts := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "not dropped") {
			continue
		}
		cause := "other"
		for _, c := range []string{"connection refused", "CLUSTERDOWN", "deadline exceeded", "i/o timeout", "EOF", "reset"} {
			if strings.Contains(l, c) {
				cause = c
				break
			}
		}
		counts[cause]++
	}
	return sortedCounts(counts)
}

// startReplica starts an authd serve and makes sure that the process
// answering on its ports is the one started: another test's process on
// this machine may take a port between freeAddr and the bind (then
// /healthz answers, but from the other process, and ours exits). The
// public listener must serve this test's issuer.
func startReplica(t *testing.T, bin string, env []string, issuer string) *authdProcess {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := startAuthd(t, bin, freeAddr(t), env, nil)
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(p.base + "/.well-known/oauth-authorization-server")
		if err == nil {
			var m struct {
				Issuer string `json:"issuer"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if m.Issuer == issuer {
				return p
			}
			err = fmt.Errorf("issuer %q", m.Issuer)
		}
		_ = p.cmd.Process.Kill()
		if attempt == 3 {
			t.Fatalf("authd on %s: its public listener does not answer for %s: %v", p.base, issuer, err)
		}
	}
}

// clusterStateRe finds the state in CLUSTER INFO.
var clusterStateRe = regexp.MustCompile(`cluster_state:(\w+)`)

// exchangeFigures scrapes a process's token exchange counts by path
// (fresh, replay from Redis, record from PostgreSQL) and its replay cache
// events from /metrics on its operations listener. It returns them
// formatted, and the exchange counts summed by path ("path=record").
func exchangeFigures(t *testing.T, p *authdProcess) (string, map[string]int) {
	counts := map[string]int{}
	resp, err := http.Get("http://" + p.ops + "/metrics")
	if err != nil {
		return err.Error(), counts
	}
	body := readAll(t, resp)
	var out []string
	re := regexp.MustCompile(`(?m)^(authd_token_exchange_seconds_count\{[^}]*\}|authd_replay_cache_events_total\{[^}]*\}) (\d+)`)
	pathRe := regexp.MustCompile(`path=\w+`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		name := strings.NewReplacer("authd_token_exchange_seconds_count", "exchanges", "authd_replay_cache_events_total", "cache", `"`, "").Replace(m[1])
		out = append(out, name+"="+m[2])
		if path := pathRe.FindString(name); path != "" {
			n, _ := strconv.Atoi(m[2])
			counts[path] += n
		}
	}
	slices.Sort(out)
	return strings.Join(out, " "), counts
}

// sortedCounts formats counts as "k=v, …" in key order.
func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// seedScale adds the workload's user and public client to the schema.
func seedScale(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	store := postgres.New(pool)
	hash, _ := bcrypt.GenerateFromPassword([]byte(scalePassword), bcrypt.MinCost)
	if err := store.CreateUser(t.Context(), &storage.User{Username: scaleUser, PasswordHash: hash, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateClient(t.Context(), &storage.Client{ID: scaleClient, RedirectURIs: []string{scaleRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"openid", "offline_access"}, TokenEndpointAuthMethod: "none", SkipConsent: true,
		CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}
