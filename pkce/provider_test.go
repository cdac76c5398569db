package pkce_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/storage"

	"github.com/authd/authd/pkce"
)

const redirectURI = "https://app.example/cb"

// newProvider composes fosite's authorize code handler followed by
// pkce.Handler, in that order, over a fresh memory store.
func newProvider(t *testing.T) (fosite.OAuth2Provider, *storage.MemoryStore) {
	t.Helper()
	config := &fosite.Config{GlobalSecret: []byte("0123456789abcdef0123456789abcdef")}
	store := storage.NewMemoryStore()
	store.Clients["app"] = &fosite.DefaultClient{
		ID:            "app",
		Public:        true,
		RedirectURIs:  []string{redirectURI},
		ResponseTypes: []string{"code"},
		GrantTypes:    []string{"authorization_code"},
	}
	strategy := &compose.CommonStrategy{CoreStrategy: compose.NewOAuth2HMACStrategy(config)}
	pkceFactory := func(_ fosite.Configurator, _, _ interface{}) interface{} {
		return &pkce.Handler{AuthorizeCodeStrategy: strategy, Storage: store}
	}
	return compose.Compose(config, store, strategy, compose.OAuth2AuthorizeExplicitFactory, pkceFactory), store
}

func authorizeCode(t *testing.T, p fosite.OAuth2Provider, challenge string) (string, error) {
	t.Helper()
	ctx := context.Background()
	q := url.Values{
		"response_type": {"code"}, "client_id": {"app"}, "redirect_uri": {redirectURI},
		"state": {"state-12345678"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}
	ar, err := p.NewAuthorizeRequest(ctx, httptest.NewRequest(http.MethodGet, "/authorize?"+q.Encode(), nil))
	if err != nil {
		t.Fatalf("NewAuthorizeRequest: %v", err)
	}
	resp, err := p.NewAuthorizeResponse(ctx, ar, &fosite.DefaultSession{Subject: "alice"})
	if err != nil {
		return "", err
	}
	return resp.GetCode(), nil
}

func exchange(p fosite.OAuth2Provider, code, verifier string) (fosite.AccessResponder, error) {
	ctx := context.Background()
	form := url.Values{
		"grant_type": {"authorization_code"}, "client_id": {"app"},
		"redirect_uri": {redirectURI}, "code": {code}, "code_verifier": {verifier},
	}
	r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	ar, err := p.NewAccessRequest(ctx, r, &fosite.DefaultSession{})
	if err != nil {
		return nil, err
	}
	return p.NewAccessResponse(ctx, ar)
}

func TestProviderWrongVerifierThenRightVerifier(t *testing.T) {
	p, store := newProvider(t)
	code, err := authorizeCode(t, p, rfcChallenge)
	if err != nil {
		t.Fatalf("authorize: %v", err)
	}

	if _, err := exchange(p, code, strings.Repeat("a", 43)); !errors.Is(err, fosite.ErrInvalidGrant) {
		t.Fatalf("wrong verifier: %v, want invalid_grant", err)
	}
	if len(store.PKCES) != 1 {
		t.Fatalf("PKCE sessions after wrong verifier = %d, want 1", len(store.PKCES))
	}

	resp, err := exchange(p, code, rfcVerifier)
	if err != nil {
		t.Fatalf("right verifier after a wrong one: %v", err)
	}
	if resp.GetAccessToken() == "" {
		t.Fatal("no access token")
	}
	if len(store.PKCES) != 0 {
		t.Errorf("PKCE sessions after redemption = %d, want 0", len(store.PKCES))
	}

	// RFC 6749 §4.1.2: the code is single-use.
	if _, err := exchange(p, code, rfcVerifier); !errors.Is(err, fosite.ErrInvalidGrant) {
		t.Fatalf("second redemption: %v, want invalid_grant", err)
	}
}

func TestProviderMissingChallenge(t *testing.T) {
	p, _ := newProvider(t)
	_, err := authorizeCode(t, p, "")
	if !errors.Is(err, fosite.ErrInvalidRequest) {
		t.Fatalf("authorize without code_challenge: %v, want invalid_request", err)
	}
}
