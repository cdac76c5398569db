// Package mailtest runs a real SMTP server (github.com/emersion/go-smtp) on
// loopback for tests, recording what it receives, with programmable
// answers: accept, refuse for now (4xx), refuse for good (5xx), or take the
// message and drop the connection before answering (SMTP's ambiguous
// middle).
package mailtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Action is the server's answer to one message's DATA.
type Action int

const (
	// Accept answers 250.
	Accept Action = iota
	// Refuse answers 451 (try again later).
	Refuse
	// Reject answers 550 (permanent).
	Reject
	// Drop reads the message, records it, and closes the connection
	// without answering.
	Drop
)

// Message is what the server received in one DATA.
type Message struct {
	MessageID string // the header's value, with angle brackets
	From, To  string // the envelope
	Subject   string
	Body      string // decoded
	Action    Action // what the server answered
	TLS       bool   // the message came over TLS (STARTTLS or implicit)
	Header    mail.Header
}

// Server is a running test SMTP server.
type Server struct {
	Addr string // host:port
	Host string
	Port int

	mu       sync.Mutex
	received []Message
	decide   func(n int, m Message) Action
	notify   chan struct{}
	srv      *smtp.Server
}

// Start starts a server on 127.0.0.1 and stops it when t ends. decide
// chooses the answer to the n-th message (0-based); nil accepts all.
func Start(t testing.TB, decide func(n int, m Message) Action) *Server {
	t.Helper()
	return StartTLS(t, nil, false, decide)
}

// StartTLS is Start with TLS: with cfg and !implicit the server offers
// STARTTLS; with implicit every connection is TLS from its first byte
// (smtps).
func StartTLS(t testing.TB, cfg *tls.Config, implicit bool, decide func(n int, m Message) Action) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if implicit {
		l = tls.NewListener(l, cfg)
	}
	s := &Server{Addr: l.Addr().String(), decide: decide, notify: make(chan struct{}, 1)}
	s.Host = "127.0.0.1"
	s.Port = l.Addr().(*net.TCPAddr).Port
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, c: c}, nil
	}))
	s.srv.Domain = "mailtest.localhost"
	s.srv.AllowInsecureAuth = true
	if !implicit {
		s.srv.TLSConfig = cfg // STARTTLS is offered when set
	}
	s.srv.ReadTimeout = 10 * time.Second
	s.srv.WriteTimeout = 10 * time.Second
	// Dropped and killed connections are what the tests do on purpose.
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() { _ = s.srv.Serve(l) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Received returns every message received so far, in order.
func (s *Server) Received() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.received...)
}

// Delivered returns the messages the server accepted.
func (s *Server) Delivered() []Message {
	var out []Message
	for _, m := range s.Received() {
		if m.Action == Accept {
			out = append(out, m)
		}
	}
	return out
}

// WaitDelivered waits (up to timeout) until an accepted message to to
// matches subject (a substring; "" any) and returns the latest such one.
func (s *Server) WaitDelivered(t testing.TB, to, subject string, timeout time.Duration) Message {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ms := s.Delivered()
		for i := len(ms) - 1; i >= 0; i-- {
			if strings.EqualFold(ms[i].To, to) && strings.Contains(ms[i].Subject, subject) {
				return ms[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailtest: no message to %s with subject %q within %v (received %d)", to, subject, timeout, len(s.Received()))
		}
		select {
		case <-s.notify:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var codeRE = regexp.MustCompile(`\b(\d{6})\b`)
var linkRE = regexp.MustCompile(`https?://\S+`)

// Code returns the first 6-digit code in m's body, or "".
func (m Message) Code() string {
	if s := codeRE.FindStringSubmatch(m.Body); s != nil {
		return s[1]
	}
	return ""
}

// Link returns the first URL in m's body, or "".
func (m Message) Link() string { return linkRE.FindString(m.Body) }

type session struct {
	s        *Server
	c        *smtp.Conn
	from, to string
}

func (x *session) Reset()        { x.from, x.to = "", "" }
func (x *session) Logout() error { return nil }
func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.from = from
	return nil
}
func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.to = to
	return nil
}

func (x *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := Message{From: x.from, To: x.to}
	_, m.TLS = x.c.TLSConnectionState()
	if pm, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
		m.Header = pm.Header
		m.MessageID = pm.Header.Get("Message-Id")
		dec := new(mime.WordDecoder)
		if subj, err := dec.DecodeHeader(pm.Header.Get("Subject")); err == nil {
			m.Subject = subj
		}
		var body io.Reader = pm.Body
		if strings.EqualFold(pm.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			body = quotedprintable.NewReader(body)
		}
		b, _ := io.ReadAll(body)
		m.Body = string(b)
	}
	s := x.s
	s.mu.Lock()
	n := len(s.received)
	m.Action = Accept
	if s.decide != nil {
		m.Action = s.decide(n, m)
	}
	s.received = append(s.received, m)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	switch m.Action {
	case Refuse:
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	case Reject:
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "refused"}
	case Drop:
		_ = x.c.Conn().Close()
		return errors.New("mailtest: dropped")
	}
	return nil
}

// Certificate returns a self-signed certificate for 127.0.0.1 and a
// client configuration that trusts only it.
func Certificate(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailtest"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}
