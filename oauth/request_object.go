package oauth

import (
	"net/http"
	"strings"

	"github.com/ory/fosite"
)

// Request objects (OpenID Connect Core §6) are not supported: discovery
// says request_parameter_supported and request_uri_parameter_supported
// are false, and a request that carries one gets request_not_supported or
// request_uri_not_supported at its redirect (Core §3.1.2.6), once the
// client and redirect_uri are known to be valid.
var (
	errRequestNotSupported = &fosite.RFC6749Error{ErrorField: "request_not_supported", CodeField: http.StatusBadRequest,
		DescriptionField: "The request parameter (a request object) is not supported (OpenID Connect Core Section 6.1)."}
	errRequestURINotSupported = &fosite.RFC6749Error{ErrorField: "request_uri_not_supported", CodeField: http.StatusBadRequest,
		DescriptionField: "The request_uri parameter is supported only with a request_uri from the pushed authorization request endpoint (RFC 9126)."}
)

// withoutRequestObject returns fr without its request or non-PAR
// request_uri parameter, so fosite parses the rest of the request, and the
// error to answer once it has. A PAR request_uri stays (parQuery).
func withoutRequestObject(fr *http.Request) (*http.Request, error) {
	q := fr.URL.Query()
	var err error
	switch {
	case q.Has("request"):
		err = errRequestNotSupported
	case q.Has("request_uri") && !strings.HasPrefix(q.Get("request_uri"), parURIPrefix):
		err = errRequestURINotSupported
	default:
		return fr, nil
	}
	q.Del("request")
	q.Del("request_uri")
	out := fr.Clone(fr.Context())
	u := *fr.URL
	u.RawQuery = q.Encode()
	out.URL, out.Form = &u, nil
	return out, err
}
