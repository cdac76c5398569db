package oauth

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// The Authorization Challenge Endpoint (draft-ietf-oauth-first-party-apps-04,
// docs/architecture.md "First-party apps"): a first-party app's native
// sign-in. The app POSTs what the user typed and gets either an
// authorization code (redeemed at the token endpoint with PKCE, §6) or the
// next challenge. This file is the HTTP side, read top to bottom as the
// token pipeline is: parse, authenticate the client, refuse what is not
// first-party, parse the step, the client's rate limit, DPoP, the step's replay identity, the
// exchange (challenge_step.go; the replay cache in front of it), one
// writer. Every answer is RFC 6749 §5.2 JSON with Cache-Control: no-store.
//
// Parameters (application/x-www-form-urlencoded, each at most once):
//
//   - client_id on every request, and the client's authentication when it
//     is confidential (as at the token endpoint, §4.1);
//   - the first request (no auth_session): response_type=code (optional),
//     scope, code_challenge and code_challenge_method=S256 (required: authd
//     requires PKCE everywhere), and optionally nonce, acr_values,
//     prompt=consent, and redirect_uri, state and login_hint (used only by
//     a redirect_to_web, but checked on the first request: text, a
//     registered redirect_uri, a state of 8 characters or more, prompt
//     values of OIDC Core §3.1.2.1);
//   - auth_session on every later request (§5.2.2);
//   - exactly one input: username and password; otp (a TOTP or recovery
//     code); passkey=options (ask for a passkey challenge); or
//     passkey_assertion (the PublicKeyCredential as JSON, WebAuthn L3
//     §5.1, base64url members, as the browser's toJSON gives it).

// pathChallenge is the endpoint (authorization_challenge_endpoint, §4.1).
const pathChallenge = "/oauth2/challenge"

// Challenge parameters.
const (
	paramAuthSession      = "auth_session"
	paramPasskey          = "passkey"           // value "options"
	paramPasskeyAssertion = "passkey_assertion" // the credential JSON
)

// Bounds of the inputs (the body is bounded by limitBody too).
const (
	maxChallengeValue = 1024     // username, password, otp, acr_values, prompt, login_hint
	maxAssertionLen   = 16 << 10 // a passkey assertion
	maxRedirectURILen = 2048
)

// inputKind is what the user sent in a step.
type inputKind int

const (
	inputPassword inputKind = iota + 1
	inputOTP
	inputPasskeyOptions
	inputPasskeyAssertion
)

// challengeStep is one parsed request of the endpoint.
type challengeStep struct {
	// handle is the auth_session ("" on the first request).
	handle string
	// The first request's authorization parameters: the S256
	// code_challenge, the scopes, and nonce, acr_values, prompt,
	// redirect_uri and login_hint (params).
	codeChallenge string
	scope         []string
	params        url.Values
	// kind and fields are the user's input.
	kind   inputKind
	fields url.Values
}

// challengeReply is the endpoint's answer to a step, as stored (sealed) in
// the replay record and the replay cache: a retry gets these bytes.
type challengeReply struct {
	status int
	body   []byte
}

// codeChallengeRe is RFC 7636 §4.2's S256 code_challenge: base64url of 32
// bytes.
var codeChallengeRe = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// handleChallenge serves the endpoint.
func (s *Server) handleChallenge(w http.ResponseWriter, r *http.Request) {
	req := &tokenRequest{r: r, grantType: "challenge", htu: pathChallenge}
	a, err := s.challenge(req)
	s.writeChallenge(w, req, a, err)
}

// challenge runs the pipeline up to the exchange.
func (s *Server) challenge(req *tokenRequest) (*answer, error) {
	r := req.r
	ctx := r.Context()
	// §4.1: the client authenticates as at the token endpoint; nothing is
	// answered about the step to a client that does not.
	client, err := s.formClient(r)
	if err != nil {
		return nil, err
	}
	req.client = client
	// §10.1 (first-party applications only): the operator registered
	// the client first_party; any other client may not use the endpoint.
	c, ok := client.(*storage.Client)
	if !ok || !c.FirstParty {
		return nil, fosite.ErrUnauthorizedClient.WithHint("The client is not registered as a first-party app (first_party) and may not use the authorization challenge endpoint.")
	}
	if !slices.Contains(c.GrantTypes, "authorization_code") {
		return nil, fosite.ErrUnauthorizedClient.WithHint("The client is not registered for the authorization_code grant.")
	}
	step, err := parseChallenge(r.PostForm)
	if err != nil {
		return nil, err
	}
	for _, sc := range step.scope {
		if !fosite.ExactScopeStrategy(c.GetScopes(), sc) {
			return nil, fosite.ErrInvalidScope.WithHintf("The client may not request the scope %s.", truncate(sc, 40))
		}
	}
	if u := step.params.Get("redirect_uri"); u != "" {
		// Used only by a redirect_to_web, but checked now: the app
		// learns of a wrong one before the user types anything.
		if _, err := fosite.MatchRedirectURIWithClientRedirectURIs(u, c); err != nil {
			return nil, fosite.ErrInvalidRequest.WithHint("The redirect_uri is not one the client registered.")
		}
	}
	req.step = step
	// The client's request budget, as at the token endpoint
	// (AUTHD_TOKEN_RATE_LIMIT); the password's own back-off is the
	// login page's (signin/pwd).
	if err := s.chargeClient(ctx, client); err != nil {
		return nil, err
	}
	// A request that starts a sign-in or asks for a passkey challenge
	// writes single-use rows (an auth_session, a ceremony): the source
	// address's budget of the sign-in methods' own routes
	// (AUTHD_SIGNIN_RATE_LIMIT, limitMethodRoute).
	if step.handle == "" || step.kind == inputPasskeyOptions {
		if ok, wait := s.limits.Take(ctx, "signin-route", clientIP(r), s.cfg.MethodRouteLimits.rate()); !ok {
			return nil, errTooManyRequests(wait, "Too many sign-ins started from this address; retry after the Retry-After delay.")
		}
	}
	// §9, RFC 9449: a proof binds the auth_session (and the code) to its
	// key. Checked before anything is read or consumed.
	if err := s.checkDPoP(ctx, req, requiresDPoP(client)); err != nil {
		return nil, err
	}
	req.id = challengeIdentity(s.challengeKey, client.GetID(), req.jkt, step)
	return s.challenger.exchange(withClient(ctx, client), req)
}

// parseChallenge checks the form of a step (400 invalid_request; an
// auth_session that cannot be one is invalid_session).
func parseChallenge(form url.Values) (*challengeStep, error) {
	for k, v := range form {
		limit := maxChallengeValue
		switch k {
		case paramPasskeyAssertion:
			limit = maxAssertionLen
		case "scope", "redirect_uri":
			limit = maxRedirectURILen
		case "client_assertion":
			continue
		}
		if len(v[0]) > limit {
			return nil, fosite.ErrInvalidRequest.WithHintf("The parameter %s is too long.", url.QueryEscape(truncate(k, 40)))
		}
	}
	st := &challengeStep{handle: form.Get(paramAuthSession)}
	if st.handle != "" {
		if len(st.handle) != 43 {
			return nil, errInvalidSession
		}
	} else {
		if rt := form.Get("response_type"); rt != "" && rt != "code" {
			return nil, fosite.ErrUnsupportedResponseType.WithHint("The authorization challenge endpoint issues codes only (response_type=code).")
		}
		st.codeChallenge = form.Get("code_challenge")
		switch {
		case st.codeChallenge == "":
			return nil, fosite.ErrInvalidRequest.WithHint("The first request must carry a PKCE code_challenge (RFC 7636); authd requires PKCE.")
		case form.Get("code_challenge_method") != "S256":
			return nil, fosite.ErrInvalidRequest.WithHint("code_challenge_method must be S256 (RFC 7636 Section 4.3).")
		case !codeChallengeRe.MatchString(st.codeChallenge):
			return nil, fosite.ErrInvalidRequest.WithHint("The code_challenge must be the base64url SHA-256 of the code_verifier (RFC 7636 Section 4.2).")
		case len(form.Get("nonce")) > maxNonceLen:
			return nil, fosite.ErrInvalidRequest.WithHint("The nonce parameter is longer than 512 bytes.")
		}
		st.scope = strings.Fields(form.Get("scope"))
		if _, err := parseACR(form); err != nil {
			return nil, err
		}
		st.params = url.Values{}
		for _, k := range []string{"scope", "nonce", "acr_values", "prompt", "redirect_uri", "login_hint", "state"} {
			v := form.Get(k)
			// These reach the code's stored request, the ID token and a
			// redirect_to_web's pushed request: text only, refused here
			// rather than failing the step's commit.
			if !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
				return nil, fosite.ErrInvalidRequest.WithHintf("The parameter %s must be UTF-8 text without control characters.", k)
			}
			if v != "" && k != "scope" {
				st.params.Set(k, v)
			}
		}
		prompts := strings.Fields(st.params.Get("prompt"))
		for _, v := range prompts {
			if !openidPromptValues[v] || (v == "none" && len(prompts) > 1) {
				return nil, fosite.ErrInvalidRequest.WithHint("prompt takes none, login, consent or select_account, none alone (OpenID Connect Core Section 3.1.2.1).")
			}
		}
		if v := st.params.Get("state"); v != "" && len(v) < fosite.MinParameterEntropy {
			return nil, fosite.ErrInvalidRequest.WithHintf("The state must be at least %d characters long.", fosite.MinParameterEntropy)
		}
	}
	n := 0
	if form.Has("username") || form.Has("password") {
		n++
		st.kind, st.fields = inputPassword, url.Values{"username": {form.Get("username")}, "password": {form.Get("password")}}
		if form.Get("username") == "" || form.Get("password") == "" {
			return nil, fosite.ErrInvalidRequest.WithHint("A password step sends both username and password.")
		}
	}
	if form.Has("otp") {
		n++
		st.kind, st.fields = inputOTP, url.Values{"otp": {form.Get("otp")}}
	}
	if form.Has(paramPasskey) {
		n++
		st.kind, st.fields = inputPasskeyOptions, url.Values{}
		if form.Get(paramPasskey) != "options" {
			return nil, fosite.ErrInvalidRequest.WithHint("passkey=options asks for a passkey challenge; send the answer as passkey_assertion.")
		}
	}
	if form.Has(paramPasskeyAssertion) {
		n++
		st.kind, st.fields = inputPasskeyAssertion, url.Values{"credential": {form.Get(paramPasskeyAssertion)}}
	}
	switch {
	case n == 0:
		return nil, fosite.ErrInvalidRequest.WithHint("Send one input: username and password, otp, passkey=options or passkey_assertion.")
	case n > 1:
		return nil, fosite.ErrInvalidRequest.WithHint("Send one input per request.")
	case st.kind == inputPasskeyAssertion && st.handle == "":
		return nil, fosite.ErrInvalidRequest.WithHint("A passkey_assertion answers the challenge of an auth_session (ask with passkey=options first).")
	}
	return st, nil
}

// challengeIdentity is a step's replay identity (docs/architecture.md,
// "First-party apps"): the same client, DPoP key, auth_session (or, on the
// first request, code_challenge and authorization parameters) and input
// is the same request. Key and fingerprint are HMACs under the system
// secret, never plain hashes: the input holds a password, which a plain
// hash would expose to a dictionary. The answer is sealed under what the
// caller presented, so neither Redis nor the record opens without it.
func challengeIdentity(k []byte, clientID, jkt string, st *challengeStep) exchangeIdentity {
	anchor := "s\x00" + st.handle
	if st.handle == "" {
		anchor = "c\x00" + st.codeChallenge + "\x00" + strings.Join(st.scope, " ") + "\x00" + st.params.Encode()
	}
	presented := anchor + "\x00" + strconv.Itoa(int(st.kind)) + "\x00" + st.fields.Encode()
	mac := func(purpose string) string {
		return hex.EncodeToString(secrets.MAC(k, []byte(purpose), []byte(clientID), []byte(jkt), []byte(presented)))
	}
	return exchangeIdentity{key: "a:" + mac("key"), fingerprint: mac("fingerprint"), presented: presented}
}

// errInvalidSession is draft §5.2.2's invalid_session: the auth_session
// is unknown, expired, used up, or not this client's or this DPoP key's.
var errInvalidSession = &fosite.RFC6749Error{
	ErrorField:       "invalid_session",
	DescriptionField: "The auth_session is invalid, expired, or already used; start a new sign-in.",
	CodeField:        http.StatusBadRequest,
}

// sealReply seals a reply for the replay record and cache.
func sealReply(sealKey []byte, id exchangeIdentity, r *challengeReply) ([]byte, error) {
	plain := append([]byte(strconv.Itoa(r.status)+"\n"), r.body...)
	return exchangecache.Seal(sealKey, id.presented, id.key, plain)
}

// openChallenge opens a sealed reply for req (false: it does not open).
func openChallenge(sealKey []byte, req *tokenRequest, sealed []byte) (*answer, bool) {
	plain, err := exchangecache.Open(sealKey, req.id.presented, req.id.key, sealed)
	if err != nil {
		return nil, false
	}
	st, body, ok := strings.Cut(string(plain), "\n")
	status, err := strconv.Atoi(st)
	if !ok || err != nil {
		return nil, false
	}
	return &answer{reply: &challengeReply{status: status, body: []byte(body)}, sealed: sealed}, true
}

// writeChallenge is the endpoint's one writer.
func (s *Server) writeChallenge(w http.ResponseWriter, req *tokenRequest, a *answer, err error) {
	s.setDPoPNonce(w, req, err)
	if err != nil {
		outcome := toRFC6749(err).ErrorField
		var later *retryLater
		if errors.As(err, &later) {
			outcome = "rate_limited"
		}
		s.metrics.tokenRequests.WithLabelValues("challenge", outcome).Inc()
		s.writeError(w, req.r, err)
		return
	}
	outcome := "ok"
	if a.path != pathFresh {
		outcome = "replayed"
	}
	s.metrics.tokenRequests.WithLabelValues("challenge", outcome).Inc()
	writeJSONBytes(w, a.reply.status, a.reply.body)
}

// challengeSteps is the exchanger of the challenge endpoint: the step
// itself (challenge_step.go) behind the same replay cache as the token
// endpoint's exchanges.
type challengeSteps struct{ s *Server }

func (c challengeSteps) exchange(ctx context.Context, req *tokenRequest) (*answer, error) {
	return c.s.challengeExchange(ctx, req)
}

// challengeWindow is how long a step's answer is replayed: the token
// endpoint's window (AUTHD_REPLAY_WINDOW).
func (s *Server) challengeWindow() time.Duration {
	if s.cfg.DisableReplay {
		return 0
	}
	return s.cfg.ReplayWindow
}
