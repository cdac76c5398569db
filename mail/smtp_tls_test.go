package mail

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/authd/authd/mail/mailtest"
)

func envelope(id string) Envelope {
	return Envelope{MessageID: id + "@example.test", From: "no-reply@example.test", To: "tls@example.test", Subject: "s", Body: "b"}
}

// AUTHD_SMTP_URL's three modes against a real server: smtp:// uses
// STARTTLS when offered and sends plain when not; ?starttls=required
// never sends without it; smtps:// is TLS from the first byte.
func TestSMTPTLSModes(t *testing.T) {
	serverTLS, clientTLS := mailtest.Certificate(t)
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		serverTLS bool
		implicit  bool
		mode      string
		wantTLS   bool
		wantSent  bool
	}{
		{"opportunistic, offered", true, false, "opportunistic", true, true},
		{"opportunistic, not offered", false, false, "opportunistic", false, true},
		{"required, offered", true, false, "required", true, true},
		{"required, not offered", false, false, "required", false, false},
		{"implicit", true, true, "implicit", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := serverTLS
			if !c.serverTLS {
				cfg = nil
			}
			srv := mailtest.StartTLS(t, cfg, c.implicit, nil)
			err := NewSMTP(SMTPConfig{Host: srv.Host, Port: srv.Port, TLS: c.mode, TLSConfig: clientTLS, Timeout: 5 * time.Second}).
				Send(ctx, envelope(c.name[:3]))
			got := srv.Received()
			if !c.wantSent {
				if err == nil || len(got) != 0 {
					t.Fatalf("sent without TLS: err %v, %d received", err, len(got))
				}
				if errors.Is(err, ErrPermanent) {
					t.Fatalf("a missing STARTTLS is given up at once: %v", err)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0].TLS != c.wantTLS {
				t.Fatalf("err %v, received %+v", err, got)
			}
		})
	}
}

// A server whose certificate the client does not trust gets nothing.
func TestSMTPUntrustedCertificate(t *testing.T) {
	serverTLS, _ := mailtest.Certificate(t)
	_, otherClient := mailtest.Certificate(t)
	srv := mailtest.StartTLS(t, serverTLS, true, nil)
	err := NewSMTP(SMTPConfig{Host: srv.Host, Port: srv.Port, TLS: "implicit", TLSConfig: otherClient, Timeout: 5 * time.Second}).
		Send(context.Background(), envelope("untrusted"))
	if err == nil || len(srv.Received()) != 0 {
		t.Fatalf("sent to an untrusted server: %v", err)
	}
}
