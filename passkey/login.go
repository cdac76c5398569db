package passkey

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/secevent"
	"github.com/authd/authd/storage"
)

// AMR is what a passkey sign-in proves (RFC 8176 §2): possession of a
// hardware-secured key ("hwk") and, since user verification is required,
// the user's presence checked by a biometric or PIN on the device ("user").
var AMR = []string{"hwk", "user"}

// AuditCloneSuspected is the audit event of a sign count that went
// backwards.
const AuditCloneSuspected = "passkey.clone_suspected"

// BeginLogin starts a sign-in with a discoverable credential (no username:
// the authenticator offers the site's passkeys), bound to binding (the
// page's CSRF token): the options for navigator.credentials.get, as JSON
// ({"publicKey": …}).
func (s *Service) BeginLogin(ctx context.Context, binding string) ([]byte, error) {
	assertion, sd, err := s.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return nil, fmt.Errorf("passkey: begin login: %w", err)
	}
	if err := s.put(ctx, kindLogin, "", binding, sd); err != nil {
		return nil, err
	}
	return json.Marshal(assertion)
}

// FinishLogin checks the browser's answer to BeginLogin's options (the
// PublicKeyCredential as JSON) and returns the user it signs in
// (WebAuthn L3 §7.2). The ceremony is used up whatever the outcome.
func (s *Service) FinishLogin(ctx context.Context, binding string, answer []byte) (identity.User, error) {
	parsed, err := protocol.ParseCredentialRequestResponseBytes(answer)
	if err != nil {
		return identity.User{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	resp := &parsed.Response
	// The ceremony is taken (single use) and the credential read with its
	// user in one round trip.
	c, p, u, err := s.store.TakeCeremonyPasskey(ctx, digest(resp.CollectedClientData.Challenge), s.opts.Now(), parsed.RawID)
	sd, err := checkCeremony(c, err, kindLogin, "", binding)
	if err != nil {
		return identity.User{}, err
	}
	// Steps 5–6: the credential and its user. A removed credential, an
	// unknown one and a disabled user get one answer.
	switch {
	case p == nil:
		return identity.User{}, ErrUnknown
	case u.Disabled, len(resp.UserHandle) > 0 && !bytes.Equal(resp.UserHandle, []byte(u.Subject)):
		return identity.User{}, ErrUnknown
	case !p.DisabledAt.IsZero():
		return identity.User{}, ErrCloned
	}
	// Steps 7–14, with our own words for the checks people meet.
	if err := s.checkClient(&resp.CollectedClientData, resp.AuthenticatorData); err != nil {
		return identity.User{}, err
	}
	if err := resp.CollectedClientData.Verify(sd.Challenge, protocol.AssertCeremony, s.rp.Origins, nil, nil,
		protocol.TopOriginExplicitVerificationMode, false); err != nil {
		return identity.User{}, fmt.Errorf("%w: %v", ErrVerification, err)
	}
	rpIDHash := sha256.Sum256([]byte(s.rp.RPID))
	if err := resp.AuthenticatorData.Verify(rpIDHash[:], nil, true, true); err != nil {
		return identity.User{}, fmt.Errorf("%w: %v", ErrVerification, err)
	}
	// §6.1.3: the backup eligibility of a credential never changes, and
	// BS without BE is invalid.
	flags := resp.AuthenticatorData.Flags
	if flags.HasBackupEligible() != p.BackupEligible || (!flags.HasBackupEligible() && flags.HasBackupState()) {
		return identity.User{}, fmt.Errorf("%w: backup flags", ErrVerification)
	}
	// Steps 15–16: the signature over authData ‖ SHA-256(clientDataJSON).
	v, err := s.verifierOf(p)
	if err != nil {
		return identity.User{}, fmt.Errorf("%w: stored key: %v", ErrVerification, err)
	}
	clientDataHash := sha256.Sum256(parsed.Raw.AssertionResponse.ClientDataJSON)
	signed := slices.Concat([]byte(parsed.Raw.AssertionResponse.AuthenticatorData), clientDataHash[:])
	if !v.verify(signed, resp.Signature) {
		return identity.User{}, fmt.Errorf("%w: signature", ErrVerification)
	}
	// Step 22: the sign count, decided by one conditional write.
	use, err := s.store.UsePasskey(ctx, p.ID, resp.AuthenticatorData.Counter, flags.HasBackupState(), s.opts.Now())
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return identity.User{}, ErrUnknown // removed or disabled meanwhile
	case err != nil:
		return identity.User{}, fmt.Errorf("passkey: record use: %w", err)
	case use == storage.PasskeyCloned && s.opts.Security != nil:
		s.opts.Security.Record(ctx, secevent.Event{Kind: secevent.SignCountRegression, Subject: u.Subject,
			Credential: base64.RawURLEncoding.EncodeToString(p.ID)})
		return identity.User{}, ErrCloned
	case use == storage.PasskeyCloned:
		s.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "audit", slog.String("what", AuditCloneSuspected),
			slog.String("sub", u.Subject), slog.String("credential_id", base64.RawURLEncoding.EncodeToString(p.ID)),
			slog.Uint64("stored_sign_count", uint64(p.SignCount)), slog.Uint64("sign_count", uint64(resp.AuthenticatorData.Counter)))
		return identity.User{}, ErrCloned
	}
	return userView(u), nil
}

// checkClient refuses, in the words people meet, an answer from another
// origin (§7.2 step 11), signed for another RP ID (step 15) or without
// user verification (step 17). The library's checks run after it.
func (s *Service) checkClient(cd *protocol.CollectedClientData, ad protocol.AuthenticatorData) error {
	if !slices.Contains(s.rp.Origins, cd.Origin) {
		return ErrOrigin
	}
	rpIDHash := sha256.Sum256([]byte(s.rp.RPID))
	if !bytes.Equal(ad.RPIDHash, rpIDHash[:]) {
		return ErrRPID
	}
	if !ad.Flags.HasUserVerified() {
		return ErrUserVerification
	}
	return nil
}

// verifier is a parsed credential public key.
type verifier struct {
	cose   []byte           // the stored COSE key it was parsed from
	ecdsa  *ecdsa.PublicKey // ES256/384/512, verified with VerifyASN1
	hash   func([]byte) []byte
	parsed any // any other key, verified by webauthncose
}

func (v *verifier) verify(signed, sig []byte) bool {
	if v.ecdsa != nil {
		return ecdsa.VerifyASN1(v.ecdsa, v.hash(signed), sig)
	}
	ok, err := webauthncose.VerifySignature(v.parsed, signed, sig)
	return ok && err == nil
}

// verifierOf returns p's parsed key from the cache, parsing it on a miss.
// The cache is keyed by credential ID and checked against the stored
// bytes, so a key never answers for another.
func (s *Service) verifierOf(p *storage.Passkey) (*verifier, error) {
	if v, ok := s.keys.Get(string(p.ID)); ok && bytes.Equal(v.cose, p.PublicKey) {
		return v, nil
	}
	key, err := webauthncose.ParsePublicKey(p.PublicKey)
	if err != nil {
		return nil, err
	}
	v := &verifier{cose: bytes.Clone(p.PublicKey), parsed: key}
	if ec, ok := key.(webauthncose.EC2PublicKeyData); ok {
		alg := webauthncose.COSEAlgorithmIdentifier(ec.Algorithm)
		_, known := webauthncose.HasherFromCOSEAlg(alg)
		if pub, err := ec.ToECDSA(); err == nil && known && alg != webauthncose.AlgES256K {
			v.ecdsa = pub
			v.hash = func(b []byte) []byte {
				h, _ := webauthncose.HasherFromCOSEAlg(alg)
				h.Write(b)
				return h.Sum(nil)
			}
		}
	}
	s.keys.Add(string(p.ID), v)
	return v, nil
}
