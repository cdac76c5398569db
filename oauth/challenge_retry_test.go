package oauth_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/exchangecache/redistest"
	"github.com/authd/authd/oauth"
)

// Every step of the challenge endpoint is safe to retry (issue 28): the
// same request repeated, concurrently and then sequentially, gets the first
// answer byte for byte, is counted once, consumes once and mints one code;
// with its Redis entry gone it is answered from the replay record.

// newChallengeHarness is authd on PostgreSQL + Redis with the first-party
// clients.
func newChallengeHarness(t *testing.T, cfg func(*oauth.Config), o harnessOpts) (*harness, *redis.Client, string) {
	t.Helper()
	cache, client, prefix := redisCache(t, redistest.Addr(t))
	o.backend, o.cache, o.cfg = "postgres", cache, cfg
	h := newHarness(t, o)
	seedFirstParty(t, h)
	return h, client, prefix
}

// repeat sends form n times concurrently and then seq times one after
// another, and fails unless every answer is the first's, byte for byte.
func (h *harness) repeat(t *testing.T, form url.Values, hdr func() http.Header, n, seq int) challengeResult {
	t.Helper()
	results := make([]challengeResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = h.challenge(t, form, hdrOf(hdr)) })
	}
	wg.Wait()
	for range seq {
		results = append(results, h.challenge(t, form, hdrOf(hdr)))
	}
	for i, r := range results {
		if r.status != results[0].status || !bytes.Equal(r.raw, results[0].raw) {
			t.Fatalf("answer %d differs: %d %s vs %d %s", i, r.status, r.raw, results[0].status, results[0].raw)
		}
	}
	return results[0]
}

func hdrOf(f func() http.Header) http.Header {
	if f == nil {
		return nil
	}
	return f()
}

func (h *harness) countCodes(t *testing.T, clientID string) int {
	t.Helper()
	var n int
	if err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM authorize_codes WHERE client_id = $1`, clientID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestChallengeRetryPasswordStep: a wrong password repeated is one
// attempt (the strict per-username-and-address back-off locks at the
// sixth distinct attempt, as on the login page); the final step repeated
// is one code; a different input after success is invalid_session.
func TestChallengeRetryPasswordStep(t *testing.T) {
	h, client, prefix := newChallengeHarness(t, nil, harnessOpts{})
	first, _ := firstStep(fpClient)

	// Four wrong passwords, each 16 times at once and 3 times after.
	var handle string
	for i, pw := range []string{"wrong-1", "wrong-2", "wrong-3", "wrong-4"} {
		form := with(first, "username", testUser, "password", pw)
		if handle != "" {
			form = url.Values{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {pw}}
		}
		res := h.repeat(t, form, nil, 16, 3)
		if res.status != http.StatusForbidden || res.str("error") != "insufficient_authorization" || res.str("auth_session") == "" {
			t.Fatalf("wrong password %d: %d %s", i, res.status, res.raw)
		}
		handle = res.str("auth_session")
	}
	// Redis flushed: the last one is answered from its record, not
	// counted again.
	deletePrefix(t, client, prefix)
	last := url.Values{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {"wrong-4"}}
	if res := h.challenge(t, last, nil); res.status != http.StatusForbidden {
		t.Fatalf("from the record: %d %s", res.status, res.raw)
	}
	// The fifth distinct failure is still answered; the sixth is held
	// back (FreeFailures 5): duplicates were not counted.
	fifth := h.challenge(t, url.Values{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {"wrong-5"}}, nil)
	if fifth.status != http.StatusForbidden || fifth.str("error") != "insufficient_authorization" {
		t.Fatalf("fifth failure: %d %s", fifth.status, fifth.raw)
	}
	sixth := h.challenge(t, url.Values{"client_id": {fpClient}, "auth_session": {fifth.str("auth_session")}, "username": {testUser}, "password": {testPassword}}, nil)
	if sixth.status != http.StatusTooManyRequests || sixth.header.Get("Retry-After") == "" {
		t.Fatalf("sixth attempt: %d %s, want 429 with Retry-After", sixth.status, sixth.raw)
	}
}

func TestChallengeRetryFinalStep(t *testing.T) {
	h, client, prefix := newChallengeHarness(t, nil, harnessOpts{})
	// A wrong password first, so that the final step continues a session.
	first, verifier := firstStep(fpClient)
	bad := h.challenge(t, with(first, "username", testUser, "password", "nope"), nil)
	handle := bad.str("auth_session")
	if bad.status != http.StatusForbidden || handle == "" {
		t.Fatalf("wrong password: %d %s", bad.status, bad.raw)
	}
	form := url.Values{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {testPassword}}
	res := h.repeat(t, form, nil, 16, 3)
	code := res.str("authorization_code")
	if res.status != 200 || code == "" {
		t.Fatalf("final step: %d %s", res.status, res.raw)
	}
	if n := h.countCodes(t, fpClient); n != 1 {
		t.Fatalf("%d codes minted, want 1", n)
	}
	deletePrefix(t, client, prefix)
	if again := h.challenge(t, form, nil); again.status != 200 || !bytes.Equal(again.raw, res.raw) {
		t.Fatalf("from the record: %d %s", again.status, again.raw)
	}
	if n := h.countCodes(t, fpClient); n != 1 {
		t.Fatalf("%d codes minted, want 1", n)
	}
	// Another input with the same auth_session after success.
	for _, other := range []url.Values{
		{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {testPassword + " "}},
		{"client_id": {fpClient}, "auth_session": {handle}, "otp": {"123456"}},
	} {
		if r := h.challenge(t, other, nil); r.status != http.StatusBadRequest || r.str("error") != "invalid_session" {
			t.Fatalf("other input after success: %d %s", r.status, r.raw)
		}
	}
	tok := h.redeemNative(t, code, verifier)
	if tok.str("access_token") == "" {
		t.Fatalf("tokens: %v", tok.body)
	}
}

// TestChallengeOTPStep: password → insufficient_authorization naming the
// factors → otp → code → tokens whose ID token has amr pwd and otp; the
// otp step repeated 16 times at once and 3 after is one use of the code
// and one code minted, and the TOTP code is used up.
func TestChallengeOTPStep(t *testing.T) {
	clk := &testClock{}
	h, _, _ := newChallengeHarness(t, nil, harnessOpts{now: clk.now})
	b := newBrowser(t)
	h.tokensFor(t, b, testUser, testPassword)
	secret, _ := h.setUpTOTP(t, b, clk)
	clk.advance(30 * time.Second) // the set-up used this step's code

	first, verifier := firstStep(fpClient)
	res := h.repeat(t, with(first, "username", testUser, "password", testPassword), nil, 16, 2)
	handle := res.str("auth_session")
	if res.status != http.StatusForbidden || res.str("error") != "insufficient_authorization" || handle == "" ||
		!slices.Contains(anyStrings(res.body["factors"]), "otp") {
		t.Fatalf("password step: %d %s", res.status, res.raw)
	}
	// A wrong code: the same session goes on.
	wrong := h.challenge(t, url.Values{"client_id": {fpClient}, "auth_session": {handle}, "otp": {"00000x"}}, nil)
	if wrong.status != http.StatusForbidden || wrong.str("error") != "insufficient_authorization" || wrong.str("auth_session") != handle {
		t.Fatalf("wrong code: %d %s", wrong.status, wrong.raw)
	}
	code := totpCode(t, clk, secret)
	form := url.Values{"client_id": {fpClient}, "auth_session": {handle}, "otp": {code}}
	done := h.repeat(t, form, nil, 16, 3)
	if done.status != 200 || done.str("authorization_code") == "" {
		t.Fatalf("otp step: %d %s", done.status, done.raw)
	}
	if n := h.countCodes(t, fpClient); n != 1 {
		t.Fatalf("%d codes minted, want 1", n)
	}
	tok := h.redeemNative(t, done.str("authorization_code"), verifier)
	c := jwtClaims(t, tok.str("id_token"))
	amr := anyStrings(c["amr"])
	if !slices.Contains(amr, "pwd") || !slices.Contains(amr, "otp") || c["acr"] != "urn:authd:acr:2fa" {
		t.Fatalf("ID token amr %v acr %v", amr, c["acr"])
	}
	// The TOTP code was used once: another sign-in cannot use it.
	first2, _ := firstStep(fpClient)
	res2 := h.challenge(t, with(first2, "username", testUser, "password", testPassword), nil)
	again := h.challenge(t, url.Values{"client_id": {fpClient}, "auth_session": {res2.str("auth_session")}, "otp": {code}}, nil)
	if again.status != http.StatusForbidden || again.str("error") != "insufficient_authorization" {
		t.Fatalf("used code again: %d %s", again.status, again.raw)
	}
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestChallengeRetryWithoutRedis: with the replay cache unreachable,
// concurrent duplicates of a step are decided by PostgreSQL (the record's
// key, the session's version): one outcome, one code, identical answers.
func TestChallengeRetryWithoutRedis(t *testing.T) {
	clk := &testClock{}
	h := newHarness(t, harnessOpts{backend: "postgres", cache: downCache{}, now: clk.now})
	seedFirstParty(t, h)
	first, verifier := firstStep(fpClient)
	res := h.repeat(t, with(first, "username", testUser, "password", testPassword), nil, 16, 2)
	if res.status != 200 || res.str("authorization_code") == "" {
		t.Fatalf("password step: %d %s", res.status, res.raw)
	}
	if n := h.countCodes(t, fpClient); n != 1 {
		t.Fatalf("%d codes minted, want 1", n)
	}
	h.redeemNative(t, res.str("authorization_code"), verifier)

	// The otp step, on a continuing session.
	b := newBrowser(t)
	h.tokensFor(t, b, testUser, testPassword)
	secret, _ := h.setUpTOTP(t, b, clk)
	clk.advance(30 * time.Second)
	first, _ = firstStep(fpClient)
	pw := h.challenge(t, with(first, "username", testUser, "password", testPassword), nil)
	form := url.Values{"client_id": {fpClient}, "auth_session": {pw.str("auth_session")}, "otp": {totpCode(t, clk, secret)}}
	done := h.repeat(t, form, nil, 16, 2)
	if done.status != 200 || done.str("authorization_code") == "" {
		t.Fatalf("otp step: %d %s", done.status, done.raw)
	}
	if n := h.countCodes(t, fpClient); n != 2 {
		t.Fatalf("%d codes minted, want 2", n)
	}
}

// TestChallengeStoresNoSecret: neither Redis nor replay_records holds the
// code, the auth_session or the password of a step, nor a plain hash of
// the input (keys and fingerprints are HMACs).
func TestChallengeStoresNoSecret(t *testing.T) {
	h, client, prefix := newChallengeHarness(t, nil, harnessOpts{})
	first, _ := firstStep(fpClient)
	bad := h.challenge(t, with(first, "username", testUser, "password", "wrong-password-xyz"), nil)
	form := url.Values{"client_id": {fpClient}, "auth_session": {bad.str("auth_session")}, "username": {testUser}, "password": {testPassword}}
	res := h.challenge(t, form, nil)
	code := res.str("authorization_code")
	if code == "" {
		t.Fatalf("no code: %s", res.raw)
	}
	secrets := []string{code, bad.str("auth_session"), testPassword, "wrong-password-xyz"}
	ctx := context.Background()
	keys, _ := client.Keys(ctx, prefix+"*").Result()
	if len(keys) == 0 {
		t.Fatal("nothing in Redis")
	}
	for _, k := range keys {
		v, _ := client.Get(ctx, k).Result()
		for _, s := range secrets {
			if strings.Contains(k+v, s) {
				t.Fatalf("Redis %s holds a secret", k)
			}
		}
	}
	rows, err := h.pool.Query(ctx, `SELECT key, fingerprint, encode(sealed, 'escape') FROM replay_records`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var k, fp, sealed string
		if err := rows.Scan(&k, &fp, &sealed); err != nil {
			t.Fatal(err)
		}
		n++
		for _, s := range secrets {
			if strings.Contains(k+fp+sealed, s) {
				t.Fatalf("replay record %s holds a secret", k)
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d replay records, want 2", n)
	}
}

// TestChallengeSameInputAfterWindow: the same input sent again after the
// replay window (a user who types the same wrong password twice, a
// minute apart; an app that keeps its code_challenge for the screen) is a
// new attempt, answered as such, not invalid_session because the first
// one's record, ended but not yet cleaned up, holds its key.
func TestChallengeSameInputAfterWindow(t *testing.T) {
	clk := &testClock{}
	h, client, prefix := newChallengeHarness(t, nil, harnessOpts{now: clk.now})
	first, verifier := firstStep(fpClient)
	start := with(first, "username", testUser, "password", "wrong-1")
	bad := h.challenge(t, start, nil)
	handle := bad.str("auth_session")
	if bad.status != http.StatusForbidden || handle == "" {
		t.Fatalf("first step: %d %s", bad.status, bad.raw)
	}
	again := url.Values{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {"wrong-2"}}
	if r := h.challenge(t, again, nil); r.status != http.StatusForbidden || r.str("auth_session") != handle {
		t.Fatalf("second step: %d %s", r.status, r.raw)
	}
	clk.advance(time.Minute)
	deletePrefix(t, client, prefix) // its entry expired with the window
	if r := h.challenge(t, again, nil); r.status != http.StatusForbidden || r.str("error") != "insufficient_authorization" || r.str("auth_session") != handle {
		t.Fatalf("the same wrong password after the window: %d %s", r.status, r.raw)
	}
	r := h.challenge(t, start, nil)
	if r.status != http.StatusForbidden || r.str("error") != "insufficient_authorization" || r.str("auth_session") == handle {
		t.Fatalf("the same first request after the window: %d %s", r.status, r.raw)
	}
	done := h.challenge(t, url.Values{"client_id": {fpClient}, "auth_session": {handle}, "username": {testUser}, "password": {testPassword}}, nil)
	if done.status != http.StatusOK {
		t.Fatalf("final step: %d %s", done.status, done.raw)
	}
	h.redeemNative(t, done.str("authorization_code"), verifier)
}
