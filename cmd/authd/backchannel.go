package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/backchannel"
	"github.com/authd/authd/storage"
)

// backchannelConfig holds the settings of back-channel logout delivery
// (package backchannel).
type backchannelConfig struct {
	Timeout     time.Duration // one POST (AUTHD_BACKCHANNEL_TIMEOUT)
	GiveUp      time.Duration // retry window (AUTHD_BACKCHANNEL_GIVE_UP)
	Concurrency int           // POSTs in flight per process (AUTHD_BACKCHANNEL_CONCURRENCY)
}

func (b *backchannelConfig) flags(fs *flag.FlagSet) {
	fs.DurationVar(&b.Timeout, "backchannel-timeout", 5*time.Second, "how long one back-channel logout POST may take before it is retried (AUTHD_BACKCHANNEL_TIMEOUT)")
	fs.DurationVar(&b.GiveUp, "backchannel-give-up", 24*time.Hour, "how long after a sign-out its back-channel logouts are retried before they are given up (AUTHD_BACKCHANNEL_GIVE_UP)")
	fs.IntVar(&b.Concurrency, "backchannel-concurrency", 16, "back-channel logout POSTs in flight in this process; 0 sends none here (another replica does) (AUTHD_BACKCHANNEL_CONCURRENCY)")
}

// validate checks the settings; errors name the setting.
func (b *backchannelConfig) validate() error {
	var errs problems
	if b.Timeout < 100*time.Millisecond || b.Timeout > time.Minute {
		errs.addf("AUTHD_BACKCHANNEL_TIMEOUT: must be between 100ms and 1m (got %s)", b.Timeout)
	}
	if b.GiveUp < time.Second || b.GiveUp > 30*24*time.Hour {
		errs.addf("AUTHD_BACKCHANNEL_GIVE_UP: must be between 1s and 720h (got %s)", b.GiveUp)
	}
	if b.Concurrency < 0 || b.Concurrency > 1024 {
		errs.addf("AUTHD_BACKCHANNEL_CONCURRENCY: must be between 0 and 1024 (got %d)", b.Concurrency)
	}
	return errs.err()
}

// startBackchannel starts this process's back-channel logout deliverer on
// store (PostgreSQL or memory), signing with signer, unless the
// concurrency is 0. Its metrics go to reg. stop cancels it and waits.
// Rows are leased for AUTHD_JOB_LEASE, as jobs are (at least twice the
// timeout).
func startBackchannel(ctx context.Context, b backchannelConfig, lease time.Duration, issuer string, store storage.LogoutStore, signer backchannel.Signer, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	if b.Concurrency == 0 {
		log.Info("back-channel logout delivery off in this process (AUTHD_BACKCHANNEL_CONCURRENCY=0)")
		return func() {}, nil
	}
	d, err := backchannel.New(backchannel.Config{Issuer: issuer, Store: store, Signer: signer, Timeout: b.Timeout,
		GiveUp: b.GiveUp, Concurrency: b.Concurrency, Lease: lease, Logger: log, Metrics: backchannel.NewMetrics(reg),
		AfterFinish: faultAfterDelivered()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	return func() { cancel(); <-done }, nil
}

const logoutDeliveriesUsage = `usage: authd logout-deliveries list [-status pending|failed|delivered] [-limit N] [flags]

Shows the back-channel logout deliveries in AUTHD_DATABASE_URL, newest
first, as JSON: one per (sign-out, app, session), with the app's client_id
and backchannel_logout_uri, its state, attempts and last error. A failed
delivery was given up after AUTHD_BACKCHANNEL_GIVE_UP.
`

// deliveryView is one delivery as "logout-deliveries list" prints it.
type deliveryView struct {
	ID         int64     `json:"id"`
	EventID    string    `json:"event_id"`
	ClientID   string    `json:"client_id"`
	URI        string    `json:"backchannel_logout_uri"`
	SID        string    `json:"sid"`
	JTI        string    `json:"jti"`
	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	NextTry    time.Time `json:"next_attempt_at,omitzero"`
	LastError  string    `json:"last_error,omitempty"`
	LockedBy   string    `json:"locked_by,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// cmdLogoutDeliveries runs "authd logout-deliveries list".
func cmdLogoutDeliveries(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var (
		c      config
		filter storage.LogoutFilter
		status string
	)
	fs := flag.NewFlagSet("logout-deliveries list", flag.ContinueOnError)
	c.flags(fs, false)
	fs.StringVar(&status, "status", "", "only deliveries in this state: pending, failed or delivered")
	fs.IntVar(&filter.Limit, "limit", 50, "at most this many deliveries, newest first")
	if len(args) == 0 || args[0] != "list" {
		if len(args) > 0 && (isHelp(args[0]) || args[0] == "help") {
			printUsage(fs, logoutDeliveriesUsage, stdout)
			return nil
		}
		if len(args) > 0 {
			return usagef("logout-deliveries: unknown command %q: only list (run \"authd help logout-deliveries\")", args[0])
		}
		return usagef("logout-deliveries: missing list (run \"authd help logout-deliveries\")")
	}
	envErr, err := envErrors(parseNoArgs(fs, logoutDeliveriesUsage, args[1:], getenv, stdout))
	if err != nil {
		return helpOK(err)
	}
	var errs problems
	errs.add(envErr)
	switch st := storage.LogoutStatus(status); st {
	case "", storage.LogoutPending, storage.LogoutFailed, storage.LogoutDelivered:
		filter.Status = st
	default:
		errs.addf("-status: %q is not one of pending, failed, delivered", status)
	}
	if filter.Limit < 1 || filter.Limit > 10000 {
		errs.addf("-limit: must be between 1 and 10000 (got %d)", filter.Limit)
	}
	if c.DatabaseURL == "" || c.DatabaseURL == "memory" {
		errs.addf("AUTHD_DATABASE_URL: logout-deliveries list needs a postgres:// URL (the memory store lives and dies with its process)")
	}
	if err := errs.err(); err != nil {
		return err
	}
	store, closeStore, err := openStore(ctx, c.DatabaseURL, true)
	if err != nil {
		return err
	}
	defer closeStore()
	list, err := store.ListLogoutDeliveries(ctx, filter)
	if err != nil {
		return err
	}
	out := make([]deliveryView, 0, len(list))
	for _, d := range list {
		v := deliveryView{ID: d.ID, EventID: d.EventID, ClientID: d.ClientID, URI: d.URI, SID: d.SID, JTI: d.JTI,
			Status: string(d.Status), Attempts: d.Attempts, LastError: d.LastError, LockedBy: d.LockedBy,
			CreatedAt: d.CreatedAt, FinishedAt: d.FinishedAt}
		if d.Status == storage.LogoutPending {
			v.NextTry = d.RunAt
		}
		out = append(out, v)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("logout-deliveries: %w", err)
	}
	return nil
}
