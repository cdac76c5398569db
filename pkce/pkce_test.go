package pkce_test

import (
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/authd/authd/pkce"
)

// RFC 7636 Appendix B.
const (
	rfcVerifier  = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
)

func TestS256ChallengeRFC7636AppendixB(t *testing.T) {
	// The octets as printed in RFC 7636 Appendix B, so the test does not
	// depend on the base64 strings alone.
	verifierOctets := []byte{116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173,
		187, 186, 22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83,
		132, 141, 121}
	hashOctets := []byte{19, 211, 30, 150, 26, 26, 216, 236, 47, 22, 177, 12, 76, 152, 46,
		8, 118, 168, 120, 173, 109, 241, 68, 86, 110, 225, 137, 74, 203,
		112, 249, 195}

	if got := base64.RawURLEncoding.EncodeToString(verifierOctets); got != rfcVerifier {
		t.Fatalf("verifier octets encode to %q, want %q", got, rfcVerifier)
	}
	if got := base64.RawURLEncoding.EncodeToString(hashOctets); got != rfcChallenge {
		t.Fatalf("hash octets encode to %q, want %q", got, rfcChallenge)
	}
	if got := pkce.S256Challenge(rfcVerifier); got != rfcChallenge {
		t.Errorf("S256Challenge(%q) = %q, want %q", rfcVerifier, got, rfcChallenge)
	}
	if err := pkce.Verify(rfcVerifier, rfcChallenge, pkce.MethodS256); err != nil {
		t.Errorf("Verify(RFC pair) = %v, want nil", err)
	}
	if err := pkce.ValidateChallenge(rfcChallenge, pkce.MethodS256, false); err != nil {
		t.Errorf("ValidateChallenge(RFC challenge) = %v, want nil", err)
	}
}

func TestValidateVerifier(t *testing.T) {
	tests := []struct {
		name    string
		v       string
		wantErr error
	}{
		{"RFC 7636 Appendix B", rfcVerifier, nil},
		{"empty", "", pkce.ErrVerifierFormat},
		{"42 chars", strings.Repeat("a", 42), pkce.ErrVerifierFormat},
		{"43 chars", strings.Repeat("a", 43), nil},
		{"128 chars", strings.Repeat("a", 128), nil},
		{"129 chars", strings.Repeat("a", 129), pkce.ErrVerifierFormat},
		{"every allowed char", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", nil},
		{"plus", strings.Repeat("a", 42) + "+", pkce.ErrVerifierFormat},
		{"slash", "/" + strings.Repeat("a", 42), pkce.ErrVerifierFormat},
		{"padding", strings.Repeat("a", 42) + "=", pkce.ErrVerifierFormat},
		{"space", strings.Repeat("a", 21) + " " + strings.Repeat("a", 21), pkce.ErrVerifierFormat},
		{"NUL", strings.Repeat("a", 42) + "\x00", pkce.ErrVerifierFormat},
		{"non-ASCII, 43 bytes", "é" + strings.Repeat("a", 41), pkce.ErrVerifierFormat},
		{"percent-encoded tilde", strings.Repeat("a", 40) + "%7E", pkce.ErrVerifierFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pkce.ValidateVerifier(tt.v)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("ValidateVerifier() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestValidateChallenge(t *testing.T) {
	tests := []struct {
		name       string
		challenge  string
		method     string
		allowPlain bool
		wantErr    error
	}{
		{"S256 RFC value", rfcChallenge, "S256", false, nil},
		{"S256 all-A", strings.Repeat("A", 43), "S256", false, nil},
		{"missing challenge, S256", "", "S256", false, pkce.ErrChallengeRequired},
		{"missing challenge and method", "", "", false, pkce.ErrChallengeRequired},
		{"missing challenge, plain allowed", "", "plain", true, pkce.ErrChallengeRequired},
		{"S256 42 chars", rfcChallenge[:42], "S256", false, pkce.ErrChallengeFormat},
		{"S256 44 chars", rfcChallenge + "A", "S256", false, pkce.ErrChallengeFormat},
		{"S256 with padding", rfcChallenge + "=", "S256", false, pkce.ErrChallengeFormat},
		{"S256 padding inside 43 chars", rfcChallenge[:42] + "=", "S256", false, pkce.ErrChallengeFormat},
		{"S256 standard base64 alphabet", strings.ReplaceAll(rfcChallenge, "-", "+"), "S256", false, pkce.ErrChallengeFormat},
		{"S256 non-zero trailing bits", rfcChallenge[:42] + "N", "S256", false, pkce.ErrChallengeFormat},
		{"S256 with newline", rfcChallenge[:21] + "\n" + rfcChallenge[22:], "S256", false, pkce.ErrChallengeFormat},
		{"plain refused", rfcVerifier, "plain", false, pkce.ErrMethodNotAllowed},
		{"empty method means plain, refused", rfcVerifier, "", false, pkce.ErrMethodNotAllowed},
		{"plain allowed", rfcVerifier, "plain", true, nil},
		{"empty method means plain, allowed", rfcVerifier, "", true, nil},
		{"plain allowed, too short", strings.Repeat("a", 42), "plain", true, pkce.ErrChallengeFormat},
		{"plain allowed, bad char", strings.Repeat("a", 42) + "+", "plain", true, pkce.ErrChallengeFormat},
		{"method is case-sensitive", rfcChallenge, "s256", false, pkce.ErrMethodNotAllowed},
		{"unknown method", rfcChallenge, "S512", true, pkce.ErrMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pkce.ValidateChallenge(tt.challenge, tt.method, tt.allowPlain)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("ValidateChallenge() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	// flip replaces the character at i with another allowed one.
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	tests := []struct {
		name      string
		verifier  string
		challenge string
		method    string
		wantErr   error
	}{
		{"S256 match", rfcVerifier, rfcChallenge, "S256", nil},
		{"S256 verifier differs in first char", flip(rfcVerifier, 0), rfcChallenge, "S256", pkce.ErrMismatch},
		{"S256 verifier differs in last char", flip(rfcVerifier, len(rfcVerifier)-1), rfcChallenge, "S256", pkce.ErrMismatch},
		{"S256 challenge differs in first char", rfcVerifier, flip(rfcChallenge, 0), "S256", pkce.ErrMismatch},
		{"S256 challenge differs in last char", rfcVerifier, flip(rfcChallenge, len(rfcChallenge)-1), "S256", pkce.ErrMismatch},
		{"S256 challenge empty", rfcVerifier, "", "S256", pkce.ErrMismatch},
		{"S256 with the verifier as challenge", rfcVerifier, rfcVerifier, "S256", pkce.ErrMismatch},
		{"plain match", rfcVerifier, rfcVerifier, "plain", nil},
		{"empty method is plain", rfcVerifier, rfcVerifier, "", nil},
		{"plain with the S256 challenge", rfcVerifier, rfcChallenge, "plain", pkce.ErrMismatch},
		{"plain differs in last char", rfcVerifier, flip(rfcVerifier, len(rfcVerifier)-1), "plain", pkce.ErrMismatch},
		{"malformed verifier", rfcVerifier[:42], pkce.S256Challenge(rfcVerifier[:42]), "S256", pkce.ErrVerifierFormat},
		{"malformed plain verifier equal to challenge", "short", "short", "plain", pkce.ErrVerifierFormat},
		{"unknown method", rfcVerifier, rfcChallenge, "S512", pkce.ErrMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pkce.Verify(tt.verifier, tt.challenge, tt.method)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Verify() = %v, want %v", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), tt.verifier) {
				t.Errorf("error %q contains the code_verifier", err)
			}
		})
	}
}

// Verify's constant-time property comes from crypto/subtle and is not
// asserted by timing here (too noisy under -race); these benchmarks let a
// reader compare a mismatch in the first and in the last character.
func BenchmarkVerify(b *testing.B) {
	last := len(rfcChallenge) - 1
	cases := []struct {
		name, challenge string
	}{
		{"match", rfcChallenge},
		{"mismatch-first", "A" + rfcChallenge[1:]},
		{"mismatch-last", rfcChallenge[:last] + "A"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = pkce.Verify(rfcVerifier, c.challenge, pkce.MethodS256)
			}
		})
	}
}

// verifierOracle is an independent statement of RFC 7636 §4.1.
var verifierOracle = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

func FuzzValidateVerifier(f *testing.F) {
	for _, s := range []string{
		rfcVerifier, "", strings.Repeat("a", 42), strings.Repeat("a", 43),
		strings.Repeat("~", 128), strings.Repeat("-", 129), rfcVerifier + "=", "é" + strings.Repeat("a", 41),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		err := pkce.ValidateVerifier(v)
		if want := verifierOracle.MatchString(v); want != (err == nil) {
			t.Fatalf("ValidateVerifier(%q) = %v, oracle says valid=%v", v, err, want)
		}
		if err != nil && !errors.Is(err, pkce.ErrVerifierFormat) {
			t.Fatalf("ValidateVerifier(%q) = %v, want ErrVerifierFormat", v, err)
		}
	})
}

func FuzzVerify(f *testing.F) {
	f.Add(rfcVerifier, rfcChallenge)
	f.Add(rfcVerifier, rfcVerifier)
	f.Add(strings.Repeat("a", 43), "")
	f.Add("", rfcChallenge)
	f.Fuzz(func(t *testing.T, verifier, challenge string) {
		validVerifier := pkce.ValidateVerifier(verifier) == nil

		// The verifier's own S256 challenge always verifies, and is a
		// valid S256 challenge.
		own := pkce.S256Challenge(verifier)
		if err := pkce.ValidateChallenge(own, pkce.MethodS256, false); err != nil {
			t.Fatalf("ValidateChallenge(S256Challenge(%q)) = %v", verifier, err)
		}
		if err := pkce.Verify(verifier, own, pkce.MethodS256); validVerifier != (err == nil) {
			t.Fatalf("Verify(%q, own challenge) = %v, valid verifier=%v", verifier, err, validVerifier)
		}

		// An arbitrary challenge verifies only if it is the verifier's own.
		err := pkce.Verify(verifier, challenge, pkce.MethodS256)
		switch {
		case !validVerifier:
			if !errors.Is(err, pkce.ErrVerifierFormat) {
				t.Fatalf("Verify(malformed %q) = %v, want ErrVerifierFormat", verifier, err)
			}
		case challenge == own:
			if err != nil {
				t.Fatalf("Verify(%q, %q) = %v, want nil", verifier, challenge, err)
			}
		default:
			if !errors.Is(err, pkce.ErrMismatch) {
				t.Fatalf("Verify(%q, %q) = %v, want ErrMismatch", verifier, challenge, err)
			}
		}
	})
}
