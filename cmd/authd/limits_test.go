package main

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// limitsBrowser signs in against several replicas in turn, its
// connections coming from the loopback address ip (another source
// address on one machine); its cookies are shared by the replicas (one
// host).
type limitsBrowser struct {
	t *testing.T
	c *http.Client
}

func newLimitsBrowser(t *testing.T, ip string) *limitsBrowser {
	jar, _ := cookiejar.New(nil)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &limitsBrowser{t: t, c: &http.Client{Jar: jar, Timeout: 15 * time.Second,
		Transport:     &http.Transport{DialContext: func(ctx context.Context, n, a string) (net.Conn, error) { return d.DialContext(ctx, n, a) }},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// try opens the login page of base and posts password for the user; it
// returns the status (303 signed in, 401 wrong, 429 held back).
func (b *limitsBrowser) try(base, user, password string) int {
	t := b.t
	t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {"limits-app"}, "redirect_uri": {"http://127.0.0.1:43211/cb"},
		"scope": {"openid"}, "state": {"state-limits"}, "prompt": {"login"},
		"code_challenge": {s256("limits-" + strings.Repeat("v", 50))}, "code_challenge_method": {"S256"}}
	resp, err := b.c.Get(base + "/oauth2/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	csrf, action := csrfRe.FindStringSubmatch(body), actionRe.FindStringSubmatch(body)
	if csrf == nil || action == nil {
		t.Fatalf("no login form: %d %s", resp.StatusCode, body)
	}
	form := url.Values{"step": {"login"}, "username": {user}, "password": {password}, "csrf_token": {csrf[1]}}
	a := strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(action[1])
	req, _ := http.NewRequest(http.MethodPost, base+a, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if resp, err = b.c.Do(req); err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	return resp.StatusCode
}

// TestSharedLoginBudgets: three authd serve processes on one Redis spend
// one sign-in budget (issue 30): failures spread over the three trip the
// per-(username, source) back-off after the configured 5, not 15; the
// username's budget, fed from many addresses, holds back a new browser
// but not the person's own (the device cookie); with Redis killed each
// process falls back to its own budget, warns once and counts it; when
// Redis is back the budget is shared again. Run on a single Redis and on
// a Redis Cluster.
func TestSharedLoginBudgets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis servers and three authd processes")
	}
	dsn := pgtest.DSN(t)
	bin := buildAuthd(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool)
	hash, _ := bcrypt.GenerateFromPassword([]byte("limits-password-1"), bcrypt.MinCost)
	for _, name := range []string{"dana", "erik"} {
		if err := store.CreateUser(t.Context(), &storage.User{Username: name, PasswordHash: hash, CreatedAt: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.CreateClient(t.Context(), &storage.Client{ID: "limits-app", RedirectURIs: []string{"http://127.0.0.1:43211/cb"},
		GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"}, Scopes: []string{"openid"},
		TokenEndpointAuthMethod: "none", SkipConsent: true, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	t.Run("single", func(t *testing.T) {
		addr, stop := redistest.Start(t)
		procs := startLimitReplicas(t, bin, dsn, "redis://"+addr)
		sharedBudgetChecks(t, procs, "dana")

		// Redis killed: each process decides alone, says so once and
		// counts it; sign-ins keep working.
		stop()
		b := newLimitsBrowser(t, "127.0.0.20")
		for i := range 3 {
			if st := b.try(procs[i].base, "erik", "limits-password-1"); st != http.StatusSeeOther {
				t.Fatalf("sign-in on replica %d with Redis down: %d", i, st)
			}
		}
		for i, p := range procs {
			if n := metricValue(t, p, "authd_limits_fallback_total"); n < 1 {
				t.Errorf("replica %d: authd_limits_fallback_total = %v with Redis down", i, n)
			}
			if n := strings.Count(readFile(t, p.log), "budgets are per process"); n != 1 {
				t.Errorf("replica %d: %d fallback warnings, want 1 per interval", i, n)
			}
		}
		// Redis back (empty): the budget is shared again.
		redistest.Restart(t, addr)
		deadline := time.Now().Add(20 * time.Second)
		for !sharedAgain(t, procs) {
			if time.Now().After(deadline) {
				t.Fatal("shared budgets did not resume within 20 s of Redis returning")
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		nodes := redistest.StartCluster(t)
		addrs := make([]string, len(nodes))
		for i, n := range nodes {
			addrs[i] = n.Addr
		}
		procs := startLimitReplicas(t, bin, dsn, "redis://"+strings.Join(addrs, ","))
		sharedBudgetChecks(t, procs, "erik")
	})
}

// sharedAgain reports whether a failure on one replica is seen by another.
func sharedAgain(t *testing.T, procs []*authdProcess) bool {
	before := metricValue(t, procs[1], `authd_limits_checks_total{where="shared"}`)
	newLimitsBrowser(t, "127.0.0.30").try(procs[1].base, "nobody", "x")
	return metricValue(t, procs[1], `authd_limits_checks_total{where="shared"}`) > before
}

func startLimitReplicas(t *testing.T, bin, dsn, redisURL string) []*authdProcess {
	t.Helper()
	env := append(withoutAuthdEnv(), "AUTHD_DATABASE_URL="+dsn, "AUTHD_SECRET=limits-test-secret-0123456789-0123456789",
		"AUTHD_REDIS_URL="+redisURL, "AUTHD_JANITOR=off")
	procs := make([]*authdProcess, 3)
	for i := range procs {
		procs[i] = startAuthd(t, bin, freeAddr(t), env, nil)
	}
	return procs
}

// sharedBudgetChecks runs the attack on user across the replicas.
func sharedBudgetChecks(t *testing.T, procs []*authdProcess, user string) {
	t.Helper()
	phone := newLimitsBrowser(t, "127.0.0.2")
	if st := phone.try(procs[0].base, user, "limits-password-1"); st != http.StatusSeeOther {
		t.Fatalf("the person's first sign-in: %d", st)
	}
	// One address guesses 5 times, round robin: the sixth try is held back
	// on whichever replica it reaches (5 in all, not 5 per replica).
	attacker := newLimitsBrowser(t, "127.0.0.3")
	for i := range 5 {
		if st := attacker.try(procs[i%3].base, user, "guess"); st != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i+1, st)
		}
	}
	for i := range 3 {
		if st := attacker.try(procs[i].base, user, "limits-password-1"); st != http.StatusTooManyRequests {
			t.Fatalf("the guessing address on replica %d after 5 failures across the three: %d, want 429", i, st)
		}
	}
	// Many addresses, 3 guesses each (under their own budget): the
	// username's budget (20 across all addresses) trips.
	for a := 4; a < 10; a++ {
		b := newLimitsBrowser(t, "127.0.0."+strconv.Itoa(a))
		for i := range 3 {
			b.try(procs[(a+i)%3].base, user, "guess")
		}
	}
	if st := newLimitsBrowser(t, "127.0.0.11").try(procs[1].base, user, "limits-password-1"); st != http.StatusTooManyRequests {
		t.Fatalf("a new browser during the attack: %d, want 429", st)
	}
	// The person's own browser (it signed in as the user before) gets in.
	for i := range 3 {
		if st := phone.try(procs[i].base, user, "limits-password-1"); st != http.StatusSeeOther {
			t.Fatalf("the person's browser on replica %d during the attack: %d, want a sign-in", i, st)
		}
	}
}

// metricValue sums the samples of a metric (name, or name{labels} as
// printed) on p's /metrics.
func metricValue(t *testing.T, p *authdProcess, metric string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(readAll(t, resp), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if name == metric || (!strings.Contains(metric, "{") && strings.HasPrefix(name, metric+"{")) {
			v, _ := strconv.ParseFloat(value, 64)
			sum += v
		}
	}
	return sum
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
