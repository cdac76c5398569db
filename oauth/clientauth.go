package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// Token endpoint client authentication methods (RFC 7591 §2,
// token_endpoint_auth_method).
const (
	authNone        = "none"
	authSecretBasic = "client_secret_basic"
	authSecretPost  = "client_secret_post"
)

// clientKey carries the client the pipeline authenticated, so fosite's
// handlers (which authenticate again through
// fosite.Config.ClientAuthenticationStrategy) reuse it: one
// authentication per request.
type clientKey struct{}

func withClient(ctx context.Context, c fosite.Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// clientGetter is what client authentication reads.
type clientGetter interface {
	GetClient(ctx context.Context, id string) (fosite.Client, error)
}

// clientAuthenticator authenticates the client of a token, revocation or
// introspection request (RFC 6749 §2.3, §3.2.1).
type clientAuthenticator struct {
	clients clientGetter
	hasher  fosite.Hasher
}

// authenticate returns the client the request authenticates as. Rules:
//   - a client uses one method per request (RFC 6749 §2.3): HTTP Basic
//     together with client_secret in the body, or a body client_id other
//     than the Basic one, is invalid_request;
//   - the Basic user and password are form-urlencoded (RFC 6749 §2.3.1);
//     malformed Basic credentials are invalid_client;
//   - the method used must be the client's registered
//     token_endpoint_auth_method, and no other (RFC 7591 §2);
//   - a public client ("none") identifies itself with client_id and sends
//     no secret (RFC 6749 §2.1, §3.2.1);
//   - no client identification, an unknown client_id, or a wrong secret is
//     invalid_client (RFC 6749 §5.2), which writeError answers with 401
//     and WWW-Authenticate.
//
// A client the pipeline already authenticated (withClient) is returned as
// is: fosite calls this again inside the request.
func (a *clientAuthenticator) authenticate(ctx context.Context, r *http.Request, form url.Values) (fosite.Client, error) {
	if c, ok := ctx.Value(clientKey{}).(fosite.Client); ok {
		return c, nil
	}
	id, secret, method, err := presentedCredentials(r, form)
	if err != nil {
		return nil, err
	}
	fc, err := a.clients.GetClient(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fosite.ErrInvalidClient.WithHint("The client is unknown.")
	}
	if err != nil {
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	registered := authNone
	if c, ok := fc.(*storage.Client); ok {
		registered = c.TokenEndpointAuthMethod
	} else if !fc.IsPublic() {
		registered = authSecretBasic
	}
	if registered == "" {
		registered = authSecretBasic
	}
	if method != registered {
		return nil, fosite.ErrInvalidClient.WithHintf("This client must authenticate with %s, not %s (RFC 7591 Section 2).", registered, method)
	}
	if method == authNone {
		return fc, nil
	}
	if err := a.hasher.Compare(ctx, fc.GetHashedSecret(), []byte(secret)); err != nil {
		return nil, fosite.ErrInvalidClient.WithHint("The client secret is wrong.")
	}
	return fc, nil
}

// presentedCredentials reads the client credentials of r and names the
// method they use.
func presentedCredentials(r *http.Request, form url.Values) (id, secret, method string, err error) {
	if form.Get("client_assertion") != "" || form.Get("client_assertion_type") != "" {
		return "", "", "", fosite.ErrInvalidClient.WithHint("Client assertions (private_key_jwt, client_secret_jwt) are not supported.")
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if !hasScheme(h, "Basic") {
			return "", "", "", fosite.ErrInvalidClient.WithHint("The Authorization header must carry HTTP Basic client credentials (RFC 6749 Section 2.3.1).")
		}
		user, pass, ok := r.BasicAuth()
		if !ok {
			return "", "", "", fosite.ErrInvalidClient.WithHint("The HTTP Basic credentials are malformed.")
		}
		if _, sent := form["client_secret"]; sent {
			return "", "", "", fosite.ErrInvalidRequest.WithHint("The client authenticated with both HTTP Basic and a client_secret in the body; use one method (RFC 6749 Section 2.3).")
		}
		id, err1 := url.QueryUnescape(user)
		secret, err2 := url.QueryUnescape(pass)
		if err1 != nil || err2 != nil || id == "" {
			return "", "", "", fosite.ErrInvalidClient.WithHint("The HTTP Basic credentials are not form-urlencoded (RFC 6749 Section 2.3.1).")
		}
		if fid := form.Get("client_id"); fid != "" && fid != id {
			return "", "", "", fosite.ErrInvalidRequest.WithHint("The client_id in the body differs from the one in the HTTP Basic credentials.")
		}
		return id, secret, authSecretBasic, nil
	}
	id = form.Get("client_id")
	if id == "" {
		return "", "", "", fosite.ErrInvalidClient.WithHint("The client is not identified: send HTTP Basic credentials or client_id (RFC 6749 Section 3.2.1).")
	}
	if _, sent := form["client_secret"]; sent {
		return id, form.Get("client_secret"), authSecretPost, nil
	}
	return id, "", authNone, nil
}

// hasScheme reports whether an Authorization header uses scheme
// (case-insensitive, RFC 9110 §11.1).
func hasScheme(h, scheme string) bool {
	return len(h) > len(scheme) && h[len(scheme)] == ' ' && strings.EqualFold(h[:len(scheme)], scheme)
}

// hasBearer reports whether an Authorization header uses the Bearer scheme.
func hasBearer(h string) bool { return hasScheme(h, "Bearer") }
