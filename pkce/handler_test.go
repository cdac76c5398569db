package pkce_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/handler/oauth2"
	fositepkce "github.com/ory/fosite/handler/pkce"
	"github.com/ory/fosite/storage"

	"github.com/authd/authd/pkce"
)

// harness is one handler with its own store and strategy; every test case
// builds a fresh one.
type harness struct {
	h        *pkce.Handler
	store    *faultyStore
	strategy oauth2.AuthorizeCodeStrategy
}

func newHarness(t *testing.T, allowPlain bool) *harness {
	t.Helper()
	strategy := compose.NewOAuth2HMACStrategy(&fosite.Config{GlobalSecret: []byte("0123456789abcdef0123456789abcdef")})
	store := &faultyStore{PKCERequestStorage: storage.NewMemoryStore()}
	return &harness{
		h:        &pkce.Handler{AuthorizeCodeStrategy: strategy, Storage: store, AllowPlain: allowPlain},
		store:    store,
		strategy: strategy,
	}
}

// newCode issues an authorization code without touching the PKCE handler,
// as fosite's authorize code handler would.
func (x *harness) newCode(t *testing.T) string {
	t.Helper()
	code, _, err := x.strategy.GenerateAuthorizeCode(context.Background(), fosite.NewAuthorizeRequest())
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// authorize runs the authorize endpoint with the given form for
// response_type=code and returns the code that was issued.
func (x *harness) authorize(t *testing.T, form url.Values) (string, error) {
	t.Helper()
	ar := fosite.NewAuthorizeRequest()
	ar.ResponseTypes = fosite.Arguments{"code"}
	ar.Client = &fosite.DefaultClient{ID: "app", Public: true}
	ar.Session = &fosite.DefaultSession{Subject: "alice"}
	ar.Form = form
	resp := fosite.NewAuthorizeResponse()
	code := x.newCode(t)
	resp.AddParameter("code", code)
	return code, x.h.HandleAuthorizeEndpointRequest(context.Background(), ar, resp)
}

func accessRequest(grantType, code, verifier string) *fosite.AccessRequest {
	req := fosite.NewAccessRequest(&fosite.DefaultSession{Subject: "alice"})
	req.GrantTypes = fosite.Arguments{grantType}
	req.Client = &fosite.DefaultClient{ID: "app", Public: true}
	req.Form = url.Values{"code": {code}}
	if verifier != "" {
		req.Form.Set("code_verifier", verifier)
	}
	return req
}

func (x *harness) token(code, verifier string) error {
	return x.h.HandleTokenEndpointRequest(context.Background(), accessRequest("authorization_code", code, verifier))
}

func (x *harness) populate(code string) error {
	return x.h.PopulateTokenEndpointResponse(context.Background(), accessRequest("authorization_code", code, ""), fosite.NewAccessResponse())
}

func (x *harness) hasSession(t *testing.T, code string) bool {
	t.Helper()
	sig := x.strategy.AuthorizeCodeSignature(context.Background(), code)
	_, err := x.store.GetPKCERequestSession(context.Background(), sig, &fosite.DefaultSession{})
	if err != nil && !errors.Is(err, fosite.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// faultyStore is fosite's memory store with injectable errors.
type faultyStore struct {
	fositepkce.PKCERequestStorage
	getErr, createErr, deleteErr error
	deletes                      int
}

func (s *faultyStore) GetPKCERequestSession(ctx context.Context, sig string, sess fosite.Session) (fosite.Requester, error) {
	if s.getErr != nil {
		return nil, s.getErr
	}
	return s.PKCERequestStorage.GetPKCERequestSession(ctx, sig, sess)
}

func (s *faultyStore) CreatePKCERequestSession(ctx context.Context, sig string, r fosite.Requester) error {
	if s.createErr != nil {
		return s.createErr
	}
	return s.PKCERequestStorage.CreatePKCERequestSession(ctx, sig, r)
}

func (s *faultyStore) DeletePKCERequestSession(ctx context.Context, sig string) error {
	s.deletes++
	if s.deleteErr != nil {
		return s.deleteErr
	}
	return s.PKCERequestStorage.DeletePKCERequestSession(ctx, sig)
}

func s256Form(challenge string) url.Values {
	return url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
}

// assertRFC6749 checks that err is the fosite error want and, when hint is
// not empty, that its hint contains hint.
func assertRFC6749(t *testing.T, err error, want *fosite.RFC6749Error, hint string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %s", err, want.ErrorField)
	}
	var rfcErr *fosite.RFC6749Error
	if !errors.As(err, &rfcErr) {
		t.Fatalf("err = %T, want *fosite.RFC6749Error", err)
	}
	if hint != "" && !strings.Contains(rfcErr.HintField, hint) {
		t.Fatalf("hint = %q, want it to contain %q", rfcErr.HintField, hint)
	}
}

func TestHandlerAuthorize(t *testing.T) {
	tests := []struct {
		name       string
		allowPlain bool
		form       url.Values
		wantHint   string // empty: success expected
		wantErr    error  // sentinel wrapped by the fosite error
	}{
		{"S256", false, s256Form(rfcChallenge), "", nil},
		{"missing challenge", false, url.Values{}, "code_challenge is required (RFC 7636 §4.4.1, RFC 9700 §2.1.1)", pkce.ErrChallengeRequired},
		{"method without challenge", false, url.Values{"code_challenge_method": {"S256"}}, "code_challenge is required (RFC 7636 §4.4.1, RFC 9700 §2.1.1)", pkce.ErrChallengeRequired},
		{"plain refused", false, url.Values{"code_challenge": {rfcVerifier}, "code_challenge_method": {"plain"}}, "must be S256", pkce.ErrMethodNotAllowed},
		{"empty method refused", false, url.Values{"code_challenge": {rfcVerifier}}, "must be S256", pkce.ErrMethodNotAllowed},
		{"unknown method", false, url.Values{"code_challenge": {rfcChallenge}, "code_challenge_method": {"S512"}}, "must be S256", pkce.ErrMethodNotAllowed},
		{"S256 padded", false, s256Form(rfcChallenge + "="), "43 base64url characters", pkce.ErrChallengeFormat},
		{"S256 too short", false, s256Form(rfcChallenge[:42]), "43 base64url characters", pkce.ErrChallengeFormat},
		{"plain allowed", true, url.Values{"code_challenge": {rfcVerifier}, "code_challenge_method": {"plain"}}, "", nil},
		{"plain allowed, too short", true, url.Values{"code_challenge": {"short"}, "code_challenge_method": {"plain"}}, "43 to 128 characters", pkce.ErrChallengeFormat},
		{"plain allowed, unknown method", true, url.Values{"code_challenge": {rfcChallenge}, "code_challenge_method": {"S512"}}, "S256 or plain", pkce.ErrMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newHarness(t, tt.allowPlain)
			code, err := x.authorize(t, tt.form)
			if tt.wantHint == "" {
				if err != nil {
					t.Fatalf("authorize: %v", err)
				}
				if !x.hasSession(t, code) {
					t.Fatal("no PKCE session stored for the code")
				}
				return
			}
			assertRFC6749(t, err, fosite.ErrInvalidRequest, tt.wantHint)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
			}
			if x.hasSession(t, code) {
				t.Error("PKCE session stored for a refused request")
			}
		})
	}
}

func TestHandlerAuthorizeStoresOnlyPKCEParameters(t *testing.T) {
	x := newHarness(t, false)
	form := s256Form(rfcChallenge)
	form.Set("state", "xyz")
	form.Set("redirect_uri", "https://app.example/cb")
	code, err := x.authorize(t, form)
	if err != nil {
		t.Fatal(err)
	}
	sig := x.strategy.AuthorizeCodeSignature(context.Background(), code)
	stored, err := x.store.GetPKCERequestSession(context.Background(), sig, &fosite.DefaultSession{})
	if err != nil {
		t.Fatal(err)
	}
	got := stored.GetRequestForm()
	want := url.Values{"code_challenge": {rfcChallenge}, "code_challenge_method": {"S256"}}
	if got.Encode() != want.Encode() {
		t.Errorf("stored form = %v, want %v", got, want)
	}
}

func TestHandlerAuthorizeNotForUs(t *testing.T) {
	x := newHarness(t, false)
	ar := fosite.NewAuthorizeRequest()
	ar.ResponseTypes = fosite.Arguments{"token"}
	ar.Form = url.Values{} // no code_challenge: fine for an implicit request
	if err := x.h.HandleAuthorizeEndpointRequest(context.Background(), ar, fosite.NewAuthorizeResponse()); err != nil {
		t.Fatalf("response_type=token: %v, want nil", err)
	}
}

func TestHandlerAuthorizeWithoutCode(t *testing.T) {
	x := newHarness(t, false)
	ar := fosite.NewAuthorizeRequest()
	ar.ResponseTypes = fosite.Arguments{"code"}
	ar.Form = s256Form(rfcChallenge)
	err := x.h.HandleAuthorizeEndpointRequest(context.Background(), ar, fosite.NewAuthorizeResponse())
	assertRFC6749(t, err, fosite.ErrServerError, "")
}

func TestHandlerAuthorizeStorageError(t *testing.T) {
	x := newHarness(t, false)
	boom := errors.New("db down")
	x.store.createErr = boom
	_, err := x.authorize(t, s256Form(rfcChallenge))
	assertRFC6749(t, err, fosite.ErrServerError, "")
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want it to wrap the storage error", err)
	}
}

func TestHandlerToken(t *testing.T) {
	plainForm := url.Values{"code_challenge": {rfcVerifier}, "code_challenge_method": {"plain"}}
	tests := []struct {
		name           string
		allowAuthorize bool       // AllowPlain at the authorize endpoint
		allowToken     bool       // AllowPlain at the token endpoint
		form           url.Values // nil: the code gets no PKCE session
		verifier       string
		want           *fosite.RFC6749Error // nil: success
		wantHint       string
		wantErr        error
	}{
		{"S256 right verifier", false, false, s256Form(rfcChallenge), rfcVerifier, nil, "", nil},
		{"S256 wrong verifier", false, false, s256Form(rfcChallenge), strings.Repeat("a", 43), fosite.ErrInvalidGrant, "does not match", pkce.ErrMismatch},
		{"S256 verifier is the challenge", false, false, s256Form(rfcChallenge), rfcChallenge, fosite.ErrInvalidGrant, "does not match", pkce.ErrMismatch},
		{"missing verifier", false, false, s256Form(rfcChallenge), "", fosite.ErrInvalidRequest, "code_verifier is required", pkce.ErrVerifierRequired},
		{"verifier too short", false, false, s256Form(rfcChallenge), rfcVerifier[:42], fosite.ErrInvalidGrant, "43 to 128", pkce.ErrVerifierFormat},
		{"verifier too long", false, false, s256Form(rfcChallenge), strings.Repeat("a", 129), fosite.ErrInvalidGrant, "43 to 128", pkce.ErrVerifierFormat},
		{"verifier bad char", false, false, s256Form(rfcChallenge), rfcVerifier[:42] + "+", fosite.ErrInvalidGrant, "43 to 128", pkce.ErrVerifierFormat},
		{"downgrade: verifier for code without session", false, false, nil, rfcVerifier, fosite.ErrInvalidGrant, "code_verifier sent for a code issued without code_challenge", fosite.ErrNotFound},
		{"code without session, no verifier", false, false, nil, "", fosite.ErrInvalidGrant, "PKCE is required", fosite.ErrNotFound},
		{"plain right verifier", true, true, plainForm, rfcVerifier, nil, "", nil},
		{"plain wrong verifier", true, true, plainForm, strings.Repeat("a", 43), fosite.ErrInvalidGrant, "does not match", pkce.ErrMismatch},
		{"plain issued, since disabled", true, false, plainForm, rfcVerifier, fosite.ErrInvalidGrant, "not accepted", pkce.ErrMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newHarness(t, tt.allowAuthorize)
			var code string
			if tt.form == nil {
				code = x.newCode(t)
			} else {
				var err error
				if code, err = x.authorize(t, tt.form); err != nil {
					t.Fatalf("authorize: %v", err)
				}
			}
			x.h.AllowPlain = tt.allowToken

			err := x.token(code, tt.verifier)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("token: %v", err)
				}
			} else {
				assertRFC6749(t, err, tt.want, tt.wantHint)
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
				}
				if tt.verifier != "" && strings.Contains(err.Error(), tt.verifier) {
					t.Errorf("error %q contains the code_verifier", err)
				}
			}
			if x.store.deletes != 0 {
				t.Errorf("HandleTokenEndpointRequest deleted %d PKCE sessions, want 0", x.store.deletes)
			}
			if tt.form != nil && !x.hasSession(t, code) {
				t.Error("PKCE session gone after HandleTokenEndpointRequest")
			}
		})
	}
}

// The flaw in fosite v0.49.0's handler: a wrong verifier must not consume the
// code, so the right verifier still works afterwards.
func TestHandlerWrongVerifierDoesNotConsumeCode(t *testing.T) {
	x := newHarness(t, false)
	code, err := x.authorize(t, s256Form(rfcChallenge))
	if err != nil {
		t.Fatal(err)
	}
	for _, wrong := range []string{strings.Repeat("a", 43), "", "short"} {
		if err := x.token(code, wrong); err == nil {
			t.Fatalf("token with verifier %q succeeded", wrong)
		}
		if !x.hasSession(t, code) {
			t.Fatalf("PKCE session gone after verifier %q", wrong)
		}
	}
	if err := x.token(code, rfcVerifier); err != nil {
		t.Fatalf("right verifier after wrong ones: %v", err)
	}
	if err := x.populate(code); err != nil {
		t.Fatalf("populate: %v", err)
	}
	if x.hasSession(t, code) {
		t.Fatal("PKCE session still there after PopulateTokenEndpointResponse")
	}
	// Redeemed: the session is gone, so the verifier no longer helps.
	assertRFC6749(t, x.token(code, rfcVerifier), fosite.ErrInvalidGrant, "")
}

func TestHandlerTokenStorageError(t *testing.T) {
	x := newHarness(t, false)
	code, err := x.authorize(t, s256Form(rfcChallenge))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("db down")
	x.store.getErr = boom
	err = x.token(code, rfcVerifier)
	assertRFC6749(t, err, fosite.ErrServerError, "")
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want it to wrap the storage error", err)
	}
}

func TestHandlerPopulate(t *testing.T) {
	tests := []struct {
		name      string
		deleteErr error
		noSession bool
	}{
		{"deletes the session", nil, false},
		{"session already gone", nil, true},
		{"not found from storage", fosite.ErrNotFound, false},
		{"other storage error", errors.New("db down"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newHarness(t, false)
			code := x.newCode(t)
			if !tt.noSession {
				var err error
				if code, err = x.authorize(t, s256Form(rfcChallenge)); err != nil {
					t.Fatal(err)
				}
			}
			x.store.deleteErr = tt.deleteErr
			if err := x.populate(code); err != nil {
				t.Fatalf("PopulateTokenEndpointResponse = %v, want nil", err)
			}
			if x.store.deletes != 1 {
				t.Fatalf("deletes = %d, want 1", x.store.deletes)
			}
			if tt.deleteErr == nil && x.hasSession(t, code) {
				t.Error("PKCE session still there")
			}
		})
	}
}

func TestHandlerOtherGrantTypes(t *testing.T) {
	for _, grant := range []string{"refresh_token", "client_credentials", "urn:ietf:params:oauth:grant-type:device_code"} {
		t.Run(grant, func(t *testing.T) {
			x := newHarness(t, false)
			ctx := context.Background()
			req := accessRequest(grant, "", "")
			if x.h.CanHandleTokenEndpointRequest(ctx, req) {
				t.Error("CanHandleTokenEndpointRequest = true")
			}
			if err := x.h.HandleTokenEndpointRequest(ctx, req); !errors.Is(err, fosite.ErrUnknownRequest) {
				t.Errorf("HandleTokenEndpointRequest = %v, want ErrUnknownRequest", err)
			}
			if err := x.h.PopulateTokenEndpointResponse(ctx, req, fosite.NewAccessResponse()); !errors.Is(err, fosite.ErrUnknownRequest) {
				t.Errorf("PopulateTokenEndpointResponse = %v, want ErrUnknownRequest", err)
			}
			if x.store.deletes != 0 {
				t.Errorf("deletes = %d, want 0", x.store.deletes)
			}
		})
	}
}

func TestHandlerCanSkipClientAuth(t *testing.T) {
	x := newHarness(t, false)
	if x.h.CanSkipClientAuth(context.Background(), accessRequest("authorization_code", "c", rfcVerifier)) {
		t.Error("CanSkipClientAuth = true, want false")
	}
}
