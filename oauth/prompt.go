package oauth

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/ory/fosite"
)

// authnParams are the OpenID Connect authentication request parameters
// (Core §3.1.2.1) the login page acts on. ui_locales is accepted and has
// no effect (the pages are in one language); unknown parameters are
// ignored (§3.1.2.1).
type authnParams struct {
	prompt map[string]bool
	// maxAge is max_age in seconds; -1 when absent.
	maxAge int64
	// loginHint prefills the username (§3.1.2.1 login_hint).
	loginHint string
	// hint is the id_token_hint's claims (an ID token this server
	// signed), nil when absent.
	hint *idTokenHint
	// acr is what the request asks of the authentication (acr.go).
	acr acrRequest
}

// openidPromptValues are the prompt values of OIDC Core §3.1.2.1.
var openidPromptValues = map[string]bool{"none": true, "login": true, "consent": true, "select_account": true}

// authnParamsOf reads and checks the parameters. Errors are invalid_request
// (redirected to the client): prompt=none with another value, an unknown
// prompt value, a max_age that is not a non-negative integer, an
// id_token_hint this server did not sign.
func (s *Server) authnParamsOf(r *http.Request, ar fosite.AuthorizeRequester) (authnParams, error) {
	form := ar.GetRequestForm()
	p := authnParams{prompt: map[string]bool{}, maxAge: -1, loginHint: form.Get("login_hint")}
	for _, v := range strings.Fields(form.Get("prompt")) {
		if !openidPromptValues[v] {
			return p, fosite.ErrInvalidRequest.WithHintf("The prompt value %s is not supported (OpenID Connect Core Section 3.1.2.1).", truncate(v, 20))
		}
		p.prompt[v] = true
	}
	if p.prompt["none"] && len(p.prompt) > 1 {
		return p, fosite.ErrInvalidRequest.WithHint("prompt=none cannot be combined with another prompt value (OpenID Connect Core Section 3.1.2.1).")
	}
	if v := form.Get("max_age"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return p, fosite.ErrInvalidRequest.WithHint("max_age must be a non-negative number of seconds (OpenID Connect Core Section 3.1.2.1).")
		}
		p.maxAge = n
	}
	if raw := form.Get("id_token_hint"); raw != "" {
		if p.hint = s.parseHint(r.Context(), raw); p.hint == nil {
			return p, fosite.ErrInvalidRequest.WithHint("The id_token_hint was not issued by this server.")
		}
	}
	acr, err := parseACR(form)
	if err != nil {
		return p, err
	}
	p.acr = acr
	if len(p.loginHint) > 256 {
		p.loginHint = ""
	}
	return p, nil
}
