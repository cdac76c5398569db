package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Envelope is one rendered message, ready to send.
type Envelope struct {
	// MessageID is the stable Message-ID, without angle brackets.
	MessageID string
	From      string
	To        string
	Subject   string
	// Body is plain text.
	Body string
}

// Sender sends one rendered message. An error that wraps ErrPermanent is
// a refusal retrying cannot change (SMTP 5xx): the message is given up.
type Sender interface {
	Send(ctx context.Context, e Envelope) error
}

// ErrPermanent marks a permanent refusal.
var ErrPermanent = errors.New("mail: permanent refusal")

// SMTPConfig is an SMTP server as AUTHD_SMTP_URL names it.
type SMTPConfig struct {
	Host string
	Port int
	// TLS: "opportunistic" (smtp://: STARTTLS when the server offers it),
	// "required" (smtp://…?starttls=required), "implicit" (smtps://).
	TLS      string
	Username string
	Password string
	// TLSConfig overrides the TLS settings (tests: a test CA); nil
	// verifies the server's certificate against the system's roots.
	TLSConfig *tls.Config
	// Timeout bounds each step of a send (default 15s, below the job lease
	// so the heartbeat keeps it).
	Timeout time.Duration
}

// ParseSMTPURL parses AUTHD_SMTP_URL:
//
//	smtp://[user:password@]host[:port]                    plain, STARTTLS when offered (port 25)
//	smtp://[user:password@]host[:port]?starttls=required  STARTTLS or no send (port 587)
//	smtps://[user:password@]host[:port]                   implicit TLS (port 465)
func ParseSMTPURL(raw string) (SMTPConfig, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return SMTPConfig{}, errors.New("not a URL")
	}
	var c SMTPConfig
	switch u.Scheme {
	case "smtp":
		c.TLS, c.Port = "opportunistic", 25
	case "smtps":
		c.TLS, c.Port = "implicit", 465
	default:
		return SMTPConfig{}, fmt.Errorf("scheme must be smtp or smtps, got %q", u.Scheme)
	}
	if u.Hostname() == "" || u.Path != "" && u.Path != "/" || u.Fragment != "" || u.Opaque != "" {
		return SMTPConfig{}, errors.New("must be smtp[s]://[user:password@]host[:port] with no path")
	}
	c.Host = u.Hostname()
	q := u.Query()
	for k, v := range q {
		switch {
		case k == "starttls" && u.Scheme == "smtp" && len(v) == 1 && v[0] == "required":
			c.TLS, c.Port = "required", 587
		default:
			return SMTPConfig{}, fmt.Errorf("unknown parameter %q (only starttls=required, with smtp://)", k)
		}
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return SMTPConfig{}, fmt.Errorf("port %q is not 1-65535", p)
		}
		c.Port = n
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	return c, nil
}

// SMTP sends over SMTP with go-mail, one connection per message.
type SMTP struct{ cfg SMTPConfig }

// NewSMTP returns a Sender for cfg.
func NewSMTP(cfg SMTPConfig) *SMTP {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	return &SMTP{cfg: cfg}
}

func (s *SMTP) options() []gomail.Option {
	c := s.cfg
	opts := []gomail.Option{gomail.WithPort(c.Port), gomail.WithTimeout(c.Timeout)}
	switch c.TLS {
	case "implicit":
		opts = append(opts, gomail.WithSSL())
	case "required":
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if c.TLSConfig != nil {
		opts = append(opts, gomail.WithTLSConfig(c.TLSConfig))
	}
	if c.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(c.Username), gomail.WithPassword(c.Password))
	}
	return opts
}

// Send sends e. A 5xx answer is ErrPermanent. Once the server has
// accepted the message, a failure to close the connection is not an error
// (the message was delivered; a retry would send it twice).
func (s *SMTP) Send(ctx context.Context, e Envelope) error {
	m := gomail.NewMsg()
	if err := m.From(e.From); err != nil {
		return fmt.Errorf("%w: from: %w", ErrPermanent, err)
	}
	if err := m.To(e.To); err != nil {
		return fmt.Errorf("%w: to: %w", ErrPermanent, err)
	}
	m.Subject(e.Subject)
	m.SetMessageIDWithValue(e.MessageID)
	m.SetDate()
	m.SetBodyString(gomail.TypeTextPlain, e.Body)
	c, err := gomail.NewClient(s.cfg.Host, s.options()...)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	conn, err := c.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return fmt.Errorf("mail: connect to %s: %w", net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port)), err)
	}
	err = c.SendWithSMTPClient(conn, m)
	_ = c.CloseWithSMTPClient(conn)
	if err != nil {
		var se *gomail.SendError
		if errors.As(err, &se) && se.ErrorCode() >= 500 && se.ErrorCode() < 600 {
			return fmt.Errorf("%w: %w", ErrPermanent, err)
		}
		return fmt.Errorf("mail: send: %w", err)
	}
	return nil
}

// Domain returns the domain of the address from (AUTHD_MAIL_FROM), for
// Message-IDs, or an error if from is not one address.
func Domain(from string) (string, error) {
	a, err := mail.ParseAddress(from)
	if err != nil {
		return "", errors.New("not one address")
	}
	_, d, ok := cutLast(a.Address, "@")
	if !ok || d == "" {
		return "", errors.New("no domain")
	}
	return d, nil
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}
