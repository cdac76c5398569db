package oauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/authd/authd/secrets"
)

const (
	sessionCookie = "authd_session"
	csrfCookie    = "authd_csrf"
)

// The session cookie carries only an unguessable reference (256 random
// bits) to a server-side session row (package identity); the row is keyed
// by the reference's hash. Ending the row ends the session at once, in every
// copy of the cookie.

// cookieCodec sets the session cookie and issues/verifies CSRF tokens.
type cookieCodec struct {
	csrfKey []byte
	secure  bool
}

func newCookieCodec(secret []byte, secure bool) *cookieCodec {
	return &cookieCodec{csrfKey: secrets.Derive(secret, "csrf"), secure: secure}
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24).
	return base64.RawURLEncoding.EncodeToString(b)
}

// setSession puts a session reference in the browser's cookie.
func (c *cookieCodec) setSession(w http.ResponseWriter, ref string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: ref,
		Path: "/", MaxAge: int(ttl.Seconds()), HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}

// sessionRef returns the session reference the browser sent, or "".
func (c *cookieCodec) sessionRef(r *http.Request) string {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || len(ck.Value) > 128 {
		return ""
	}
	return ck.Value
}

// clearSession removes the session cookie.
func (c *cookieCodec) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode})
}

// csrfToken returns the CSRF token for the form on this page, setting the
// browser's CSRF cookie if it has none (double-submit, with the form token
// an HMAC of the cookie so it cannot be forged from the cookie alone).
func (c *cookieCodec) csrfToken(w http.ResponseWriter, r *http.Request) string {
	var v string
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 22 && len(ck.Value) <= 64 {
		v = ck.Value
	} else {
		v = randomString(32)
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode})
	}
	return c.csrfMAC(v)
}

func (c *cookieCodec) csrfMAC(cookie string) string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte(cookie))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether the posted csrf_token matches the cookie,
// in constant time.
func (c *cookieCodec) checkCSRF(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || ck.Value == "" {
		return false
	}
	got := r.PostForm.Get("csrf_token")
	return hmac.Equal([]byte(got), []byte(c.csrfMAC(ck.Value)))
}
