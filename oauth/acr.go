package oauth

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/ory/fosite"
)

// Authentication context class references (OpenID Connect Core §2 acr)
// that authd advertises (acr_values_supported) and asserts.
const (
	acr1FA = "urn:authd:acr:1fa" // one factor (a password)
	acr2FA = "urn:authd:acr:2fa" // two factors (a password and a second factor, or a passkey with user verification)
	// acrPHR is OpenID Connect EAP ACR Values 1.0 §2 "phr": phishing
	// resistant (a passkey with user verification).
	acrPHR = "phr"
)

// acrValuesSupported is discovery's acr_values_supported, weakest first.
var acrValuesSupported = []string{acr1FA, acr2FA, acrPHR}

// acrLevel orders the values; 0 is a value authd does not know.
func acrLevel(v string) int {
	switch v {
	case acr1FA:
		return 1
	case acr2FA:
		return 2
	case acrPHR:
		return 3
	}
	return 0
}

// amrLevel is what a session's amr (RFC 8176 §2) proves: a passkey with
// user verification ("hwk" and "user") is phishing resistant and counts
// as two factors; "mfa" is a second factor proven after the first.
func amrLevel(amr []string) int {
	switch {
	case slices.Contains(amr, "hwk") && slices.Contains(amr, "user"):
		return 3
	case slices.Contains(amr, "mfa"):
		return 2
	}
	return 1
}

// acrRequest is what the authorization request asks of the
// authentication: acr_values (Core §3.1.2.1, voluntary, in order of
// preference) and an acr claim requested in the claims parameter (§5.5.1.1,
// essential or not).
type acrRequest struct {
	values    []string
	essential bool
}

// need is the lowest level that meets the request (any one listed value
// meets it), 0 when it asks for nothing authd knows.
func (q acrRequest) need() int {
	n := 0
	for _, v := range q.values {
		if l := acrLevel(v); l > 0 && (n == 0 || l < n) {
			n = l
		}
	}
	return n
}

// acrOf is the acr to assert for a session's amr: the first requested
// value the session meets (the client's preference), else the session's
// own level.
func acrOf(amr []string, requested []string) string {
	l := amrLevel(amr)
	for _, v := range requested {
		if k := acrLevel(v); k > 0 && k <= l {
			return v
		}
	}
	return acrValuesSupported[l-1]
}

// authnClaims are the acr, amr and auth_time a code's session recorded
// (issueCode), for the ID token, introspection and UserInfo (RFC 9470 §3:
// what a resource server checks). Codes issued before they were recorded
// have none: they are omitted, not invented.
func authnClaims(ar fosite.Requester) (acr string, amr []string, authTime int64) {
	_, authTime, _ = sessionExtra(ar)
	s, ok := ar.GetSession().(*fosite.DefaultSession)
	if !ok || s.Extra == nil {
		return "", nil, authTime
	}
	acr, _ = s.Extra["acr"].(string)
	return acr, sessionAMR(ar), authTime
}

// addAuthnClaims adds them to a JSON answer.
func addAuthnClaims(m map[string]any, ar fosite.Requester) {
	acr, amr, authTime := authnClaims(ar)
	if acr != "" {
		m["acr"] = acr
	}
	if len(amr) > 0 {
		m["amr"] = amr
	}
	if authTime > 0 {
		m["auth_time"] = authTime
	}
}

// parseACR reads acr_values and the claims parameter's id_token acr.
// A claims parameter that is not JSON is invalid_request (§5.5).
func parseACR(form interface{ Get(string) string }) (acrRequest, error) {
	q := acrRequest{values: strings.Fields(form.Get("acr_values"))}
	if len(q.values) > 8 {
		q.values = q.values[:8]
	}
	raw := form.Get("claims")
	if raw == "" {
		return q, nil
	}
	var claims struct {
		IDToken map[string]*struct {
			Essential bool     `json:"essential"`
			Value     string   `json:"value"`
			Values    []string `json:"values"`
		} `json:"id_token"`
	}
	if len(raw) > 4096 || json.Unmarshal([]byte(raw), &claims) != nil {
		return q, fosite.ErrInvalidRequest.WithHint("The claims parameter must be a JSON object (OpenID Connect Core Section 5.5).")
	}
	if c := claims.IDToken["acr"]; c != nil {
		vals := c.Values
		if c.Value != "" {
			vals = []string{c.Value}
		}
		if len(vals) > 0 {
			// §5.5.1.1: the claim's values take precedence over acr_values.
			q.values = vals
		}
		q.essential = c.Essential
	}
	return q, nil
}
