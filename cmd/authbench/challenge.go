package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
)

// The challenge mode (issue 28): a first-party app's native sign-in at the
// authorization challenge endpoint, password-less (a passkey: no argon2id
// hash in the timed phase), then the exchange. Before the timed phase
// each worker gets a passkey as in the passkey mode (preparePasskeys). An
// iteration is:
//
//	options  POST /oauth2/challenge with the authorization parameters and
//	         passkey=options: 403 insufficient_authorization with the
//	         auth_session and passkey_options
//	login    sign the challenge and POST auth_session and
//	         passkey_assertion: 200 with the authorization_code
//	token    exchange the code (PKCE, no redirect_uri: draft §6)
//
// -client-id must be a public client registered first_party (and
// skip_consent, for the untimed browser sign-in that adds the passkeys).

func init() {
	modes["challenge"] = mode{
		steps:   []string{"options", "login", "token"},
		check:   needPublicClient(true),
		prepare: preparePasskeys,
		iter:    iterChallenge,
	}
}

// challengeAnswer is what the mode reads of an answer.
type challengeAnswer struct {
	Code           string          `json:"authorization_code"`
	Error          string          `json:"error"`
	AuthSession    string          `json:"auth_session"`
	PasskeyOptions json.RawMessage `json:"passkey_options"`
}

// challenge posts form to the endpoint and wants status.
func (r *runner) challenge(ctx context.Context, form url.Values, want int) (challengeAnswer, error) {
	var a challengeAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.o.Target+"/oauth2/challenge", strings.NewReader(form.Encode()))
	if err != nil {
		return a, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	status, _, body, err := send(r.client, req)
	if err != nil {
		return a, err
	}
	_ = json.Unmarshal(body, &a)
	if status != want {
		return a, &httpError{status: status, code: a.Error}
	}
	return a, nil
}

func iterChallenge(ctx context.Context, w *worker) error {
	r := w.r
	passkeys.mu.Lock()
	cred := passkeys.creds[w.id]
	passkeys.mu.Unlock()
	verifier := oauth2.GenerateVerifier()
	scope := r.o.Scope
	if scope == "" {
		scope = "openid offline_access"
	}
	var opts challengeAnswer
	err := w.step("options", func() error {
		var err error
		opts, err = r.challenge(ctx, url.Values{"client_id": {r.o.ClientID}, "response_type": {"code"}, "scope": {scope},
			"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"},
			"passkey": {"options"}}, http.StatusForbidden)
		if err == nil && (opts.AuthSession == "" || len(opts.PasskeyOptions) == 0) {
			err = &checkError{"options without auth_session or passkey_options"}
		}
		return err
	})
	if err != nil {
		return err
	}
	var code string
	if err := w.step("login", func() error {
		answer, err := passkeys.auth.Get(cred, []byte(`{"publicKey":`+string(opts.PasskeyOptions)+`}`))
		if err != nil {
			return err
		}
		a, err := r.challenge(ctx, url.Values{"client_id": {r.o.ClientID}, "auth_session": {opts.AuthSession},
			"passkey_assertion": {string(answer)}}, http.StatusOK)
		if err == nil && a.Code == "" {
			err = &checkError{"200 without authorization_code"}
		}
		code = a.Code
		return err
	}); err != nil {
		return err
	}
	return w.step("token", func() error {
		tb, err := r.postForm(ctx, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"client_id": {r.o.ClientID}, "code_verifier": {verifier}}.Encode(), false)
		if err == nil && tb.AccessToken == "" {
			err = &checkError{"token response without access_token"}
		}
		return err
	})
}
