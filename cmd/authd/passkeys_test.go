package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/authd/authd/revocation"
	"github.com/authd/authd/storage/memory"
)

// TestPasskeySettings: an IP-address issuer without AUTHD_WEBAUTHN_RP_ID
// turns passkeys off with one warning; a domain issuer turns them on; an
// RP ID that is not the issuer's host or a parent of it is an error
// naming the setting, reported with the others before any I/O.
func TestPasskeySettings(t *testing.T) {
	store := memory.New()
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	c := config{Addr: "127.0.0.1:8080"}
	svc, err := newPasskeys(c, "http://127.0.0.1:8080", store, revocation.Store{Store: store}, logger, nil)
	if err != nil || svc != nil {
		t.Fatalf("IP issuer: %v, %v", svc, err)
	}
	if n := strings.Count(log.String(), "passkeys are off"); n != 1 || !strings.Contains(log.String(), "AUTHD_WEBAUTHN_RP_ID") {
		t.Fatalf("IP issuer: %d warnings: %s", n, log.String())
	}
	c.passkeys.RPID = "localhost"
	if _, err := newPasskeys(c, "http://127.0.0.1:8080", store, revocation.Store{Store: store}, logger, nil); err == nil {
		t.Fatal("RP ID localhost for an IP issuer: no error")
	}
	c.passkeys = passkeyConfig{RPID: "example.com", AppleAppIDs: "ABCDE12345.com.example.app"}
	svc, err = newPasskeys(c, "https://id.example.com", store, revocation.Store{Store: store}, logger, nil)
	if err != nil || svc == nil || svc.RelyingParty().RPID != "example.com" {
		t.Fatalf("domain issuer: %v, %v", svc, err)
	}
	c.passkeys = passkeyConfig{RPID: "other.com"}
	if _, err := c.passkeys.relyingParty("https://id.example.com", ""); err == nil || !strings.Contains(err.Error(), "AUTHD_WEBAUTHN_RP_ID") {
		t.Fatalf("foreign RP ID: %v", err)
	}
}

// otherWarnings counts the warnings in a JSON log other than the one an
// IP-address issuer always gets ("passkeys are off").
func otherWarnings(log string) int {
	return countLines(log, `"level":"WARN"`) - countLines(log, `"level":"WARN"`, "passkeys are off")
}
