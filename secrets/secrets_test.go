package secrets_test

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/authd/authd/secrets"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// TestDeriveIsFixed: Derive is HKDF-SHA256 with info "authd/v1/"+purpose;
// every stored hash and sealed value depends on exactly that.
func TestDeriveIsFixed(t *testing.T) {
	want, _ := hkdf.Key(sha256.New, secret, nil, "authd/v1/client-secret", 32)
	if got := secrets.Derive(secret, "client-secret"); !bytes.Equal(got, want) {
		t.Fatalf("Derive changed: %x, want %x", got, want)
	}
	if bytes.Equal(secrets.Derive(secret, "a"), secrets.Derive(secret, "b")) {
		t.Fatal("two purposes share a key")
	}
}

func TestSealOpen(t *testing.T) {
	sealed, err := secrets.Seal(secret, "verifier", "key", []byte("plain"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := secrets.Open(secret, "verifier", "key", sealed); err != nil || string(got) != "plain" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	for name, open := range map[string]func() ([]byte, error){
		"other presented": func() ([]byte, error) { return secrets.Open(secret, "other", "key", sealed) },
		"other key":       func() ([]byte, error) { return secrets.Open(secret, "verifier", "other", sealed) },
		"other secret":    func() ([]byte, error) { return secrets.Open(bytes.Repeat([]byte("x"), 32), "verifier", "key", sealed) },
		"truncated":       func() ([]byte, error) { return secrets.Open(secret, "verifier", "key", sealed[:10]) },
	} {
		if _, err := open(); !errors.Is(err, secrets.ErrUnseal) {
			t.Errorf("%s: %v, want ErrUnseal", name, err)
		}
	}
	if _, err := secrets.Seal([]byte("short"), "v", "k", nil); !errors.Is(err, secrets.ErrInvalidArgument) {
		t.Errorf("short secret: %v", err)
	}
}

func TestHasher(t *testing.T) {
	h := secrets.NewHasher(secret)
	hash, _ := h.Hash(context.Background(), []byte("s3cret"))
	if err := h.Compare(context.Background(), hash, []byte("s3cret")); err != nil {
		t.Fatal(err)
	}
	if err := h.Compare(context.Background(), hash, []byte("other")); !errors.Is(err, secrets.ErrSecretMismatch) {
		t.Fatalf("wrong secret: %v", err)
	}
	if err := secrets.NewHasher(bytes.Repeat([]byte("y"), 32)).Compare(context.Background(), hash, []byte("s3cret")); err == nil {
		t.Fatal("another system secret verifies the hash")
	}
}
