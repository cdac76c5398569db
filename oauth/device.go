package oauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/secrets"
)

// The device cookie (OWASP's "device cookie" against credential stuffing):
// a browser that has signed in as a username keeps a tag of that username,
// so a method's per-username back-off, which everyone's failures feed, does
// not hold back the person on their own browser. A tag is an HMAC of the
// prepared username under a key of its own: it names no one to whoever
// reads the cookie, and cannot be made for a username without the key.
const (
	deviceCookie  = "authd_device"
	deviceMaxTags = 8
	deviceMaxAge  = 180 * 24 * 60 * 60 // seconds
	deviceTagLen  = 16                 // bytes of HMAC kept
)

type deviceCodec struct {
	key    []byte
	secure bool
}

func newDeviceCodec(secret []byte, secure bool) deviceCodec {
	return deviceCodec{key: secrets.Derive(secret, "device-cookie"), secure: secure}
}

func (d deviceCodec) tag(username string) string {
	if p, err := identity.PrepareUsername(username); err == nil {
		username = p
	}
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte(username))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:deviceTagLen])
}

// tags reads the browser's tags (at most deviceMaxTags, newest first).
func (d deviceCodec) tags(r *http.Request) []string {
	ck, err := r.Cookie(deviceCookie)
	if err != nil || len(ck.Value) > deviceMaxTags*32 {
		return nil
	}
	t := strings.Split(ck.Value, ".")
	return t[:min(len(t), deviceMaxTags)]
}

// known returns the check a method calls: has this browser signed in as
// username before? Compared in constant time.
func (d deviceCodec) known(r *http.Request) func(username string) bool {
	tags := d.tags(r)
	return func(username string) bool {
		if len(tags) == 0 {
			return false
		}
		want := []byte(d.tag(username))
		found := false
		for _, t := range tags {
			if hmac.Equal([]byte(t), want) {
				found = true
			}
		}
		return found
	}
}

// remember adds username's tag to the browser's cookie (newest first).
func (d deviceCodec) remember(w http.ResponseWriter, r *http.Request, username string) {
	t := d.tag(username)
	tags := slices.DeleteFunc(d.tags(r), func(s string) bool { return s == t || s == "" })
	tags = append([]string{t}, tags...)
	tags = tags[:min(len(tags), deviceMaxTags)]
	http.SetCookie(w, &http.Cookie{Name: deviceCookie, Value: strings.Join(tags, "."), Path: "/",
		MaxAge: deviceMaxAge, HttpOnly: true, Secure: d.secure, SameSite: http.SameSiteLaxMode})
}
