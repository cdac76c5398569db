package oauth

import (
	"net/url"
	"strings"
)

// duplicateParam returns the first parameter of the raw query that appears
// more than once, or "". RFC 6749 §3.1: request parameters MUST NOT be
// included more than once. Keys are compared decoded (c%6Cient_id is
// client_id), so an encoded twin cannot slip past.
func duplicateParam(rawQuery string) string {
	seen := map[string]bool{}
	for part := range strings.SplitSeq(rawQuery, "&") {
		if part == "" {
			continue
		}
		k, _, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if seen[k] {
			return k
		}
		seen[k] = true
	}
	return ""
}

// redirectRegistered reports whether requested is one of the registered
// redirect URIs. The comparison is exact string comparison (RFC 9700 §2.1,
// RFC 6749 §3.1.2.3), with one exception: for a loopback redirect
// (http://127.0.0.1 or http://[::1]) the port is ignored, since a native
// app's port is chosen at run time (RFC 8252 §7.3). Scheme, userinfo, host,
// path and query are compared as sent and as registered: never decoded,
// never case-folded.
func redirectRegistered(registered []string, requested string) bool {
	if looksLoopback(requested) {
		if _, ok := splitLoopback(requested); !ok {
			// A loopback port that is not a canonical port (":0",
			// ":99999", ":05000", ":") is no port an app listens on.
			return false
		}
	}
	for _, reg := range registered {
		if reg == requested {
			return true
		}
		if rs, rok := splitLoopback(reg); rok {
			if qs, qok := splitLoopback(requested); qok && rs == qs {
				return true
			}
		}
	}
	return false
}

// loopbackParts is a loopback http URI without its port.
type loopbackParts struct{ userinfo, host, rest string }

// splitLoopback splits "http://[userinfo@]host[:port]rest" for the loopback
// hosts 127.0.0.1 and [::1], byte for byte. ok is false for anything else,
// including a port that is not all digits.
func splitLoopback(raw string) (loopbackParts, bool) {
	const scheme = "http://"
	if !strings.HasPrefix(raw, scheme) {
		return loopbackParts{}, false
	}
	s := raw[len(scheme):]
	end := strings.IndexAny(s, "/?#")
	if end < 0 {
		end = len(s)
	}
	authority, rest := s[:end], s[end:]
	var p loopbackParts
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		p.userinfo, authority = authority[:at+1], authority[at+1:]
	}
	host, port := authority, ""
	switch {
	case strings.HasPrefix(authority, "[::1]"):
		host, port = "[::1]", authority[len("[::1]"):]
	case strings.HasPrefix(authority, "127.0.0.1"):
		host, port = "127.0.0.1", authority[len("127.0.0.1"):]
	default:
		return loopbackParts{}, false
	}
	if port != "" && (port[0] != ':' || !canonicalPort(port[1:])) {
		return loopbackParts{}, false
	}
	p.host, p.rest = host, rest
	return p, true
}

// looksLoopback reports whether raw claims a loopback host, so that a bad
// port is refused rather than compared.
func looksLoopback(raw string) bool {
	return strings.HasPrefix(raw, "http://127.0.0.1:") || strings.HasPrefix(raw, "http://[::1]:")
}

// canonicalPort reports whether s is a TCP port as an app would print it:
// 1–65535 in decimal, no sign, no leading zero, not empty.
func canonicalPort(s string) bool {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n >= 1 && n <= 65535
}

// identityAssured reports whether the client receiving a code at
// redirectURI is assured to be the registered one (RFC 8252 §8.6): a
// confidential client authenticates at the token endpoint, and an https
// redirect (a claimed link) reaches only the app that owns the domain. A
// private-use scheme or a loopback port can be claimed by any local app.
func identityAssured(public bool, redirectURI *url.URL) bool {
	return !public || (redirectURI != nil && redirectURI.Scheme == "https")
}

// clip shortens client input before it is echoed on a page or in a log.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
