package oauth_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/oauth"
)

// codeSignature is the signature half of an HMAC code or token: the key
// the replay cache and the database use.
func codeSignature(code string) string {
	_, sig, _ := strings.Cut(code, ".")
	return sig
}

// TestReplayAfterRevocation: a duplicate exchange or refresh inside the
// window after the tokens were revoked (RFC 7009) gets invalid_grant, not
// the revoked tokens.
func TestReplayAfterRevocation(t *testing.T) {
	t.Parallel()
	h, _, _ := newReplayHarness(t, nil)
	code, v := h.code(t, publicClient)
	first := h.redeem(t, code, v)
	refreshForm := url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {first.str("refresh_token")}}
	refreshed := h.postForm(t, "/oauth2/token", refreshForm, "", "")
	if refreshed.status != 200 {
		t.Fatalf("refresh: %d %v", refreshed.status, refreshed.body)
	}
	if r := h.postForm(t, "/oauth2/revoke", url.Values{"token": {refreshed.str("refresh_token")}, "client_id": {publicClient}}, "", ""); r.status != 200 {
		t.Fatalf("revoke: %d %v", r.status, r.body)
	}
	if r := h.postForm(t, "/oauth2/token", refreshForm, "", ""); r.status != 400 || r.str("error") != "invalid_grant" {
		t.Fatalf("refresh replay after revocation: %d %v", r.status, r.body)
	}
	code2, v2 := h.code(t, publicClient)
	first2 := h.exchange(t, publicClient, code2, v2, publicRedirect)
	if r := h.postForm(t, "/oauth2/revoke", url.Values{"token": {first2.str("access_token")}, "client_id": {publicClient}}, "", ""); r.status != 200 {
		t.Fatalf("revoke: %d %v", r.status, r.body)
	}
	if r := h.exchange(t, publicClient, code2, v2, publicRedirect); r.status != 400 || r.str("error") != "invalid_grant" {
		t.Fatalf("exchange replay after revocation: %d %v", r.status, r.body)
	}
}

// TestForgedCodeRevokesNothing: a bare signature (as found in a Redis key
// name or a database dump) or a code with a forged key half is invalid_grant
// and revokes nothing, and never gets a replayed response.
func TestForgedCodeRevokesNothing(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			code, v := h.code(t, publicClient)
			first := h.redeem(t, code, v)
			sig := codeSignature(code)
			for _, forged := range []string{"x." + sig, sig, "ory_ac_forgedforgedforgedforgedforged00000." + sig} {
				for _, client := range []string{publicClient, "other-app"} {
					r := h.exchange(t, client, forged, v, publicRedirect)
					if r.status != 400 || r.str("error") != "invalid_grant" || r.str("access_token") != "" {
						t.Fatalf("forged code %q by %s: %d %v", forged, client, r.status, r.body)
					}
				}
			}
			if !h.introspect(t, first.str("access_token")) {
				t.Fatal("a forged code revoked the tokens")
			}
			// Likewise for refresh tokens.
			rsig := codeSignature(first.str("refresh_token"))
			r := h.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {"ory_rt_forged." + rsig}}, "", "")
			if r.status != 400 || r.str("error") != "invalid_grant" || !h.introspect(t, first.str("refresh_token")) {
				t.Fatalf("forged refresh token: %d %v", r.status, r.body)
			}
		})
	}
}

// TestBadBytesNever500: NUL and invalid UTF-8 in codes and tokens are
// invalid_grant / inactive on PostgreSQL, never a 500.
func TestBadBytesNever500(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{backend: "postgres"})
	for _, bad := range []string{"a.\x00", "a.\xff\xfe", "ory_ac_\x00.\x00", "a.b\x00c"} {
		for _, form := range []url.Values{
			{"grant_type": {"authorization_code"}, "client_id": {publicClient}, "code": {bad}, "code_verifier": {strings.Repeat("a", 43)}, "redirect_uri": {publicRedirect}},
			{"grant_type": {"refresh_token"}, "client_id": {publicClient}, "refresh_token": {bad}},
		} {
			if r := h.postForm(t, "/oauth2/token", form, "", ""); r.status != 400 || r.str("error") != "invalid_grant" {
				t.Fatalf("%q: %d %v", bad, r.status, r.body)
			}
		}
		if r := h.postForm(t, "/oauth2/revoke", url.Values{"token": {bad}, "client_id": {publicClient}}, "", ""); r.status != 200 {
			t.Fatalf("revoke %q: %d %v", bad, r.status, r.body)
		}
		if h.introspect(t, bad) {
			t.Fatalf("introspect %q: active", bad)
		}
	}
}

// TestMismatchWhileInFlightKeepsClaim: a wrong-verifier request while the
// first exchange is in flight fails without dropping the first one's claim.
func TestMismatchWhileInFlightKeepsClaim(t *testing.T) {
	t.Parallel()
	cache := exchangecache.NewMemory()
	h := newHarness(t, harnessOpts{backend: "memory", cache: cache})
	code, v := h.code(t, publicClient)
	key, fp := "c:"+codeSignature(code), exchangecache.Fingerprint(publicClient, publicRedirect, v)
	ctx := context.Background()
	claim, err := cache.Claim(ctx, key, fp, 10*time.Second) // the "first attempt"
	if err != nil || claim.Outcome != exchangecache.Claimed {
		t.Fatalf("claim: %v %v", claim, err)
	}
	if r := h.exchange(t, publicClient, code, oauth2.GenerateVerifier(), publicRedirect); r.status != 400 || r.str("error") != "invalid_grant" {
		t.Fatalf("wrong verifier: %d %v", r.status, r.body)
	}
	if res, err := cache.Lookup(ctx, key, fp); err != nil || res.Outcome != exchangecache.InFlight {
		t.Fatalf("the first attempt's claim was dropped: %v %v", res, err)
	}
}

// TestWaitTimeoutAnswersFromDatabase: a duplicate whose first attempt is
// still in flight in the cache after the bounded wait is answered by
// PostgreSQL: a first attempt that never committed leaves the code to it;
// one that committed and died before writing the cache is answered from
// its replay record.
func TestWaitTimeoutAnswersFromDatabase(t *testing.T) {
	t.Parallel()
	cache := exchangecache.NewMemory()
	h := newHarness(t, harnessOpts{backend: "memory", cache: cache, cfg: func(c *oauth.Config) { c.ReplayWaitTimeout = 200 * time.Millisecond }})
	ctx := context.Background()

	// A stuck claim whose owner never committed.
	code, v := h.code(t, publicClient)
	key, fp := "c:"+codeSignature(code), exchangecache.Fingerprint(publicClient, publicRedirect, v)
	if _, err := cache.Claim(ctx, key, fp, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	first := h.exchange(t, publicClient, code, v, publicRedirect)
	if first.status != 200 {
		t.Fatalf("duplicate during a stuck first attempt: %d %v", first.status, first.body)
	}

	// A first attempt that committed, then died before Complete.
	code, v = h.code(t, publicClient)
	key, fp = "c:"+codeSignature(code), exchangecache.Fingerprint(publicClient, publicRedirect, v)
	first = h.redeem(t, code, v)
	if err := cache.Forget(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Claim(ctx, key, fp, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := h.exchange(t, publicClient, code, v, publicRedirect); r.status != 200 || r.str("access_token") != first.str("access_token") {
		t.Fatalf("retry after the first node died: %d %v, want the first tokens", r.status, r.body)
	}
}
