package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
)

// modes are the load modes by -mode name.
var modes = map[string]mode{
	"login": {
		steps: []string{"authorize", "login", "consent", "token"},
		check: needPublicClient(true),
		iter:  iterLogin,
	},
	"sso": {
		steps:   []string{"authorize", "token"},
		check:   needPublicClient(true),
		prepare: prepareSignIn,
		iter:    iterSSO,
	},
	"exchange": {
		steps:   []string{"token"},
		check:   needPublicClient(true),
		prepare: prepareExchange,
		iter:    iterExchange,
	},
	"replay": {
		steps:   []string{"token"},
		check:   needPublicClient(true),
		prepare: prepareReplay,
		iter:    iterReplay,
	},
	"refresh": {
		steps:   []string{"refresh"},
		check:   needPublicClient(true),
		prepare: prepareRefresh,
		iter:    iterRefresh,
	},
	"introspect": {
		steps:   []string{"introspect"},
		check:   needConfidentialClient,
		prepare: prepareIntrospect,
		iter:    iterIntrospect,
	},
	"client-credentials": {
		steps: []string{"token"},
		check: needConfidentialClient,
		iter:  iterClientCredentials,
	},
	"sso-consent": {
		steps:   []string{"authorize", "token"},
		check:   needThirdPartyClient,
		prepare: prepareConsent,
		iter:    iterSSOConsent,
		finish:  finishConsent,
	},
	"burst": {
		// "token" is the exchange before the burst; finish adds
		// "token-burst" and "signin".
		steps:   []string{"token"},
		check:   checkBurst,
		prepare: prepareBurst,
		iter:    iterBurstExchange,
		timed:   runBurst,
		finish:  finishBurst,
	},
	"ceiling-http": {
		steps: []string{"token"},
		check: func(*options) error { return nil },
		iter:  iterCeilingHTTP,
	},
}

func needPublicClient(password bool) func(*options) error {
	return func(o *options) error {
		if o.ClientID == "" {
			return usagef("-client-id: required for -mode %s (a public, skip_consent client)", o.Mode)
		}
		if password && o.Password == "" {
			return usagef("-password (or AUTHBENCH_PASSWORD): required for -mode %s", o.Mode)
		}
		if o.Scope == "" {
			o.Scope = "openid offline_access"
		}
		return nil
	}
}

func needConfidentialClient(o *options) error {
	if o.ClientID == "" || o.ClientSecret == "" {
		return usagef("-client-id and -client-secret: required for -mode %s (a confidential client allowed the client_credentials grant)", o.Mode)
	}
	return nil
}

// ---- HTTP plumbing ----

// tokenBody is what authbench reads from token and introspection answers.
type tokenBody struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	IDToken      string `json:"id_token"`
	Error        string `json:"error"`
	Active       *bool  `json:"active"`
}

// send performs req with c and returns status, Location and body.
func send(c *http.Client, req *http.Request) (int, string, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, "", nil, err
	}
	return resp.StatusCode, resp.Header.Get("Location"), body, nil
}

// basicAuth is the Authorization header value for the confidential client
// (RFC 6749 §2.3.1: both parts form-urlencoded first).
func (r *runner) basicAuth() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(r.o.ClientID)+":"+url.QueryEscape(r.o.ClientSecret)))
}

// postForm posts form to path on the target and decodes a JSON answer.
// Anything but 200 becomes an *httpError with the OAuth error code.
func (r *runner) postForm(ctx context.Context, path, form string, basic bool) (tokenBody, error) {
	var tb tokenBody
	body, err := r.postFormRaw(ctx, path, form, basic)
	if err != nil {
		return tb, err
	}
	if err := json.Unmarshal(body, &tb); err != nil {
		return tb, &checkError{"200 with a body that is not JSON"}
	}
	return tb, nil
}

// postFormRaw posts form to path on the target and returns the body of a
// 200 answer, undecoded. Anything but 200 becomes an *httpError with the
// OAuth error code.
func (r *runner) postFormRaw(ctx context.Context, path, form string, basic bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.o.Target+path, strings.NewReader(form))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.Header.Set("Authorization", r.basicAuth())
	}
	var (
		status int
		body   []byte
	)
	if r.dpop != nil && path == "/oauth2/token" {
		status, body, err = r.sendDPoP(req, form)
	} else {
		status, _, body, err = send(r.client, req)
	}
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		var tb tokenBody
		code := "(no OAuth error)"
		if json.Unmarshal(body, &tb) == nil && tb.Error != "" {
			code = tb.Error
		}
		return nil, &httpError{status: status, code: code}
	}
	return body, nil
}

// accessToken returns the access_token of a token response without
// decoding the rest of it (the replay and ceiling modes check only that
// one value, at a rate where a full JSON decode of a response with an ID
// token was a tenth of the load generator's CPU). Tokens are unescaped
// ASCII; a body without the member, or with an escaped one, gives "".
func accessToken(body []byte) string {
	const key = `"access_token":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return ""
	}
	return string(rest[:j])
}

// sendDPoP sends a token request with a fresh DPoP proof; a
// use_dpop_nonce answer (RFC 9449 §8) is retried once with the new nonce,
// as a client library does (the round trip consumes nothing).
func (r *runner) sendDPoP(req *http.Request, form string) (int, []byte, error) {
	for attempt := 0; ; attempt++ {
		if err := r.dpop.sign(req); err != nil {
			return 0, nil, err
		}
		resp, err := r.client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return resp.StatusCode, nil, err
		}
		r.dpop.observe(resp.Header)
		if resp.StatusCode == http.StatusBadRequest && attempt == 0 && strings.Contains(string(body), `"use_dpop_nonce"`) {
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(strings.NewReader(form))
			continue
		}
		return resp.StatusCode, body, nil
	}
}

// newBrowser returns a client with its own cookie jar that does not follow
// redirects (the last one goes to the app's redirect_uri).
func (r *runner) newBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Transport: r.transport, Jar: jar, CheckRedirect: noRedirect, Timeout: r.o.Timeout}
}

// authorizeURL returns an authorization request with a fresh PKCE
// verifier (S256) and a unique state, plus opts (nonce, prompt).
func (r *runner) authorizeURL(state string, opts ...oauth2.AuthCodeOption) (authURL, verifier string) {
	conf := oauth2.Config{
		ClientID:    r.o.ClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: r.o.Target + "/oauth2/authorize"},
		RedirectURL: r.o.RedirectURI,
		Scopes:      strings.Fields(r.o.Scope),
	}
	verifier = oauth2.GenerateVerifier()
	return conf.AuthCodeURL(state, append(opts, oauth2.S256ChallengeOption(verifier))...), verifier
}

func (w *worker) nextState() string {
	w.n++
	return "authbench-" + strconv.Itoa(w.id) + "-" + strconv.Itoa(w.n)
}

// codeFrom checks an authorization response redirect (RFC 6749 §4.1.2,
// RFC 9207) and returns the code.
func (r *runner) codeFrom(status int, loc, state string) (string, error) {
	if status != http.StatusSeeOther && status != http.StatusFound {
		return "", &httpError{status: status, code: "(expected a redirect)"}
	}
	if !strings.HasPrefix(loc, r.o.RedirectURI) {
		return "", &checkError{"redirect to another URI than -redirect-uri"}
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "", &checkError{"unparsable redirect"}
	}
	q := u.Query()
	if e := q.Get("error"); e != "" {
		return "", &httpError{status: status, code: "redirect error=" + e}
	}
	if q.Get("state") != state {
		return "", &checkError{"state mismatch"}
	}
	if q.Get("iss") == "" {
		return "", &checkError{"no iss in the authorization response"}
	}
	code := q.Get("code")
	if code == "" {
		return "", &checkError{"no code in the authorization response"}
	}
	return code, nil
}

var (
	csrfRe   = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	actionRe = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
)

// form is an HTML form on a login or consent page.
type form struct {
	action, csrf string
	consent      bool
	// session is the hidden field binding a consent or one-tap form to
	// the session it was shown for; oneTap marks the one-tap page
	// ("Continue as …", RFC 8252 §8.6).
	session string
	oneTap  bool
}

var sessionFieldRe = regexp.MustCompile(`name="session" value="([^"]*)"`)

func parseForm(body []byte) (form, bool) {
	m := csrfRe.FindSubmatch(body)
	a := actionRe.FindSubmatch(body)
	if m == nil || a == nil {
		return form{}, false
	}
	var session string
	if sm := sessionFieldRe.FindSubmatch(body); sm != nil {
		session = html.UnescapeString(string(sm[1]))
	}
	return form{
		action:  html.UnescapeString(string(a[1])),
		csrf:    html.UnescapeString(string(m[1])),
		consent: strings.Contains(string(body), `value="allow"`),
		session: session,
		oneTap:  strings.Contains(string(body), `value="continue"`),
	}, true
}

// get performs a GET with browser b.
func (r *runner) get(ctx context.Context, b *http.Client, u string) (int, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", nil, err
	}
	return send(b, req)
}

// submit posts fields plus the form's CSRF token, same-origin, as a
// browser does.
func (r *runner) submit(ctx context.Context, b *http.Client, f form, fields url.Values) (int, string, []byte, error) {
	fields.Set("csrf_token", f.csrf)
	if f.session != "" {
		fields.Set("session", f.session)
	}
	target := f.action
	if strings.HasPrefix(target, "/") {
		target = r.o.Target + target
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(fields.Encode()))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", r.o.Target)
	return send(b, req)
}

// exchangeCode redeems a code (public client, PKCE).
func (r *runner) exchangeCode(ctx context.Context, code, verifier string) (tokenBody, error) {
	tb, err := r.postForm(ctx, "/oauth2/token", r.exchangeForm(code, verifier), false)
	if err == nil && tb.AccessToken == "" {
		err = &checkError{"token response without access_token"}
	}
	return tb, err
}

// exchangeForm is the token request that redeems code with verifier.
func (r *runner) exchangeForm(code, verifier string) string {
	return url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {r.o.RedirectURI},
		"client_id":     {r.o.ClientID},
		"code_verifier": {verifier},
	}.Encode()
}

// ---- sign-in ----

// signIn walks authorize → login (password) → consent if shown, timing
// each step on w when timed, and returns the code and verifier. b keeps
// the session cookie.
func (w *worker) signIn(ctx context.Context, b *http.Client, timed bool) (code, verifier string, err error) {
	code, verifier, _, err = w.signInWith(ctx, b, timed)
	return code, verifier, err
}

// signInWith is signIn with extra authorization request parameters
// (opts); consented reports whether the consent page was shown and
// allowed.
func (w *worker) signInWith(ctx context.Context, b *http.Client, timed bool, opts ...oauth2.AuthCodeOption) (code, verifier string, consented bool, err error) {
	r := w.r
	do := func(name string, f func() error) error {
		if timed {
			return w.step(name, f)
		}
		return f()
	}
	state := w.nextState()
	authURL, verifier := r.authorizeURL(state, opts...)
	var f form
	err = do("authorize", func() error {
		status, loc, body, err := r.get(ctx, b, authURL)
		if err != nil {
			return err
		}
		if status == http.StatusOK {
			var ok bool
			if f, ok = parseForm(body); ok {
				return nil
			}
			return &checkError{"authorize: 200 without a login form"}
		}
		if loc != "" && strings.HasPrefix(loc, r.o.RedirectURI) {
			// Already signed in (should not happen with a new browser).
			code, err = r.codeFrom(status, loc, state)
			return err
		}
		return &httpError{status: status, code: "(expected the login page)"}
	})
	if err != nil || code != "" {
		return code, verifier, false, err
	}
	var status int
	var loc string
	var body []byte
	err = do("login", func() error {
		var err error
		status, loc, body, err = r.submit(ctx, b, f, url.Values{"step": {"login"}, "username": {r.o.User}, "password": {r.o.Password}})
		if err != nil {
			return err
		}
		switch {
		case status == http.StatusOK && strings.Contains(string(body), `name="password"`):
			return &httpError{status: status, code: "(login page again)"}
		case status == http.StatusUnauthorized:
			return &httpError{status: status, code: "(wrong username or password)"}
		case status == http.StatusOK:
			var ok bool
			if f, ok = parseForm(body); ok && f.consent {
				return nil
			}
			return &checkError{"login: 200 without a consent form"}
		}
		code, err = r.codeFrom(status, loc, state)
		return err
	})
	if err != nil || code != "" {
		return code, verifier, false, err
	}
	err = do("consent", func() error {
		status, loc, _, err := r.submit(ctx, b, f, url.Values{"step": {"consent"}, "decision": {"allow"}})
		if err != nil {
			return err
		}
		code, err = r.codeFrom(status, loc, state)
		return err
	})
	return code, verifier, err == nil, err
}

// ssoCode gets a code with w's signed-in browser (no password).
func (w *worker) ssoCode(ctx context.Context) (code, verifier string, err error) {
	r := w.r
	state := w.nextState()
	authURL, verifier := r.authorizeURL(state)
	status, loc, body, err := r.get(ctx, w.browser, authURL)
	if err != nil {
		return "", "", err
	}
	if status == http.StatusOK {
		f, ok := parseForm(body)
		if !ok || !f.oneTap {
			return "", "", &httpError{status: status, code: "(login page: session cookie not accepted)"}
		}
		// A public client with a private-use redirect: one tap on
		// "Continue", never a silent code (RFC 8252 §8.6).
		if status, loc, _, err = r.submit(ctx, w.browser, f, url.Values{"step": {"continue"}}); err != nil {
			return "", "", err
		}
	}
	code, err = r.codeFrom(status, loc, state)
	return code, verifier, err
}

// prepareSignIn gives each worker a signed-in browser (untimed).
func prepareSignIn(ctx context.Context, r *runner) error {
	r.progress.status("%s: signing in %d browsers (not timed)", r.o.Mode, len(r.workers))
	var wg sync.WaitGroup
	errs := make([]error, len(r.workers))
	for i, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.browser = r.newBrowser()
			_, _, errs[i] = w.signIn(ctx, w.browser, false)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ---- modes ----

// iterLogin is one full login on a new browser, password included.
func iterLogin(ctx context.Context, w *worker) error {
	b := w.r.newBrowser()
	code, verifier, err := w.signIn(ctx, b, true)
	if err != nil {
		return err
	}
	return w.step("token", func() error {
		_, err := w.r.exchangeCode(ctx, code, verifier)
		return err
	})
}

// iterSSO is one login on a signed-in browser, then the exchange.
func iterSSO(ctx context.Context, w *worker) error {
	var code, verifier string
	err := w.step("authorize", func() error {
		var err error
		code, verifier, err = w.ssoCode(ctx)
		return err
	})
	if err != nil {
		return err
	}
	return w.step("token", func() error {
		_, err := w.r.exchangeCode(ctx, code, verifier)
		return err
	})
}

type mintedCode struct {
	code, verifier string
}

// prepareExchange mints codes ahead: -n of them, or as many as -c
// signed-in browsers mint in -mint-time.
func prepareExchange(ctx context.Context, r *runner) error {
	if err := prepareSignIn(ctx, r); err != nil {
		return err
	}
	target := int64(r.o.Count)
	var deadline time.Time
	if target == 0 {
		deadline = time.Now().Add(r.o.MintTime)
		r.progress.status("exchange: minting codes for %s with %d browsers (not timed)", r.o.MintTime, len(r.workers))
	} else {
		r.progress.status("exchange: minting %d codes (not timed)", target)
	}
	var (
		mu      sync.Mutex
		n       atomic.Int64
		failed  atomic.Int64
		started = time.Now()
	)
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if target > 0 && n.Add(1) > target {
					return
				}
				if !deadline.IsZero() && time.Now().After(deadline) {
					return
				}
				code, v, err := w.ssoCode(ctx)
				if err != nil {
					if failed.Add(1) > 100 {
						return
					}
					n.Add(-1)
					continue
				}
				mu.Lock()
				r.codes = append(r.codes, mintedCode{code, v})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(r.codes) == 0 {
		return fmt.Errorf("no code minted (%d failures)", failed.Load())
	}
	r.prepStatus = fmt.Sprintf("%d codes minted in %.1fs (%.0f/s), %d failures", len(r.codes), time.Since(started).Seconds(),
		float64(len(r.codes))/time.Since(started).Seconds(), failed.Load())
	r.progress.status("exchange: %s", r.prepStatus)
	return nil
}

// iterExchange redeems the next minted code.
func iterExchange(ctx context.Context, w *worker) error {
	r := w.r
	i := r.codeNext.Add(1) - 1
	if i >= int64(len(r.codes)) {
		return errExhausted
	}
	c := r.codes[i]
	return w.step("token", func() error {
		_, err := r.exchangeCode(ctx, c.code, c.verifier)
		return err
	})
}

type replayEntry struct {
	mintedCode
	access string
	// form is the token request, encoded once.
	form string
}

// prepareReplay mints -pool codes and redeems each once; the timed phase
// repeats those exchanges, which the replay cache answers.
func prepareReplay(ctx context.Context, r *runner) error {
	if err := prepareSignIn(ctx, r); err != nil {
		return err
	}
	r.progress.status("replay: minting and redeeming %d codes (not timed)", r.o.Pool)
	r.replays = make([]replayEntry, r.o.Pool)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, len(r.workers))
	for i, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := next.Add(1) - 1
				if j >= int64(len(r.replays)) {
					return
				}
				code, v, err := w.ssoCode(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				tb, err := r.exchangeCode(ctx, code, v)
				if err != nil {
					errs[i] = err
					return
				}
				r.replays[j] = replayEntry{mintedCode{code, v}, tb.AccessToken, r.exchangeForm(code, v)}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.prepStatus = fmt.Sprintf("%d codes redeemed once; the timed requests repeat them", len(r.replays))
	return nil
}

// iterReplay repeats a redeemed exchange and checks it gets the same tokens.
func iterReplay(ctx context.Context, w *worker) error {
	r := w.r
	e := r.replays[int(r.codeNext.Add(1)-1)%len(r.replays)]
	return w.step("token", func() error {
		body, err := r.postFormRaw(ctx, "/oauth2/token", e.form, false)
		if err != nil {
			return err
		}
		switch got := accessToken(body); {
		case got == "":
			return &checkError{"200 without an access_token (or not JSON)"}
		case got != e.access:
			return &checkError{"replay returned another access_token"}
		}
		return nil
	})
}

// prepareRefresh gives each worker a token pair.
func prepareRefresh(ctx context.Context, r *runner) error {
	if err := prepareSignIn(ctx, r); err != nil {
		return err
	}
	r.progress.status("refresh: one token pair per worker (not timed)")
	var wg sync.WaitGroup
	errs := make([]error, len(r.workers))
	for i, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.newRefreshToken(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *worker) newRefreshToken(ctx context.Context) error {
	code, v, err := w.ssoCode(ctx)
	if err != nil {
		return err
	}
	tb, err := w.r.exchangeCode(ctx, code, v)
	if err != nil {
		return err
	}
	if tb.RefreshToken == "" {
		return fmt.Errorf("no refresh_token issued: the client needs the refresh_token grant and -scope must include offline_access")
	}
	w.refresh = tb.RefreshToken
	return nil
}

// iterRefresh rotates the worker's refresh token once.
func iterRefresh(ctx context.Context, w *worker) error {
	r := w.r
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {w.refresh}, "client_id": {r.o.ClientID}}.Encode()
	err := w.step("refresh", func() error {
		tb, err := r.postForm(ctx, "/oauth2/token", form, false)
		if err != nil {
			return err
		}
		if tb.RefreshToken == "" || tb.AccessToken == "" {
			return &checkError{"refresh response without a new token pair"}
		}
		w.refresh = tb.RefreshToken
		return nil
	})
	if err != nil {
		// The rotation may or may not have happened: start a new family
		// (not timed) so one failure does not fail every later request.
		if rerr := w.newRefreshToken(ctx); rerr != nil {
			return errExhausted
		}
	}
	return err
}

func (r *runner) clientCredentials(ctx context.Context) (tokenBody, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if r.o.Scope != "" {
		form.Set("scope", r.o.Scope)
	}
	tb, err := r.postForm(ctx, "/oauth2/token", form.Encode(), true)
	if err == nil && tb.AccessToken == "" {
		err = &checkError{"token response without access_token"}
	}
	return tb, err
}

// prepareIntrospect issues -pool access tokens with client_credentials.
func prepareIntrospect(ctx context.Context, r *runner) error {
	r.progress.status("introspect: issuing %d access tokens with client_credentials (not timed)", r.o.Pool)
	for range r.o.Pool {
		tb, err := r.clientCredentials(ctx)
		if err != nil {
			return fmt.Errorf("client_credentials: %w", err)
		}
		r.tokens = append(r.tokens, tb.AccessToken)
	}
	return nil
}

// iterIntrospect introspects one of the tokens; it must be active.
func iterIntrospect(ctx context.Context, w *worker) error {
	r := w.r
	tok := r.tokens[int(r.codeNext.Add(1)-1)%len(r.tokens)]
	form := url.Values{"token": {tok}, "token_type_hint": {"access_token"}}.Encode()
	return w.step("introspect", func() error {
		tb, err := r.postForm(ctx, "/oauth2/introspect", form, true)
		if err != nil {
			return err
		}
		if tb.Active == nil || !*tb.Active {
			return &checkError{"token reported inactive"}
		}
		return nil
	})
}

// iterClientCredentials is one client_credentials grant.
func iterClientCredentials(ctx context.Context, w *worker) error {
	return w.step("token", func() error {
		_, err := w.r.clientCredentials(ctx)
		return err
	})
}

// ceilingForm is a token request of the same shape and size as a real
// authorization_code exchange.
var ceilingForm = url.Values{
	"grant_type":    {"authorization_code"},
	"code":          {"ory_ac_" + strings.Repeat("x", 43) + "." + strings.Repeat("y", 43)},
	"redirect_uri":  {"dev.authd.authbench:/callback"},
	"client_id":     {strings.Repeat("c", 22)},
	"code_verifier": {strings.Repeat("v", 43)},
}.Encode()

// iterCeilingHTTP posts a token-shaped request to the fixed handler.
func iterCeilingHTTP(ctx context.Context, w *worker) error {
	return w.step("token", func() error {
		body, err := w.r.postFormRaw(ctx, "/oauth2/token", ceilingForm, false)
		if err == nil && accessToken(body) == "" {
			err = &checkError{"200 without an access_token (or not JSON)"}
		}
		return err
	})
}
