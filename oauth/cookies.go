package oauth

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/authd/authd/secrets"
)

const (
	sessionCookie = "authd_session"
	csrfCookie    = "authd_csrf"
)

// browserSession is the signed-in state of a browser. It lives only in an
// AEAD-sealed cookie: authd keeps no server-side session rows, so a stolen
// database yields no sessions, and any replica can read the cookie.
type browserSession struct {
	// ID is random per sign-in, so a new sign-in rotates the session id.
	ID       string `json:"id"`
	Subject  string `json:"sub"`
	AuthTime int64  `json:"iat"`
	Expires  int64  `json:"exp"`
}

// cookieCodec seals browser sessions and issues/verifies CSRF tokens.
type cookieCodec struct {
	aead    cipher.AEAD
	csrfKey []byte
	secure  bool
	now     func() time.Time
}

func newCookieCodec(secret []byte, secure bool, now func() time.Time) *cookieCodec {
	return &cookieCodec{
		aead:    secrets.NewAEAD(secret, "session-cookie"),
		csrfKey: secrets.Derive(secret, "csrf"),
		secure:  secure, now: now,
	}
}

var errNoSession = errors.New("oauth: no valid session")

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24).
	return base64.RawURLEncoding.EncodeToString(b)
}

// setSession starts a new sign-in session for subject (with a fresh id).
func (c *cookieCodec) setSession(w http.ResponseWriter, subject string, ttl time.Duration) {
	now := c.now()
	s := browserSession{ID: randomString(16), Subject: subject, AuthTime: now.Unix(), Expires: now.Add(ttl).Unix()}
	plain, _ := json.Marshal(s)
	nonce := make([]byte, c.aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := c.aead.Seal(nonce, nonce, plain, []byte(sessionCookie))
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: base64.RawURLEncoding.EncodeToString(sealed),
		Path: "/", MaxAge: int(ttl.Seconds()), HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}

// session returns the browser's valid session, or errNoSession.
func (c *cookieCodec) session(r *http.Request) (browserSession, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return browserSession{}, errNoSession
	}
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || len(raw) < c.aead.NonceSize() {
		return browserSession{}, errNoSession
	}
	ns := c.aead.NonceSize()
	plain, err := c.aead.Open(nil, raw[:ns], raw[ns:], []byte(sessionCookie))
	if err != nil {
		return browserSession{}, errNoSession
	}
	var s browserSession
	if json.Unmarshal(plain, &s) != nil || s.Subject == "" || c.now().Unix() >= s.Expires {
		return browserSession{}, errNoSession
	}
	return s, nil
}

// clearSession signs the browser out.
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
