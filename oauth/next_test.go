package oauth

import (
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/ory/fosite"
)

// The redirect kinds of RFC 8252 §7: a claimed https link, a loopback
// port, a private-use scheme.
var (
	redirectHTTPS    = mustURL("https://app.example.com/callback")
	redirectLoopback = mustURL("http://127.0.0.1:51234/callback")
	redirectPrivate  = mustURL("com.example.app:/oauth2redirect")
)

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

var testNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// silentCode is what prompt=none answers for st: "" for a code, else the
// error code redirected to the client.
func silentCode(st step) string {
	err := silentError(st)
	if err == nil {
		return ""
	}
	var rfc *fosite.RFC6749Error
	if !errors.As(err, &rfc) {
		return "not an RFC 6749 error"
	}
	return rfc.ErrorField
}

// TestDecideTable: explicit rows, each with its prompt=none answer (OpenID
// Connect Core §3.1.2.6).
func TestDecideTable(t *testing.T) {
	fresh := &stepSession{subject: "alice", authTime: testNow.Add(-10 * time.Second)}
	old := &stepSession{subject: "alice", authTime: testNow.Add(-2 * time.Hour)}
	// base: a confidential client with a remembered consent, silent SSO
	// where assured (the default).
	base := func(f func(*stepInput)) stepInput {
		in := stepInput{now: testNow, maxAge: -1, redirectURI: redirectHTTPS, silentSSO: SilentSSOAssured,
			session: fresh, consentCovers: true}
		if f != nil {
			f(&in)
		}
		return in
	}
	for _, tc := range []struct {
		name   string
		in     stepInput
		want   step
		silent string // prompt=none's error code, "" for a code
	}{
		{"no session", base(func(in *stepInput) { in.session = nil }), stepSignIn, "login_required"},
		{"no session, consent remembered elsewhere", base(func(in *stepInput) { in.session, in.skipConsent = nil, true }), stepSignIn, "login_required"},
		{"session, consent, confidential: silent", base(nil), stepIssue, ""},
		{"prompt=login", base(func(in *stepInput) { in.promptLogin = true }), stepReauth, "login_required"},
		{"prompt=login after the login POST", base(func(in *stepInput) { in.promptLogin, in.proven, in.interacted = true, true, true }), stepIssue, ""},
		{"max_age within", base(func(in *stepInput) { in.maxAge = 60 }), stepIssue, ""},
		{"max_age exceeded", base(func(in *stepInput) { in.session, in.maxAge = old, 60 }), stepReauth, "login_required"},
		{"max_age=0", base(func(in *stepInput) { in.maxAge = 0 }), stepReauth, "login_required"},
		{"max_age=0 after the login POST", base(func(in *stepInput) { in.maxAge, in.proven, in.interacted = 0, true, true }), stepIssue, ""},
		{"id_token_hint for this user", base(func(in *stepInput) { in.hintSubject = "alice" }), stepIssue, ""},
		{"id_token_hint for another user", base(func(in *stepInput) { in.hintSubject = "bob" }), stepReauth, "login_required"},
		{"second factor required, missing", base(func(in *stepInput) { in.factorRequired = true }), stepFactor, "login_required"},
		{"second factor required, present", base(func(in *stepInput) {
			in.factorRequired, in.session = true, &stepSession{subject: "alice", authTime: fresh.authTime, factor: true}
		}), stepIssue, ""},
		{"second factor before consent", base(func(in *stepInput) { in.factorRequired, in.consentCovers = true, false }), stepFactor, "login_required"},
		{"no consent", base(func(in *stepInput) { in.consentCovers = false }), stepConsent, "consent_required"},
		{"no consent, first-party", base(func(in *stepInput) { in.consentCovers, in.skipConsent = false, true }), stepIssue, ""},
		{"prompt=consent, consent remembered", base(func(in *stepInput) { in.promptConsent = true }), stepConsent, "consent_required"},
		{"prompt=consent, first-party", base(func(in *stepInput) { in.promptConsent, in.skipConsent = true, true }), stepConsent, "consent_required"},
		{"prompt=consent after Allow", base(func(in *stepInput) { in.promptConsent, in.proven, in.interacted, in.consented = true, true, true, true }), stepIssue, ""},
		{"public, https (claimed link): silent", base(func(in *stepInput) { in.public = true }), stepIssue, ""},
		{"public, loopback: one tap", base(func(in *stepInput) { in.public, in.redirectURI = true, redirectLoopback }), stepConfirm, "interaction_required"},
		{"public, private-use scheme: one tap", base(func(in *stepInput) { in.public, in.redirectURI = true, redirectPrivate }), stepConfirm, "interaction_required"},
		{"public, private-use scheme, tapped", base(func(in *stepInput) {
			in.public, in.redirectURI, in.proven, in.interacted = true, redirectPrivate, true, true
		}), stepIssue, ""},
		{"public, private-use scheme, just signed in", base(func(in *stepInput) {
			in.public, in.redirectURI, in.proven, in.interacted, in.session = true, redirectPrivate, true, true, &stepSession{subject: "alice", authTime: testNow}
		}), stepIssue, ""},
		{"confidential, private-use scheme: assured by its secret", base(func(in *stepInput) { in.redirectURI = redirectPrivate }), stepIssue, ""},
		{"silent SSO never", base(func(in *stepInput) { in.silentSSO = SilentSSONever }), stepConfirm, "interaction_required"},
		{"silent SSO never, tapped", base(func(in *stepInput) { in.silentSSO, in.proven, in.interacted = SilentSSONever, true, true }), stepIssue, ""},
		{"consent before one tap", base(func(in *stepInput) { in.public, in.redirectURI, in.consentCovers = true, redirectPrivate, false }), stepConsent, "consent_required"},
		{"prompt=select_account: the one-tap page even where assured", base(func(in *stepInput) { in.promptSelectAccount = true }), stepConfirm, "interaction_required"},
		{"prompt=select_account, tapped", base(func(in *stepInput) { in.promptSelectAccount, in.proven, in.interacted = true, true, true }), stepIssue, ""},
		{"re-authenticate before consent", base(func(in *stepInput) { in.promptLogin, in.consentCovers = true, false }), stepReauth, "login_required"},
		{"prompt=select_account: the account choice, not a silent code", base(func(in *stepInput) { in.promptSelectAccount = true }), stepConfirm, "interaction_required"},
		{"prompt=select_account after the tap", base(func(in *stepInput) { in.promptSelectAccount, in.proven, in.interacted = true, true, true }), stepIssue, ""},
		{"prompt=select_account without a session", base(func(in *stepInput) { in.promptSelectAccount, in.session = true, nil }), stepSignIn, "login_required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.in); got != tc.want {
				t.Errorf("decide = %s, want %s", got, tc.want)
			}
			if got := silentCode(decide(tc.in)); got != tc.silent {
				t.Errorf("prompt=none: %q, want %q", got, tc.silent)
			}
		})
	}
}

// TestDecideCrossProduct walks session state × prompt (login, consent,
// select_account) × max_age × consent
// × client kind × redirect kind × silent SSO × what the request has done
// × second factor, and checks for every combination, and its prompt=none
// answer, the rules the flow promises.
func TestDecideCrossProduct(t *testing.T) {
	type session struct {
		name string
		s    *stepSession
	}
	sessions := []session{
		{"none", nil},
		{"fresh", &stepSession{subject: "alice", authTime: testNow.Add(-10 * time.Second)}},
		{"old", &stepSession{subject: "alice", authTime: testNow.Add(-2 * time.Hour)}},
		{"fresh+factor", &stepSession{subject: "alice", authTime: testNow.Add(-10 * time.Second), factor: true}},
	}
	prompts := []struct {
		name                          string
		login, consent, selectAccount bool
	}{{"", false, false, false}, {"login", true, false, false}, {"consent", false, true, false}, {"login consent", true, true, false},
		{"select_account", false, false, true}, {"login select_account", true, false, true}}
	maxAges := []int64{-1, 0, 60, 86400}
	hints := []string{"", "alice", "bob"}
	redirects := []*url.URL{redirectHTTPS, redirectLoopback, redirectPrivate}
	dones := []struct {
		name                          string
		proven, interacted, consented bool
	}{{"GET", false, false, false}, {"signed in / tapped", true, true, false}, {"allowed", true, true, true}}

	n := 0
	for _, ss := range sessions {
		for _, pr := range prompts {
			for _, maxAge := range maxAges {
				for _, hint := range hints {
					for _, covers := range []bool{false, true} {
						for _, public := range []bool{false, true} {
							for _, skip := range []bool{false, true} {
								for _, ru := range redirects {
									for _, sso := range []string{SilentSSOAssured, SilentSSONever} {
										for _, d := range dones {
											for _, factor := range []bool{false, true} {
												in := stepInput{now: testNow, promptLogin: pr.login, promptConsent: pr.consent, promptSelectAccount: pr.selectAccount,
													maxAge: maxAge, hintSubject: hint, public: public, skipConsent: skip,
													redirectURI: ru, silentSSO: sso, session: ss.s, consentCovers: covers,
													factorRequired: factor, proven: d.proven, interacted: d.interacted, consented: d.consented}
												name := fmt.Sprintf("session=%s prompt=%q max_age=%d hint=%q covers=%v public=%v first-party=%v redirect=%s sso=%s done=%s factor=%v",
													ss.name, pr.name, maxAge, hint, covers, public, skip, ru, sso, d.name, factor)
												checkDecision(t, name, in)
												n++
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations", n)
}

// checkDecision asserts the flow's rules on one input.
func checkDecision(t *testing.T, name string, in stepInput) {
	t.Helper()
	st := decide(in)
	s := in.session
	// What each step's check requires, written as the rules rather than
	// as decide's code.
	signedIn := s != nil
	fresh := signedIn && (in.proven || (!in.promptLogin &&
		(in.maxAge < 0 || in.now.Sub(s.authTime) <= time.Duration(in.maxAge)*time.Second) &&
		(in.hintSubject == "" || in.hintSubject == s.subject)))
	factorOK := signedIn && (!in.factorRequired || s.factor)
	consentOK := in.consented || (!in.promptConsent && (in.skipConsent || in.consentCovers))
	assured := (!in.public || in.redirectURI.Scheme == "https") && in.silentSSO == SilentSSOAssured
	// prompt=select_account: the one-tap page offers "Not you?".
	tapOK := in.interacted || (assured && !in.promptSelectAccount)

	var want step
	switch {
	case !signedIn:
		want = stepSignIn
	case !fresh:
		want = stepReauth
	case !factorOK:
		want = stepFactor
	case !consentOK:
		want = stepConsent
	case !tapOK:
		want = stepConfirm
	default:
		want = stepIssue
	}
	if st != want {
		t.Fatalf("%s: decide = %s, want %s", name, st, want)
	}
	// Safety, whatever the order: a code only for a session that passed
	// every check.
	if st == stepIssue && !(signedIn && fresh && factorOK && consentOK && tapOK) {
		t.Fatalf("%s: issues a code with a check missing", name)
	}
	if in.promptLogin && !in.proven && st != stepSignIn && st != stepReauth {
		t.Fatalf("%s: prompt=login without a fresh sign-in went on to %s", name, st)
	}
	if in.public && in.redirectURI.Scheme != "https" && !in.interacted && st == stepIssue {
		t.Fatalf("%s: a code to an unassured public client without interaction (RFC 8252 §8.6)", name)
	}
	// What the request has done only moves the flow forward.
	more := in
	more.proven, more.interacted = true, true
	if decide(more) < st && decide(more) != stepSignIn {
		t.Fatalf("%s: signing in moved the flow back from %s to %s", name, st, decide(more))
	}
	// prompt=none: the same decision, as its error.
	code := silentCode(st)
	wantCode := map[step]string{stepSignIn: "login_required", stepReauth: "login_required", stepFactor: "login_required",
		stepConsent: "consent_required", stepConfirm: "interaction_required", stepIssue: ""}[st]
	if code != wantCode {
		t.Fatalf("%s: prompt=none answers %q for %s, want %q", name, code, st, wantCode)
	}
}
