package clientadmin

import (
	"net/url"
	"strconv"
	"strings"
)

// validateBackchannelLogoutURI checks a backchannel_logout_uri (OpenID
// Connect Back-Channel Logout 1.0 §2.2): an absolute URI without a
// fragment, https, or http on a loopback IP literal (127.0.0.1, [::1]) for
// development; "localhost" is refused as it is for redirects (RFC 8252
// §8.3). A refusal is invalid_client_metadata (RFC 7591 §3.2.2): the URI
// is where authd POSTs, not where a browser is redirected.
func validateBackchannelLogoutURI(raw string) error {
	if len(raw) > maxRedirectURILen {
		return invalidMetadata("backchannel_logout_uri longer than %d bytes", maxRedirectURILen)
	}
	for i := 0; i < len(raw); i++ {
		if !uriChars[raw[i]] {
			return invalidMetadata("backchannel_logout_uri %q contains a character that is not allowed in a URI (RFC 3986 §2)", raw)
		}
	}
	if strings.Contains(raw, "#") {
		// §2.2: the URI MUST NOT include a fragment component.
		return invalidMetadata("backchannel_logout_uri %q must not contain a fragment (Back-Channel Logout 1.0 §2.2)", raw)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Hostname() == "" {
		// §2.2: the URI MUST be absolute.
		return invalidMetadata("backchannel_logout_uri %q is not an absolute URI with a host (Back-Channel Logout 1.0 §2.2)", raw)
	}
	if u.User != nil {
		return invalidMetadata("backchannel_logout_uri %q must not contain user information", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return invalidMetadata("backchannel_logout_uri %q has an invalid port", raw)
		}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if host := u.Hostname(); host != "127.0.0.1" && host != "::1" {
			return invalidMetadata("backchannel_logout_uri %q: http is allowed only for the loopback IP literals 127.0.0.1 and [::1], not localhost or other hosts; use https", raw)
		}
	default:
		return invalidMetadata("backchannel_logout_uri %q must be an https URI", raw)
	}
	return nil
}
