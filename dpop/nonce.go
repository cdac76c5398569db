package dpop

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/authd/authd/secrets"
)

// DefaultNoncePeriod is the length of a nonce's time slot: a nonce is
// accepted in its slot and the next, so for 5 to 10 minutes.
const DefaultNoncePeriod = 5 * time.Minute

// Nonces issues and checks server nonces (RFC 9449 §8). They are
// stateless: a nonce is the HMAC of a time slot's number under a key
// derived from the system secret, so every replica issues and accepts the
// same nonces without sharing state, and a restart forgets nothing. A
// nonce is not single use (§8 does not ask it to be); it bounds how long a
// pre-computed proof is worth anything, and the jti store stops a proof
// used twice.
type Nonces struct {
	key    []byte
	period time.Duration
	now    func() time.Time
}

// NewNonces returns nonces keyed from the system secret; period 0 is
// DefaultNoncePeriod and now nil is time.Now.
func NewNonces(secret []byte, period time.Duration, now func() time.Time) *Nonces {
	if period <= 0 {
		period = DefaultNoncePeriod
	}
	if now == nil {
		now = time.Now
	}
	return &Nonces{key: secrets.Derive(secret, "dpop-nonce"), period: period, now: now}
}

func (n *Nonces) slot(t time.Time) int64 { return t.UnixNano() / int64(n.period) }

func (n *Nonces) at(slot int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(slot))
	return base64.RawURLEncoding.EncodeToString(secrets.MAC(n.key, b[:])[:18])
}

// Current is the nonce to send now in the DPoP-Nonce header.
func (n *Nonces) Current() string { return n.at(n.slot(n.now())) }

// Valid reports whether nonce is the current slot's or the previous one's.
func (n *Nonces) Valid(nonce string) bool {
	if nonce == "" {
		return false
	}
	s := n.slot(n.now())
	return hmac.Equal([]byte(nonce), []byte(n.at(s))) || hmac.Equal([]byte(nonce), []byte(n.at(s-1)))
}
