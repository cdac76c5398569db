package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/accounts"
	"github.com/authd/authd/accountweb"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/jobs"
	"github.com/authd/authd/limits"
	"github.com/authd/authd/mail"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/password"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/web/templates"
)

// accountsConfig holds the self-service settings (issue 26): sign-up,
// password recovery, and the mail they send.
type accountsConfig struct {
	Signup           string // on, off
	PasswordRecovery string // on, off, "" (on when mail can be sent)
	SMTPURL          string // never logged: it may carry a password
	MailFrom         string
	MailGiveUp       time.Duration

	// dev: mail goes to the log (mail.LogSender) instead of SMTP.
	dev bool
}

func (a *accountsConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&a.Signup, "signup", "off", `"on": people can create their own account from the login page ("Create account"; needs mail); "off" (AUTHD_SIGNUP)`)
	fs.StringVar(&a.PasswordRecovery, "password-recovery", "", `"on" or "off": "Forgot password?" on the login page; default on when mail can be sent (AUTHD_PASSWORD_RECOVERY)`)
	fs.StringVar(&a.SMTPURL, "smtp-url", "", "mail server: smtp://[user:pass@]host[:port] (STARTTLS when offered), smtp://…?starttls=required, or smtps://… (implicit TLS) (AUTHD_SMTP_URL)")
	fs.StringVar(&a.MailFrom, "mail-from", "", `From address of authd's mail, e.g. "Example <no-reply@example.com>" (AUTHD_MAIL_FROM)`)
	fs.DurationVar(&a.MailGiveUp, "mail-give-up", mail.DefaultGiveUp, "how long a message is retried before it is given up (AUTHD_MAIL_GIVE_UP)")
}

// mailOn reports whether mail can be sent: SMTP, or dev's log.
func (a *accountsConfig) mailOn() bool { return a.SMTPURL != "" || a.dev }

// recoveryOn is AUTHD_PASSWORD_RECOVERY with its default.
func (a *accountsConfig) recoveryOn() bool {
	if a.PasswordRecovery == "" {
		return a.mailOn()
	}
	return a.PasswordRecovery == "on"
}

// from is the From address, with dev's default.
func (a *accountsConfig) from() string {
	if a.MailFrom == "" && a.dev {
		return "authd dev <no-reply@localhost>"
	}
	return a.MailFrom
}

// validate checks the settings; errors name the variable and never echo
// AUTHD_SMTP_URL (it may carry a password).
func (a *accountsConfig) validate(databaseURL string) error {
	var errs problems
	if a.Signup != "on" && a.Signup != "off" {
		errs.addf("AUTHD_SIGNUP: must be on or off (got %q)", a.Signup)
	}
	if a.PasswordRecovery != "" && a.PasswordRecovery != "on" && a.PasswordRecovery != "off" {
		errs.addf("AUTHD_PASSWORD_RECOVERY: must be on or off (got %q)", a.PasswordRecovery)
	}
	if a.SMTPURL != "" {
		if _, err := mail.ParseSMTPURL(a.SMTPURL); err != nil {
			errs.addf("AUTHD_SMTP_URL: %v", err)
		}
		if a.MailFrom == "" {
			errs.addf("AUTHD_MAIL_FROM: required with AUTHD_SMTP_URL, e.g. \"Example <no-reply@example.com>\"")
		}
	}
	if a.MailFrom != "" {
		if _, err := mail.Domain(a.MailFrom); err != nil {
			errs.addf("AUTHD_MAIL_FROM: %q is not one address with a domain (%v)", a.MailFrom, err)
		}
	}
	if !a.mailOn() {
		if a.Signup == "on" {
			errs.addf("AUTHD_SIGNUP: on needs AUTHD_SMTP_URL and AUTHD_MAIL_FROM (a sign-up is verified by a code sent by mail)")
		}
		if a.PasswordRecovery == "on" {
			errs.addf("AUTHD_PASSWORD_RECOVERY: on needs AUTHD_SMTP_URL and AUTHD_MAIL_FROM (recovery sends a code by mail)")
		}
	}
	if a.MailGiveUp < time.Minute {
		errs.addf("AUTHD_MAIL_GIVE_UP: must be at least 1m (got %s)", a.MailGiveUp)
	}
	if a.mailOn() && dbKind(databaseURL) != "postgres" && !a.dev {
		errs.addf("AUTHD_SMTP_URL: self-service accounts and mail need PostgreSQL (AUTHD_DATABASE_URL), not %q", databaseURL)
	}
	return errs.err()
}

// mailStore is what the outbox needs of the backend.
type mailStore interface {
	mail.Store
	storage.AccountFlowStore
}

// memoryMail is the in-memory store ("authd dev") with its job queue.
type memoryMail struct {
	*memory.Store
	*memory.JobQueue
}

// mailBackend is the backend as the outbox sees it.
func mailBackend(backend storage.Store) (mailStore, error) {
	switch s := backend.(type) {
	case mailStore:
		return s, nil
	case *memory.Store:
		return memoryMail{Store: s, JobQueue: s.JobQueue()}, nil
	}
	return nil, usagef("AUTHD_SMTP_URL: the %T store keeps no mail outbox; use PostgreSQL", backend)
}

// outbox builds the outbox on the backend.
func (a *accountsConfig) outbox(secret []byte, backend storage.Store) (*mail.Outbox, mailStore, error) {
	ms, err := mailBackend(backend)
	if err != nil {
		return nil, nil, err
	}
	domain, err := mail.Domain(a.from())
	if err != nil {
		return nil, nil, usagef("AUTHD_MAIL_FROM: %v", err)
	}
	o, err := mail.NewOutbox(ms, mail.OutboxConfig{Secret: secret, Domain: domain, GiveUp: a.MailGiveUp})
	return o, ms, err
}

// accountStore is the accounts service's store: users and transactions
// through revocation.Store (so a revocation also drops replay cache
// entries), the flows from the backend.
type accountStore struct {
	revocation.Store
	storage.AccountFlowStore
}

// mountAccounts builds the accounts service and its pages and mounts them
// on srv. Deletion serves existing users always (issue 26, App Store
// Guideline 5.1.1(v)); the steps that prove an address by mail (sign-up,
// recovery, email change) only when mail can be sent.
func mountAccounts(c config, backend storage.Store, revoking revocation.Store, people *identity.Service,
	passwords *password.Hasher, budgets *limits.Limiter, srv *oauth.Server, log *slog.Logger) error {
	a := c.accounts
	var outbox accounts.Outbox // nil without mail (a nil *mail.Outbox would not be)
	flows, ok := backend.(storage.AccountFlowStore)
	if a.mailOn() {
		o, ms, err := a.outbox([]byte(c.Secret), backend)
		if err != nil {
			return err
		}
		outbox, flows, ok = o, ms, true
	}
	if !ok {
		log.Warn("self-service account pages off: the store keeps no account flows", "store", fmt.Sprintf("%T", backend))
		return nil
	}
	svc, err := accounts.New(accounts.Config{Secret: []byte(c.Secret), Store: accountStore{Store: revoking, AccountFlowStore: flows},
		Outbox: outbox, People: people, Passwords: passwords, LinkBase: c.Issuer,
		Signup: a.Signup == "on", Recovery: a.recoveryOn(),
		Limits: accounts.NewLimits(accounts.LimitConfig{Limiter: budgets, Registerer: srv.Registry()}), Logger: log})
	if err != nil {
		return err
	}
	pages, err := accountweb.New(accountweb.Config{Accounts: svc, Session: srv.SessionUser, SignIn: srv.SignIn, Flow: srv.AccountFlow(),
		ClientName: func(ctx context.Context, id string) string { return clientDisplayName(ctx, backend, id) },
		Secret:     []byte(c.Secret), Secure: strings.HasPrefix(c.Issuer, "https://"), Pages: templates.Parse(), Logger: log})
	if err != nil {
		return err
	}
	srv.MountAccounts(pages)
	return nil
}

// clientDisplayName is a client's name for pages and mail, or "".
func clientDisplayName(ctx context.Context, s storage.Store, id string) string {
	fc, err := s.GetClient(ctx, id)
	if err != nil {
		return ""
	}
	if c, ok := fc.(*storage.Client); ok {
		return c.Name
	}
	return ""
}

// startMail runs the mail worker (the outbox's deliveries) when mail can
// be sent: every process that serves does, whatever AUTHD_JANITOR says,
// so mail never waits for a janitor. stop cancels it and waits.
func startMail(ctx context.Context, c config, backend storage.Store, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	a := c.accounts
	if !a.mailOn() {
		return func() {}, nil
	}
	outbox, ms, err := a.outbox([]byte(c.Secret), backend)
	if err != nil {
		return nil, err
	}
	var sender mail.Sender = mail.LogSender{Log: log}
	if a.SMTPURL != "" {
		sc, err := mail.ParseSMTPURL(a.SMTPURL)
		if err != nil {
			return nil, usagef("AUTHD_SMTP_URL: %v", err)
		}
		sender = mail.NewSMTP(sc)
	}
	d, err := mail.NewDeliverer(outbox, mail.DelivererConfig{From: a.from(), Sender: sender, Logger: log, Metrics: mail.NewMetrics(reg),
		BeforeSend: faultBeforeMailSend()})
	if err != nil {
		return nil, err
	}
	w, err := jobs.NewWorker(ms, jobs.Config{Lease: c.jobs.Lease, Poll: time.Second, Backoff: mail.Backoff, Logger: log}, d.Kind())
	if err != nil {
		return nil, err
	}
	log.Info("mail worker started", "worker", w.ID(), "signup", a.Signup, "password_recovery", a.recoveryOn())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	return func() { cancel(); <-done }, nil
}
