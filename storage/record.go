package storage

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/ory/fosite"
)

// Record is the backend-neutral, serialized form of a fosite.Requester, as
// persisted for an authorize code, an access or refresh token, or a PKCE
// session. It holds no references to the caller's objects: every slice is a
// copy and the session is JSON.
//
// The client is stored by ID only; Decode takes the client to rehydrate.
type Record struct {
	// RequestID is the fosite request ID, shared by every code and token of
	// one grant; revocation acts on it.
	RequestID string
	// ClientID is the client_id the request was made by.
	ClientID string
	// Subject is the session's subject, kept outside the JSON for queries.
	Subject string
	// RequestedAt is UTC, truncated to microseconds (timestamptz precision).
	RequestedAt time.Time
	// RequestedScopes, GrantedScopes, RequestedAudience and GrantedAudience
	// are never nil.
	RequestedScopes   []string
	GrantedScopes     []string
	RequestedAudience []string
	GrantedAudience   []string
	// Form is the url-encoded request form, minus the parameters in
	// secretFormKeys.
	Form string
	// Session is the JSON encoding of the request's session ("null" when
	// the request has none).
	Session []byte
}

// secretFormKeys are form parameters that are usable on their own and so are
// never persisted, whatever fosite's sanitation let through (docs/architecture.md,
// principle 4). fosite reads none of them back from a stored request.
var secretFormKeys = []string{
	"code", "code_verifier", "refresh_token", "access_token",
	"client_secret", "client_assertion", "password",
}

// NormalizeTime returns t in UTC, truncated to microseconds: the precision
// and zone a value has after a round trip through PostgreSQL timestamptz.
func NormalizeTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// EncodeRequest serializes r into a Record. It returns an error if r is nil,
// has no client, or its session cannot be encoded as JSON.
func EncodeRequest(r fosite.Requester) (Record, error) {
	if r == nil {
		return Record{}, fmt.Errorf("storage: encode request: nil requester")
	}
	client := r.GetClient()
	if client == nil {
		return Record{}, fmt.Errorf("storage: encode request %q: no client", r.GetID())
	}
	rec := Record{
		RequestID:         r.GetID(),
		ClientID:          client.GetID(),
		RequestedAt:       NormalizeTime(r.GetRequestedAt()),
		RequestedScopes:   cloneStrings(r.GetRequestedScopes()),
		GrantedScopes:     cloneStrings(r.GetGrantedScopes()),
		RequestedAudience: cloneStrings(r.GetRequestedAudience()),
		GrantedAudience:   cloneStrings(r.GetGrantedAudience()),
	}
	form := url.Values{}
	for k, v := range r.GetRequestForm() {
		if !slices.Contains(secretFormKeys, k) {
			form[k] = slices.Clone(v)
		}
	}
	rec.Form = form.Encode()

	sess := r.GetSession()
	if sess != nil {
		rec.Subject = sess.GetSubject()
	}
	b, err := json.Marshal(sess)
	if err != nil {
		return Record{}, fmt.Errorf("storage: encode session of request %q: %w", r.GetID(), err)
	}
	rec.Session = b
	return rec, nil
}

// Decode rebuilds the request from rec. client is the rehydrated client
// (normally the *Client with ID rec.ClientID); session is the value fosite
// passes to Get*Session, into which the stored JSON is decoded and which
// becomes the request's session. A nil session leaves the request without
// one. Decode returns an error if the form or the session JSON is malformed.
func (rec Record) Decode(client fosite.Client, session fosite.Session) (*fosite.Request, error) {
	form, err := url.ParseQuery(rec.Form)
	if err != nil {
		return nil, fmt.Errorf("storage: decode form of request %q: %w", rec.RequestID, err)
	}
	if session != nil && len(rec.Session) > 0 {
		if err := json.Unmarshal(rec.Session, session); err != nil {
			return nil, fmt.Errorf("storage: decode session of request %q: %w", rec.RequestID, err)
		}
	}
	return &fosite.Request{
		ID:                rec.RequestID,
		RequestedAt:       NormalizeTime(rec.RequestedAt),
		Client:            client,
		RequestedScope:    cloneStrings(rec.RequestedScopes),
		GrantedScope:      cloneStrings(rec.GrantedScopes),
		RequestedAudience: cloneStrings(rec.RequestedAudience),
		GrantedAudience:   cloneStrings(rec.GrantedAudience),
		Form:              form,
		Session:           session,
	}, nil
}

// Clone returns a deep copy of rec.
func (rec Record) Clone() Record {
	c := rec
	c.RequestedScopes = cloneStrings(rec.RequestedScopes)
	c.GrantedScopes = cloneStrings(rec.GrantedScopes)
	c.RequestedAudience = cloneStrings(rec.RequestedAudience)
	c.GrantedAudience = cloneStrings(rec.GrantedAudience)
	c.Session = slices.Clone(rec.Session)
	return c
}

// ExpiresAt returns when the token of the given kind (fosite.AuthorizeCode,
// fosite.AccessToken or fosite.RefreshToken) issued for r expires, normalized
// with NormalizeTime; the zero time if r has no session or sets no expiry.
func ExpiresAt(r fosite.Requester, kind fosite.TokenType) time.Time {
	if r == nil || r.GetSession() == nil {
		return time.Time{}
	}
	t := r.GetSession().GetExpiresAt(kind)
	if t.IsZero() {
		return time.Time{}
	}
	return NormalizeTime(t)
}

// cloneStrings copies s, returning an empty non-nil slice for nil.
func cloneStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
