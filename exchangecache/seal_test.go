package exchangecache_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/authd/authd/exchangecache"
)

var (
	testSecret   = []byte("0123456789abcdef0123456789abcdef")
	testVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	testKey      = "code-signature"
	// tokenJSON is a token-response-sized body (about 400 bytes).
	tokenJSON = []byte(`{"access_token":"ory_at_` + strings.Repeat("A", 87) + `","expires_in":3599,` +
		`"id_token":"eyJhbGciOiJSUzI1NiJ9.` + strings.Repeat("B", 150) + `",` +
		`"refresh_token":"ory_rt_` + strings.Repeat("C", 87) + `","scope":"openid offline","token_type":"bearer"}`)
)

func TestSealOpenRoundTrip(t *testing.T) {
	for _, pt := range [][]byte{nil, {}, []byte("x"), tokenJSON} {
		sealed, err := exchangecache.Seal(testSecret, testVerifier, testKey, pt)
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		if len(sealed) != len(pt)+1+12+16 {
			t.Fatalf("sealed length %d for %d bytes of plaintext", len(sealed), len(pt))
		}
		if sealed[0] != 1 {
			t.Fatalf("version byte %d, want 1", sealed[0])
		}
		got, err := exchangecache.Open(testSecret, testVerifier, testKey, sealed)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("Open = %q, want %q", got, pt)
		}
	}
}

func TestSealIsRandomized(t *testing.T) {
	a, _ := exchangecache.Seal(testSecret, testVerifier, testKey, tokenJSON)
	b, _ := exchangecache.Seal(testSecret, testVerifier, testKey, tokenJSON)
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same plaintext are equal; nonce not random")
	}
	if bytes.Contains(a, []byte("ory_at_")) {
		t.Fatal("sealed value contains plaintext")
	}
}

func TestOpenRejects(t *testing.T) {
	sealed, err := exchangecache.Seal(testSecret, testVerifier, testKey, tokenJSON)
	if err != nil {
		t.Fatal(err)
	}
	otherSecret := bytes.Repeat([]byte{'z'}, 32)
	flip := func(i int) []byte {
		s := bytes.Clone(sealed)
		s[i] ^= 1
		return s
	}
	tests := []struct {
		name      string
		secret    []byte
		presented string
		key       string
		sealed    []byte
	}{
		{"wrong verifier", testSecret, testVerifier + "x", testKey, sealed},
		{"wrong secret", otherSecret, testVerifier, testKey, sealed},
		{"wrong key (moved entry)", testSecret, testVerifier, testKey + "2", sealed},
		{"version flipped", testSecret, testVerifier, testKey, flip(0)},
		{"nonce flipped", testSecret, testVerifier, testKey, flip(5)},
		{"ciphertext flipped", testSecret, testVerifier, testKey, flip(40)},
		{"tag flipped", testSecret, testVerifier, testKey, flip(len(sealed) - 1)},
		{"truncated", testSecret, testVerifier, testKey, sealed[:len(sealed)-1]},
		{"too short", testSecret, testVerifier, testKey, sealed[:20]},
		{"empty", testSecret, testVerifier, testKey, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := exchangecache.Open(tt.secret, tt.presented, tt.key, tt.sealed)
			if !errors.Is(err, exchangecache.ErrUnseal) {
				t.Fatalf("Open = %q, %v; want ErrUnseal", got, err)
			}
			if got != nil {
				t.Fatal("Open returned plaintext with an error")
			}
		})
	}
}

func TestSealInvalidArguments(t *testing.T) {
	tests := []struct {
		name      string
		secret    []byte
		presented string
		key       string
	}{
		{"short secret", testSecret[:31], testVerifier, testKey},
		{"nil secret", nil, testVerifier, testKey},
		{"empty verifier", testSecret, "", testKey},
		{"empty key", testSecret, testVerifier, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := exchangecache.Seal(tt.secret, tt.presented, tt.key, tokenJSON); !errors.Is(err, exchangecache.ErrInvalidArgument) {
				t.Errorf("Seal = %v, want ErrInvalidArgument", err)
			}
			if _, err := exchangecache.Open(tt.secret, tt.presented, tt.key, make([]byte, 64)); !errors.Is(err, exchangecache.ErrInvalidArgument) {
				t.Errorf("Open = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func BenchmarkSeal(b *testing.B) {
	b.SetBytes(int64(len(tokenJSON)))
	for b.Loop() {
		if _, err := exchangecache.Seal(testSecret, testVerifier, testKey, tokenJSON); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	sealed, err := exchangecache.Seal(testSecret, testVerifier, testKey, tokenJSON)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(tokenJSON)))
	for b.Loop() {
		if _, err := exchangecache.Open(testSecret, testVerifier, testKey, sealed); err != nil {
			b.Fatal(err)
		}
	}
}
