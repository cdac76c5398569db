package oauth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/authd/authd/oauth"
)

// TestPKCESessionInCodeRow: a code's PKCE session is its own row (RFC 7636
// §4.4: the challenge is associated with the code). A code issued by an
// earlier authd, whose PKCE session is a row of the PKCE session table, is
// still redeemed with its verifier checked; with Config.PKCERows (a
// rolling upgrade) the table row is written for earlier versions and
// deleted at the exchange.
func TestPKCESessionInCodeRow(t *testing.T) {
	t.Parallel()
	// legacy turns the only code into an earlier authd's: its challenge
	// moves to a PKCE session row.
	legacy := func(t *testing.T, h *harness) {
		ctx := context.Background()
		if _, err := h.pool.Exec(ctx, `INSERT INTO pkce_sessions (signature, request_id, client_id, subject, requested_at, expires_at,
			scopes, granted_scopes, audience, granted_audience, form, session)
			SELECT signature, request_id, client_id, subject, requested_at, expires_at,
			scopes, granted_scopes, audience, granted_audience, form, session FROM authorize_codes`); err != nil {
			t.Fatal(err)
		}
		tag, err := h.pool.Exec(ctx, `UPDATE authorize_codes SET form = regexp_replace(form, '(^|&)code_challenge(_method)?=[^&]*', '', 'g')`)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("strip the challenge: %v %v", tag, err)
		}
	}
	noChallenge := func(t *testing.T, h *harness) {
		if _, err := h.pool.Exec(context.Background(), `UPDATE authorize_codes SET form = regexp_replace(form, '(^|&)code_challenge(_method)?=[^&]*', '', 'g')`); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		pkceRows bool
		prepare  func(*testing.T, *harness)
		rows     int    // PKCE session rows after the code's issue
		status   int    // of the exchange with the right verifier
		hint     string // in error_description when status is not 200
	}{
		{name: "this version", rows: 0, status: 200},
		{name: "earlier version's code", prepare: legacy, rows: 1, status: 200},
		{name: "rolling upgrade (PKCERows)", pkceRows: true, rows: 1, status: 200},
		{name: "no challenge anywhere", prepare: noChallenge, rows: 0, status: 400, hint: "without code_challenge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: "postgres", cfg: func(c *oauth.Config) { c.PKCERows = tc.pkceRows }})
			code, verifier := h.code(t, publicClient)
			if tc.prepare != nil {
				tc.prepare(t, h)
			}
			count := func() int {
				var n int
				if err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM pkce_sessions`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if n := count(); n != tc.rows {
				t.Fatalf("%d PKCE session rows after the code's issue, want %d", n, tc.rows)
			}
			// A wrong verifier is refused and consumes nothing (RFC 7636 §4.6).
			other := strings.Repeat("a", 43)
			if r := h.exchange(t, publicClient, code, other, publicRedirect); r.status != 400 || r.str("error") != "invalid_grant" {
				t.Fatalf("wrong verifier: %d %v", r.status, r.body)
			}
			r := h.exchange(t, publicClient, code, verifier, publicRedirect)
			if r.status != tc.status {
				t.Fatalf("right verifier: %d %v, want %d", r.status, r.body, tc.status)
			}
			if tc.status != 200 {
				if r.str("error") != "invalid_grant" || !strings.Contains(r.str("error_description"), tc.hint) {
					t.Fatalf("got %v, want invalid_grant saying %q", r.body, tc.hint)
				}
				return
			}
			if n := count(); n != 0 {
				t.Errorf("%d PKCE session rows after the exchange, want 0", n)
			}
		})
	}
}
