// Package fed is the sign-in method of upstream OpenID providers in the
// browser (issue 25): the login page's "Continue with DISPLAY_NAME"
// buttons, the start of the provider's authorization (code + PKCE +
// nonce, a state bound to this browser and single-use, the request to
// return to kept server-side) and its callback (GET, or Apple's
// response_mode=form_post), which verifies the provider's ID token
// (package federation, go-oidc) and hands the user to the flow with amr
// ["fed"].
//
// It never follows a return URL it did not store itself, never merges
// accounts by an unverified email (federation.Resolve), and never logs a
// code, a token or a secret.
package fed

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/federation"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/secrets"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
)

// Name is the method's name (its routes are under /signin/fed/).
const Name = "fed"

// loginTTL bounds a sign-in at the provider.
const loginTTL = 10 * time.Minute

// cookieName binds a sign-in to the browser that started it.
const cookieName = "authd_fed"

// Store is what the method needs of storage: the sign-ins in flight, the
// links, and transactions for a first sign-in.
type Store interface {
	federation.LinkStore
	CreateFederationLogin(ctx context.Context, l *storage.FederationLogin) error
	TakeFederationLogin(ctx context.Context, key, browser string, now time.Time) (*storage.FederationLogin, error)
	SaveProviderToken(ctx context.Context, t *storage.ProviderToken) error
	BeginTX(ctx context.Context) (context.Context, error)
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Options configure the method.
type Options struct {
	Secret   []byte
	Issuer   string // authd's, for the redirect_uri
	Registry *federation.Registry
	Store    Store
	// HTTPClient calls the providers' token endpoints; nil: 10 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
}

// Method is the providers' sign-in method.
type Method struct {
	o      Options
	secure bool
}

var (
	_ signin.Method  = (*Method)(nil)
	_ signin.Mounter = (*Method)(nil)
)

// New returns the method.
func New(o Options) *Method {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &Method{o: o, secure: strings.HasPrefix(o.Issuer, "https://")}
}

// Name implements signin.Method.
func (m *Method) Name() string { return Name }

var buttons = template.Must(template.New("fed").Parse(`{{range .Providers}}<form method="post" action="/signin/fed/start">
<input type="hidden" name="provider" value="{{.ID}}">
<input type="hidden" name="return_to" value="{{$.Action}}">
<input type="hidden" name="csrf_token" value="{{$.CSRFToken}}">
<button type="submit" class="provider provider-{{.Kind}}">Continue with {{.DisplayName}}</button>
</form>
{{end}}`))

// Render shows one "Continue with DISPLAY_NAME" button per provider
// (Apple's and Google's own names by default: "Continue with Apple",
// "Continue with Google"). Each posts to the start route with the page's
// CSRF token (checked by the flow, signin.Route.CSRF) and same-origin only
// (the pages' cross-origin protection).
func (m *Method) Render(ctx context.Context, p signin.Page) template.HTML {
	if p.Reauth {
		return "" // a re-authentication proves the same user: not another account
	}
	ps, err := m.o.Registry.List(ctx)
	if err != nil || len(ps) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := buttons.Execute(&b, map[string]any{"Providers": ps, "Action": p.Action, "CSRFToken": p.CSRFToken}); err != nil {
		return ""
	}
	return template.HTML(b.String()) //nolint:gosec // rendered by html/template above
}

// Verify implements signin.Method: the providers' proof arrives on their
// callback, never in the login form.
func (m *Method) Verify(context.Context, signin.Input) (signin.Result, error) {
	return signin.Result{}, &signin.Failure{Status: http.StatusBadRequest, Message: "Choose a provider's button to continue with it."}
}

// Routes implements signin.Mounter: start, and the callback (GET, and
// POST for response_mode=form_post, which Apple sends cross-site).
func (m *Method) Routes(f signin.Flow) []signin.Route {
	cb := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.callback(w, r, f) })
	return []signin.Route{
		{Method: http.MethodPost, Path: "start", Handler: http.HandlerFunc(m.start), CSRF: true},
		{Method: http.MethodGet, Path: "{provider}/callback", Handler: cb},
		{Method: http.MethodPost, Path: "{provider}/callback", Handler: cb, CrossSite: true},
	}
}

// transaction is what the sign-in keeps server-side, sealed under its
// state.
type transaction struct {
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	ReturnTo string `json:"r"`
}

func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// start begins the provider's authorization: a fresh state, nonce and
// PKCE verifier; the sign-in stored under the state's hash, bound to this
// browser's cookie; a redirect to the provider.
func (m *Method) start(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_ = r.ParseForm()
	returnTo := r.PostForm.Get("return_to")
	if !strings.HasPrefix(returnTo, "/oauth2/authorize?") || len(returnTo) > 8<<10 {
		m.page(w, http.StatusBadRequest, "This sign-in link is not valid. Go back to the app and start the sign-in again.")
		return
	}
	p, err := m.o.Registry.Get(ctx, r.PostForm.Get("provider"))
	if err != nil {
		m.page(w, http.StatusBadRequest, "This way of signing in is not available. Go back and choose another.")
		return
	}
	meta, err := p.Metadata(ctx)
	if err != nil {
		m.o.Logger.Warn("federation: provider metadata unavailable", "provider", p.ID, "error", err)
		m.o.Registry.Count(p.ID, "browser", "provider_unavailable")
		m.page(w, http.StatusServiceUnavailable, "The provider cannot be reached right now. Please try again in a moment.")
		return
	}
	browser := ""
	if c, err := r.Cookie(cookieName); err == nil && len(c.Value) == 43 {
		browser = c.Value
	} else {
		browser = random()
	}
	state, tx := random(), transaction{Nonce: random(), Verifier: oauth2.GenerateVerifier(), ReturnTo: returnTo}
	plain, _ := json.Marshal(tx)
	key := "fl:" + hash(state)
	sealed, err := secrets.Seal(m.o.Secret, state, key, plain)
	if err == nil {
		err = m.o.Store.CreateFederationLogin(ctx, &storage.FederationLogin{Key: key, Browser: hash(browser),
			ProviderID: p.ID, Sealed: sealed, ExpiresAt: m.o.Now().Add(loginTTL)})
	}
	if err != nil {
		m.o.Logger.Error("federation: store sign-in", "error", err)
		m.page(w, http.StatusServiceUnavailable, "Signing in is not possible right now. Please try again in a moment.")
		return
	}
	// SameSite=None (with Secure on https): Apple's form_post callback is a
	// cross-site POST, which a Lax cookie would not accompany. The state
	// it must match is single-use and bound to this value.
	ck := &http.Cookie{Name: cookieName, Value: browser, Path: "/signin/fed/", HttpOnly: true, MaxAge: int(loginTTL.Seconds()),
		Secure: m.secure, SameSite: http.SameSiteLaxMode}
	if m.secure {
		ck.SameSite = http.SameSiteNoneMode
	}
	http.SetCookie(w, ck)
	conf := m.oauth2Config(p, meta)
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(tx.Verifier), oauth2.SetAuthURLParam("nonce", tx.Nonce)}
	if p.Kind == federation.KindApple {
		// Apple posts the response when it asks for name or email.
		opts = append(opts, oauth2.SetAuthURLParam("response_mode", "form_post"))
	}
	http.Redirect(w, r, conf.AuthCodeURL(state, opts...), http.StatusSeeOther)
}

func (m *Method) oauth2Config(p *federation.Provider, meta *federation.Metadata) *oauth2.Config {
	style := oauth2.AuthStyleInParams
	return &oauth2.Config{ClientID: p.ClientID, Scopes: p.Scopes,
		RedirectURL: federation.RedirectURI(m.o.Issuer, p.ID),
		Endpoint:    oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint, AuthStyle: style}}
}

// callback finishes the provider's authorization: the state must be one
// this browser started and unused; the code is exchanged (with the PKCE
// verifier), the ID token verified (issuer, audience, nonce, expiry) and
// the user found or created; then the flow continues.
func (m *Method) callback(w http.ResponseWriter, r *http.Request, f signin.Flow) {
	ctx := r.Context()
	if err := r.ParseForm(); err != nil {
		m.page(w, http.StatusBadRequest, "This sign-in response could not be read.")
		return
	}
	providerID := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/signin/fed/"), "/callback")
	q := r.Form // the query, or form_post's body
	state := q.Get("state")
	c, cerr := r.Cookie(cookieName)
	if state == "" || cerr != nil {
		m.o.Registry.Count(providerID, "browser", "state")
		m.page(w, http.StatusBadRequest, "This sign-in was not started in this browser, or it expired. Go back to the app and start again.")
		return
	}
	key := "fl:" + hash(state)
	login, err := m.o.Store.TakeFederationLogin(ctx, key, hash(c.Value), m.o.Now())
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			m.o.Logger.Error("federation: take sign-in", "error", err)
			m.page(w, http.StatusServiceUnavailable, "Signing in is not possible right now. Please try again in a moment.")
			return
		}
		m.o.Registry.Count(providerID, "browser", "state")
		m.page(w, http.StatusBadRequest, "This sign-in was already used, expired, or was started in another browser. Go back to the app and start again.")
		return
	}
	plain, err := secrets.Open(m.o.Secret, state, key, login.Sealed)
	var tx transaction
	if err == nil {
		err = json.Unmarshal(plain, &tx)
	}
	if err != nil || login.ProviderID != providerID {
		m.page(w, http.StatusBadRequest, "This sign-in response is not valid. Go back to the app and start again.")
		return
	}
	fail := func(reason, msg string) {
		m.o.Registry.Count(providerID, "browser", reason)
		f.Fail(w, r, tx.ReturnTo, &signin.Failure{Status: http.StatusBadRequest, Message: msg})
	}
	p, err := m.o.Registry.Get(ctx, providerID)
	if err != nil {
		fail("provider", "This way of signing in is no longer available. Choose another.")
		return
	}
	if e := q.Get("error"); e != "" || q.Get("code") == "" {
		fail("refused", "Signing in with "+p.DisplayName+" was cancelled or refused. Try again or choose another way.")
		return
	}
	meta, err := p.Metadata(ctx)
	if err != nil {
		fail("provider_unavailable", p.DisplayName+" cannot be reached right now. Please try again in a moment.")
		return
	}
	secret, err := p.ClientSecret(m.o.Now())
	if err != nil {
		m.o.Logger.Error("federation: client secret", "provider", p.ID, "error", err)
		fail("config", "Signing in with "+p.DisplayName+" is not possible right now.")
		return
	}
	conf := m.oauth2Config(p, meta)
	conf.ClientSecret = secret
	tok, err := conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, m.o.HTTPClient), q.Get("code"), oauth2.VerifierOption(tx.Verifier))
	if err != nil {
		m.o.Logger.Warn("federation: code exchange failed", "provider", p.ID, "error", redact(err))
		fail("exchange", "Signing in with "+p.DisplayName+" did not work. Please try again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	id, err := p.VerifyIDToken(ctx, raw, federation.Check{Audiences: []string{p.ClientID}, Nonce: tx.Nonce, Now: m.o.Now})
	if err != nil {
		var refusal *federation.Refusal
		reason := "error"
		if errors.As(err, &refusal) {
			reason = refusal.Reason
		}
		m.o.Logger.Warn("federation: ID token refused", "provider", p.ID, "reason", reason)
		fail(reason, "Signing in with "+p.DisplayName+" did not work. Please try again.")
		return
	}
	if id.Name == "" && p.Kind == federation.KindApple {
		id.Name = appleName(q.Get("user")) // Apple sends the name once, in form_post's user
	}
	u, err := m.resolve(ctx, p, id)
	if errors.Is(err, federation.ErrDisabled) {
		fail("disabled", "This account cannot sign in.")
		return
	}
	if err != nil {
		m.o.Logger.Error("federation: link", "provider", p.ID, "error", err)
		m.page(w, http.StatusServiceUnavailable, "Signing in is not possible right now. Please try again in a moment.")
		return
	}
	if p.Kind == federation.KindApple && tok.RefreshToken != "" {
		// Kept sealed, to be revoked at Apple when the user is deleted
		// (App Store Review Guideline 5.1.1(v)); a failure here costs
		// the sign-in nothing but is logged.
		if err := m.o.Store.SaveProviderToken(ctx, &storage.ProviderToken{Issuer: id.Issuer, Sub: id.Sub, ProviderID: p.ID,
			Subject: u.Subject, Sealed: federation.SealToken(m.o.Secret, id.Issuer, id.Sub, tok.RefreshToken)}); err != nil {
			m.o.Logger.Error("federation: keep the provider's refresh token", "provider", p.ID, "error", err)
		}
	}
	m.o.Registry.Count(p.ID, "browser", "ok")
	http.SetCookie(w, &http.Cookie{Name: cookieName, Path: "/signin/fed/", MaxAge: -1, HttpOnly: true, Secure: m.secure})
	f.Complete(w, r, tx.ReturnTo, signin.Result{User: u, AMR: []string{"fed"}})
}

// resolve finds or creates the user in one transaction.
func (m *Method) resolve(ctx context.Context, p *federation.Provider, id *federation.Identity) (identity.User, error) {
	tctx, err := m.o.Store.BeginTX(ctx)
	if err != nil {
		return identity.User{}, err
	}
	defer func() { _ = m.o.Store.Rollback(tctx) }()
	u, how, err := federation.Resolve(tctx, m.o.Store, p, id)
	if err != nil {
		return identity.User{}, err
	}
	if err := m.o.Store.Commit(tctx); err != nil {
		return identity.User{}, err
	}
	if how != federation.Existing {
		m.o.Logger.Info("federation audit", "what", "federation."+how, "provider", p.ID, "subject", u.Subject, "path", "browser")
	}
	return identity.User{Subject: u.Subject, Username: u.Username, Email: u.Email, EmailVerified: u.EmailVerified,
		Name: u.Name, Disabled: u.Disabled, CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt}, nil
}

// appleName reads the name Apple posts (once) in the "user" field.
func appleName(user string) string {
	var v struct {
		Name struct {
			FirstName string `json:"firstName"`
			LastName  string `json:"lastName"`
		} `json:"name"`
	}
	if json.Unmarshal([]byte(user), &v) != nil {
		return ""
	}
	return strings.TrimSpace(v.Name.FirstName + " " + v.Name.LastName)
}

// redact keeps an error's kind, not the provider's body (it could echo
// the code).
func redact(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return "token endpoint answered " + re.Response.Status + " " + re.ErrorCode
	}
	return err.Error()
}

var pageTmpl = template.Must(template.New("p").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in</title>
<link rel="stylesheet" href="/static/authd.css"></head><body><main><h1>Sign in</h1><p>{{.}}</p></main></body></html>
`))

// page answers a person with a message in words.
func (m *Method) page(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusServiceUnavailable {
		// The provider or the database is away for a moment: say when
		// to try again (RFC 9110 §10.2.3), as the other sign-in pages do.
		w.Header().Set("Retry-After", "2")
	}
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, msg)
}
