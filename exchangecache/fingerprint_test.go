package exchangecache_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/authd/authd/exchangecache"
)

// referenceFingerprint restates the documented encoding independently.
func referenceFingerprint(clientID, redirectURI, verifier string) string {
	var buf []byte
	buf = append(buf, "authd/exchangecache/fingerprint/v1"...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(clientID)))
	buf = append(buf, clientID...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(redirectURI)))
	buf = append(buf, redirectURI...)
	v := sha256.Sum256([]byte(verifier))
	buf = append(buf, v[:]...)
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:])
}

func TestFingerprint(t *testing.T) {
	base := exchangecache.Fingerprint("client", "https://app.example/cb", "verifier")
	if want := referenceFingerprint("client", "https://app.example/cb", "verifier"); base != want {
		t.Fatalf("Fingerprint = %s, want documented encoding %s", base, want)
	}
	if len(base) != 64 {
		t.Fatalf("len = %d, want 64 hex chars", len(base))
	}
	if again := exchangecache.Fingerprint("client", "https://app.example/cb", "verifier"); again != base {
		t.Fatal("Fingerprint is not deterministic")
	}
	tests := []struct {
		name                            string
		clientID, redirectURI, verifier string
	}{
		{"other client", "client2", "https://app.example/cb", "verifier"},
		{"other redirect", "client", "https://app.example/cb2", "verifier"},
		{"other verifier", "client", "https://app.example/cb", "verifier2"},
		{"boundary moved client->redirect", "clienth", "ttps://app.example/cb", "verifier"},
		{"boundary moved redirect->verifier", "client", "https://app.example/c", "bverifier"},
		{"empty verifier", "client", "https://app.example/cb", ""},
	}
	for _, tt := range tests {
		if got := exchangecache.Fingerprint(tt.clientID, tt.redirectURI, tt.verifier); got == base {
			t.Errorf("%s: same fingerprint as base", tt.name)
		}
	}
}
