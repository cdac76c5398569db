package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/authd/authd/passkey/passkeytest"
)

// The passkey mode (issue 24): a returning user signs in with a passkey
// on a new browser (no session) and the code is exchanged. Before the
// timed phase each worker signs in with the password once and adds a
// passkey on the account page, made by a software authenticator (ES256,
// attestation "none"), as a browser would. An iteration is:
//
//	authorize  GET the authorization request: the login page
//	options    POST /signin/passkey/options with the page's CSRF token
//	login      sign the challenge (the authenticator, on this side) and
//	           post the assertion with step=login&method=passkey: the code
//	token      exchange the code
//
// Each worker keeps its own credential and signs in with it one at a
// time, so its signature counter only moves forward (a concurrent pair
// arriving out of order would look like a cloned authenticator).
//
// The server must offer passkeys: its issuer a domain name
// (bench/run.sh serves on http://localhost:PORT); the authenticator
// reports the issuer (from the discovery metadata) as the page's origin.

func init() {
	modes["passkey"] = mode{
		steps:   []string{"authorize", "options", "login", "token"},
		check:   needPublicClient(true),
		prepare: preparePasskeys,
		iter:    iterPasskey,
	}
}

// passkeyState is the run's authenticator and the workers' credentials.
type passkeyState struct {
	auth  *passkeytest.Authenticator
	mu    sync.Mutex
	creds map[int]*passkeytest.Credential // by worker id
}

var passkeys passkeyState

var enrolCSRFRe = regexp.MustCompile(`data-passkey-enrol data-csrf="([^"]+)"`)

// preparePasskeys enrols a passkey for each worker (untimed).
func preparePasskeys(ctx context.Context, r *runner) error {
	var meta struct {
		Issuer string `json:"issuer"`
	}
	if err := r.getJSON(ctx, "/.well-known/openid-configuration", &meta); err != nil || meta.Issuer == "" {
		return fmt.Errorf("discovery: %v", err)
	}
	u, err := url.Parse(meta.Issuer)
	if err != nil {
		return fmt.Errorf("discovery: issuer %q: %v", meta.Issuer, err)
	}
	passkeys = passkeyState{auth: &passkeytest.Authenticator{Origin: u.Scheme + "://" + u.Host}, creds: map[int]*passkeytest.Credential{}}
	r.progress.status("passkey: adding a passkey for each of %d workers (not timed)", len(r.workers))
	// One session adds them all: once the user has a passkey, a password
	// sign-in asks for it as the second factor.
	if len(r.workers) == 0 {
		return nil
	}
	b := r.newBrowser()
	if _, _, err := r.workers[0].signIn(ctx, b, false); err != nil {
		return err
	}
	for _, w := range r.workers {
		if err := w.enrolPasskey(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// enrolPasskey adds a passkey for w on the account page of b's session.
func (w *worker) enrolPasskey(ctx context.Context, b *http.Client) error {
	r := w.r
	status, _, body, err := r.get(ctx, b, r.o.Target+"/account")
	if err != nil {
		return err
	}
	m := enrolCSRFRe.FindSubmatch(body)
	if status != http.StatusOK || m == nil {
		return &checkError{"account page without \"Add a passkey\": are passkeys on (a domain-name issuer)?"}
	}
	csrf := html.UnescapeString(string(m[1]))
	opts, err := r.postJSON(ctx, b, "/account/passkeys/options", csrf, nil, http.StatusOK)
	if err != nil {
		return err
	}
	cred, answer, err := passkeys.auth.Create(opts)
	if err != nil {
		return err
	}
	body, _ = json.Marshal(map[string]any{"credential": json.RawMessage(answer), "name": fmt.Sprintf("authbench %d", w.id)})
	if _, err := r.postJSON(ctx, b, "/account/passkeys", csrf, body, http.StatusCreated); err != nil {
		return err
	}
	passkeys.mu.Lock()
	passkeys.creds[w.id] = cred
	passkeys.mu.Unlock()
	return nil
}

// postJSON posts body (nil: {}) as the page's script does, same-origin
// with the CSRF token, and returns the answer if its status is want.
func (r *runner) postJSON(ctx context.Context, b *http.Client, path, csrf string, body []byte, want int) ([]byte, error) {
	if body == nil {
		body = []byte("{}")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.o.Target+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	status, _, answer, err := send(b, req)
	if err != nil {
		return nil, err
	}
	if status != want {
		return nil, &httpError{status: status, code: "(" + path + ": " + strings.TrimSpace(string(answer)) + ")"}
	}
	return answer, nil
}

// iterPasskey is one passkey sign-in on a new browser, then the exchange.
func iterPasskey(ctx context.Context, w *worker) error {
	r := w.r
	passkeys.mu.Lock()
	cred := passkeys.creds[w.id]
	passkeys.mu.Unlock()
	b := r.newBrowser()
	state := w.nextState()
	authURL, verifier := r.authorizeURL(state)
	var f form
	err := w.step("authorize", func() error {
		status, _, body, err := r.get(ctx, b, authURL)
		if err != nil {
			return err
		}
		var ok bool
		if f, ok = parseForm(body); status != http.StatusOK || !ok || !bytes.Contains(body, []byte("data-passkey-signin")) {
			return &httpError{status: status, code: "(expected the login page with a passkey button)"}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var opts []byte
	if err := w.step("options", func() error {
		opts, err = r.postJSON(ctx, b, "/signin/passkey/options", f.csrf, nil, http.StatusOK)
		return err
	}); err != nil {
		return err
	}
	var code string
	if err := w.step("login", func() error {
		answer, err := passkeys.auth.Get(cred, opts)
		if err != nil {
			return err
		}
		status, loc, _, err := r.submit(ctx, b, f, url.Values{"step": {"login"}, "method": {"passkey"}, "credential": {string(answer)}})
		if err != nil {
			return err
		}
		code, err = r.codeFrom(status, loc, state)
		return err
	}); err != nil {
		return err
	}
	return w.step("token", func() error {
		_, err := r.exchangeCode(ctx, code, verifier)
		return err
	})
}
