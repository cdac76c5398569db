package dpop_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/authd/authd/dpop"
)

// nonCanonical re-encodes the last character of a RawURL base64 segment so
// that its unused low bits are non-zero: it decodes (non-strict) to the
// same bytes.
func nonCanonical(t *testing.T, seg string) string {
	t.Helper()
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(seg)%4 == 0 || len(seg)%4 == 1 {
		t.Fatalf("segment has no unused bits (len %% 4 = %d)", len(seg)%4)
	}
	last := strings.IndexByte(alpha, seg[len(seg)-1])
	alt := seg[:len(seg)-1] + string(alpha[last|1]) // set the lowest unused bit
	a, err1 := base64.RawURLEncoding.DecodeString(seg)
	b, err2 := base64.RawURLEncoding.DecodeString(alt)
	if err1 != nil || err2 != nil || string(a) != string(b) || alt == seg {
		t.Fatalf("not an alternative encoding: %v %v", err1, err2)
	}
	return alt
}

// TestNonCanonicalEncodingRefused: a segment whose last character has
// non-zero unused bits (another encoding of the same bytes) is refused,
// with the header cached or not, whichever bytes were signed: go-jose
// checks a signature over its re-encoding, the cached path over the bytes
// as sent, so only one encoding per value keeps their verdicts alike.
func TestNonCanonicalEncodingRefused(t *testing.T) {
	now := time.Now()
	req := dpop.Request{Method: "POST", URL: tokenURL}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	first, err := dpop.NewProof(key, dpop.AlgES256, dpop.ProofClaims{Method: "POST", URL: tokenURL, IssuedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	header := first[:strings.IndexByte(first, '.')]
	// A payload whose encoding has unused bits.
	var payload string
	for pad := 0; ; pad++ {
		b, _ := json.Marshal(map[string]any{"jti": "j" + strings.Repeat("x", pad), "htm": "POST", "htu": tokenURL, "iat": now.Unix()})
		payload = base64.RawURLEncoding.EncodeToString(b)
		if len(payload)%4 != 0 {
			break
		}
	}
	odd := nonCanonical(t, payload)
	signedRaw := header + "." + odd + "." + rawSign(t, key, header+"."+odd)       // signed over what is sent
	signedCanon := header + "." + odd + "." + rawSign(t, key, header+"."+payload) // signed over the canonical form
	for name, p := range map[string]string{"signed over raw": signedRaw, "signed over canonical": signedCanon} {
		warm := dpop.NewVerifier(dpop.Options{Now: func() time.Time { return now }, Replay: dpop.NewMemory()})
		if _, err := warm.Parse(first, req); err != nil {
			t.Fatal(err)
		}
		cold := dpop.NewVerifier(dpop.Options{Now: func() time.Time { return now }, Replay: dpop.NewMemory(), KeyCacheSize: -1})
		_, errWarm := warm.Parse(p, req)
		_, errCold := cold.Parse(p, req)
		if errWarm == nil || errCold == nil {
			t.Errorf("%s: cached path: %v; without cache: %v; want both refused", name, errWarm, errCold)
		}
	}
}
