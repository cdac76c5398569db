package mail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/jobs"
	"github.com/authd/authd/storage"
)

// Backoff is the delay before a mail job's next attempt after attempt
// failed: 10 s, 30 s, 1, 2, 5, 10, 20 min, then every 30 min until the
// row's give-up time. Use it as the jobs.Config.Backoff of the worker that
// runs Deliverer.Kind.
func Backoff(attempt int) time.Duration {
	steps := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
		5 * time.Minute, 10 * time.Minute, 20 * time.Minute}
	if attempt >= 1 && attempt <= len(steps) {
		return steps[attempt-1]
	}
	if attempt < 1 {
		return steps[0]
	}
	return 30 * time.Minute
}

// Metrics counts deliveries.
type Metrics struct {
	sent     *prometheus.CounterVec // template
	failed   *prometheus.CounterVec // template: attempts that will be retried
	givenUp  *prometheus.CounterVec // template, reason: expired, refused
	duration prometheus.Histogram
}

// NewMetrics creates the metrics and registers them on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "authd_mail_sent_total",
			Help: "Outbox messages delivered, by template."}, []string{"template"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "authd_mail_attempts_failed_total",
			Help: "Failed delivery attempts that will be retried, by template."}, []string{"template"}),
		givenUp: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "authd_mail_given_up_total",
			Help: "Outbox messages given up, by template and reason: expired (AUTHD_MAIL_GIVE_UP passed) or refused (a permanent SMTP refusal)."},
			[]string{"template", "reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "authd_mail_send_seconds",
			Help: "Duration of one delivery attempt.", Buckets: prometheus.DefBuckets}),
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.failed, m.givenUp, m.duration)
	}
	return m
}

// Deliverer delivers outbox rows; its Kind is run by a jobs.Worker.
type Deliverer struct {
	outbox  *Outbox
	sender  Sender
	from    string
	log     *slog.Logger
	metrics *Metrics
	// beforeSend, if set, runs before each send (tests: a worker killed
	// between the claim and the send).
	beforeSend func(ctx context.Context, row *storage.Mail)
}

// DelivererConfig configures a Deliverer.
type DelivererConfig struct {
	// From is the From address (AUTHD_MAIL_FROM).
	From   string
	Sender Sender
	// Logger receives the audit events of given-up messages; default
	// slog.Default(). It never receives a message's data.
	Logger  *slog.Logger
	Metrics *Metrics
	// BeforeSend, if set, runs before each send: fault injection for crash
	// tests (cmd/authd's AUTHD_FAULT=kill-before-mail-send), never set in
	// a real build.
	BeforeSend func()
}

// NewDeliverer returns the deliverer of o's rows.
func NewDeliverer(o *Outbox, cfg DelivererConfig) (*Deliverer, error) {
	if cfg.Sender == nil || cfg.From == "" {
		return nil, errors.New("mail: a sender and a From address are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	d := &Deliverer{outbox: o, sender: cfg.Sender, from: cfg.From, log: cfg.Logger, metrics: cfg.Metrics}
	if f := cfg.BeforeSend; f != nil {
		d.beforeSend = func(context.Context, *storage.Mail) { f() }
	}
	return d, nil
}

// Kind is the job kind that delivers one row.
func (d *Deliverer) Kind() jobs.Kind {
	return jobs.Kind{Name: JobKind, Handler: d.deliver, MaxAttempts: maxJobAttempts}
}

// deliver is one attempt at one row. It is safe to repeat: a row that is
// no longer pending is done; marking it sent is a conditional write fenced
// by the job's lease, in the transaction that completes the job.
func (d *Deliverer) deliver(ctx context.Context, j *jobs.Job) error {
	var p jobPayload
	if err := json.Unmarshal(j.Payload, &p); err != nil || p.ID <= 0 {
		return nil // not ours to retry: a malformed payload never becomes valid
	}
	store := d.outbox.store
	row, err := store.GetMail(ctx, p.ID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if row.Status != storage.MailPending {
		return nil
	}
	if d.outbox.now().After(row.GiveUpAt) {
		return d.giveUp(ctx, j, row, "expired", row.LastError)
	}
	data, err := d.outbox.open(row)
	if err != nil {
		// Sealed under another AUTHD_SECRET: it never opens.
		return d.giveUp(ctx, j, row, "refused", "sealed data does not open (AUTHD_SECRET changed?)")
	}
	subject, body, err := render(row.Template, row.Recipient, data)
	if err != nil {
		return d.giveUp(ctx, j, row, "refused", err.Error())
	}
	if d.beforeSend != nil {
		d.beforeSend(ctx, row)
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	start := time.Now()
	err = d.sender.Send(ctx, Envelope{MessageID: row.MessageID, From: d.from, To: row.Recipient, Subject: subject, Body: body})
	d.metrics.duration.Observe(time.Since(start).Seconds())
	if errors.Is(err, ErrPermanent) {
		return d.giveUp(ctx, j, row, "refused", err.Error())
	}
	if err != nil {
		d.metrics.failed.WithLabelValues(row.Template).Inc()
		// Bookkeeping for jobs list and the give-up event; the job's own
		// retry is what matters, so a failure here is not the attempt's.
		_ = store.RecordMailAttempt(context.WithoutCancel(ctx), row.ID, errText(err))
		return err
	}
	err = j.Commit(ctx, func(tx context.Context) error {
		_, err := store.FinishMail(tx, row.ID, storage.MailSent, "")
		return err
	})
	if err != nil {
		// Sent, not recorded (lease lost, database gone): the next attempt
		// sends it again under the same Message-ID.
		return fmt.Errorf("mail: sent %d but not recorded: %w", row.ID, err)
	}
	d.metrics.sent.WithLabelValues(row.Template).Inc()
	return nil
}

// giveUp finishes row as given up, with the job, and reports it.
func (d *Deliverer) giveUp(ctx context.Context, j *jobs.Job, row *storage.Mail, reason, detail string) error {
	var finished bool
	err := j.Commit(ctx, func(tx context.Context) error {
		var err error
		finished, err = d.outbox.store.FinishMail(tx, row.ID, storage.MailGivenUp, errText(errors.New(detail)))
		return err
	})
	if err != nil {
		return err
	}
	if finished {
		d.metrics.givenUp.WithLabelValues(row.Template, reason).Inc()
		d.log.WarnContext(ctx, "audit", "event", "mail.given_up", "outbox_id", row.ID, "message_id", row.MessageID,
			"template", row.Template, "reason", reason, "attempts", row.Attempts+1, "last_error", detail)
	}
	return nil
}

// errText bounds an error stored in the outbox.
func errText(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// LogSender "sends" by writing the message to a log: "authd dev", which
// has no SMTP server. It logs the code and link, so it is for development
// only.
type LogSender struct{ Log *slog.Logger }

// Send logs e.
func (l LogSender) Send(ctx context.Context, e Envelope) error {
	l.Log.InfoContext(ctx, "mail (authd dev prints mail instead of sending it)", "message_id", e.MessageID,
		"from", e.From, "to", e.To, "subject", e.Subject, "body", e.Body)
	return nil
}
