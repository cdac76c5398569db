// Package passkeytest is a software WebAuthn authenticator (ES256,
// attestation "none") for tests and authbench: it answers the options
// package passkey makes with the JSON a browser would post.
package passkeytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
)

// Flags of authenticator data (WebAuthn L3 §6.1).
const (
	FlagUP = 0x01
	FlagUV = 0x04
	FlagBE = 0x08
	FlagBS = 0x10
	FlagAT = 0x40
)

// Credential is one discoverable credential the authenticator holds.
type Credential struct {
	ID         []byte
	UserHandle []byte
	RPID       string
	Key        *ecdsa.PrivateKey
	// Count is the signature counter the next assertion reports
	// (incremented first unless ZeroCounter).
	Count       uint32
	ZeroCounter bool
}

// Authenticator makes credentials and assertions.
type Authenticator struct {
	// Origin is what clientDataJSON reports (the page's origin).
	Origin string
	// Flags are the flags set in every answer (default UP|UV).
	Flags byte
	// RPID overrides the RP ID the authenticator signs for ("" = the
	// options').
	RPID string
}

// Options are the parts of a ceremony's options the authenticator reads.
type Options struct {
	PublicKey struct {
		Challenge string `json:"challenge"`
		RPID      string `json:"rpId"`
		RP        struct {
			ID string `json:"id"`
		} `json:"rp"`
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	} `json:"publicKey"`
}

// ParseOptions reads options JSON ({"publicKey": …}).
func ParseOptions(b []byte) (Options, error) {
	var o Options
	err := json.Unmarshal(b, &o)
	return o, err
}

func (a *Authenticator) flags() byte {
	if a.Flags == 0 {
		return FlagUP | FlagUV
	}
	return a.Flags
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (a *Authenticator) clientData(typ, challenge string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": a.Origin, "crossOrigin": false})
	return b
}

func authData(rpID string, flags byte, count uint32, attested []byte) []byte {
	h := sha256.Sum256([]byte(rpID))
	out := append(h[:], flags)
	out = binary.BigEndian.AppendUint32(out, count)
	return append(out, attested...)
}

// Create answers creation options: a new credential and the JSON the
// browser would post.
func (a *Authenticator) Create(options []byte) (*Credential, []byte, error) {
	o, err := ParseOptions(options)
	if err != nil {
		return nil, nil, err
	}
	rpID := o.PublicKey.RP.ID
	if a.RPID != "" {
		rpID = a.RPID
	}
	userHandle, err := base64.RawURLEncoding.DecodeString(o.PublicKey.User.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("user.id: %w", err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	c := &Credential{ID: id, UserHandle: userHandle, RPID: rpID, Key: key}
	x, y := make([]byte, 32), make([]byte, 32)
	key.X.FillBytes(x)
	key.Y.FillBytes(y)
	cose, err := webauthncbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: x, -3: y})
	if err != nil {
		return nil, nil, err
	}
	attested := make([]byte, 16) // AAGUID: zero, as with attestation "none"
	attested = binary.BigEndian.AppendUint16(attested, uint16(len(id)))
	attested = append(slices.Concat(attested, id), cose...)
	ad := authData(rpID, a.flags()|FlagAT, 0, attested)
	att, err := webauthncbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": ad})
	if err != nil {
		return nil, nil, err
	}
	answer, _ := json.Marshal(map[string]any{
		"id": b64(id), "rawId": b64(id), "type": "public-key", "authenticatorAttachment": "platform",
		"response": map[string]any{
			"clientDataJSON":    b64(a.clientData("webauthn.create", o.PublicKey.Challenge)),
			"attestationObject": b64(att),
			"transports":        []string{"internal", "hybrid"},
		},
		"clientExtensionResults": map[string]any{},
	})
	return c, answer, nil
}

// Get answers request options with c: the JSON the browser would post.
func (a *Authenticator) Get(c *Credential, options []byte) ([]byte, error) {
	o, err := ParseOptions(options)
	if err != nil {
		return nil, err
	}
	rpID := o.PublicKey.RPID
	if a.RPID != "" {
		rpID = a.RPID
	}
	if !c.ZeroCounter {
		c.Count++
	}
	cd := a.clientData("webauthn.get", o.PublicKey.Challenge)
	ad := authData(rpID, a.flags(), c.Count, nil)
	h := sha256.Sum256(cd)
	digest := sha256.Sum256(slices.Concat(ad, h[:]))
	sig, err := ecdsa.SignASN1(rand.Reader, c.Key, digest[:])
	if err != nil {
		return nil, err
	}
	answer, _ := json.Marshal(map[string]any{
		"id": b64(c.ID), "rawId": b64(c.ID), "type": "public-key", "authenticatorAttachment": "platform",
		"response": map[string]any{
			"clientDataJSON": b64(cd), "authenticatorData": b64(ad), "signature": b64(sig), "userHandle": b64(c.UserHandle),
		},
		"clientExtensionResults": map[string]any{},
	})
	return answer, nil
}
