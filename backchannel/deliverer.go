package backchannel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/authd/authd/jobs"
	"github.com/authd/authd/storage"
)

// Config configures a Deliverer. Zero fields take the defaults named.
type Config struct {
	// Issuer is the logout tokens' iss; required.
	Issuer string
	// Store holds the deliveries; required.
	Store storage.LogoutStore
	// Signer signs with the ID token keys; required.
	Signer Signer
	// HTTPClient sends the POSTs; default one that follows no redirect.
	HTTPClient *http.Client
	// Timeout bounds one POST (AUTHD_BACKCHANNEL_TIMEOUT); default 5s.
	Timeout time.Duration
	// GiveUp is how long after the session ended a delivery is retried
	// (AUTHD_BACKCHANNEL_GIVE_UP); default 24h.
	GiveUp time.Duration
	// Concurrency is the number of POSTs in flight
	// (AUTHD_BACKCHANNEL_CONCURRENCY); default 16.
	Concurrency int
	// Lease is how long a claim holds a row without a heartbeat; default
	// 30s. Heartbeat renews it; default Lease/3.
	Lease, Heartbeat time.Duration
	// Poll is the wait when nothing is due; default 1s (±25%).
	Poll time.Duration
	// Backoff is the delay after a failed attempt; default
	// jobs.DefaultBackoff (1s, doubling, at most 5 minutes).
	Backoff func(attempt int) time.Duration
	// ID names this worker in locked_by; default host-pid-random.
	ID string
	// Logger; default slog.Default(). Audit receives the event of a
	// delivery given up; default an "audit" log line on Logger.
	Logger *slog.Logger
	Audit  func(ctx context.Context, d *storage.LogoutDelivery)
	// Metrics; default unregistered ones.
	Metrics *Metrics
	// Now is the clock; default time.Now.
	Now func() time.Time

	// AfterFinish, if set, observes each recorded outcome (tests, and the
	// fault-injection build of cmd/authd).
	AfterFinish func(d *storage.LogoutDelivery, status storage.LogoutStatus)
}

// Deliverer claims and POSTs logout deliveries. Run one per process; any
// number may share a store.
type Deliverer struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	inflight map[int64]*flight
	// cooling maps a client that just failed to the end of its back-off:
	// its other rows are not claimed meanwhile, so one failing app does
	// not take every slot.
	cooling map[string]time.Time
	slots   chan struct{}
}

type flight struct {
	lease  storage.LogoutLease
	cancel context.CancelCauseFunc
}

// New returns a Deliverer, or an error for a missing or negative setting.
func New(cfg Config) (*Deliverer, error) {
	if cfg.Issuer == "" || cfg.Store == nil || cfg.Signer == nil {
		return nil, errors.New("backchannel: Issuer, Store and Signer are required")
	}
	if cfg.Timeout < 0 || cfg.GiveUp < 0 || cfg.Lease < 0 || cfg.Heartbeat < 0 || cfg.Poll < 0 || cfg.Concurrency < 0 {
		return nil, errors.New("backchannel: negative setting")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.GiveUp == 0 {
		cfg.GiveUp = 24 * time.Hour
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 16
	}
	if cfg.Lease == 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Lease <= cfg.Timeout {
		cfg.Lease = 2*cfg.Timeout + time.Second
	}
	if cfg.Heartbeat == 0 || cfg.Heartbeat >= cfg.Lease {
		cfg.Heartbeat = cfg.Lease / 3
	}
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
	}
	if cfg.Backoff == nil {
		cfg.Backoff = jobs.DefaultBackoff
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{
			// A redirect is an answer, not a delivery: it is retried.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	d := &Deliverer{cfg: cfg, log: cfg.Logger.With("worker", cfg.ID), inflight: map[int64]*flight{},
		cooling: map[string]time.Time{}, slots: make(chan struct{}, cfg.Concurrency)}
	if cfg.Audit == nil {
		d.cfg.Audit = func(ctx context.Context, x *storage.LogoutDelivery) {
			d.log.LogAttrs(ctx, slog.LevelWarn, "audit", slog.String("event", "backchannel_logout_given_up"),
				slog.String("client_id", x.ClientID), slog.String("event_id", x.EventID), slog.String("jti", x.JTI),
				slog.Int("attempts", x.Attempts), slog.String("last_error", x.LastError))
		}
	}
	return d, nil
}

// Run claims and delivers due rows until ctx ends, then cancels the POSTs
// in flight (their rows are sent again, same jti, once their leases expire)
// and returns.
func (d *Deliverer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	hctx, stop := context.WithCancel(ctx)
	wg.Add(1)
	go func() { defer wg.Done(); d.heartbeat(hctx) }()
	defer func() { stop(); wg.Wait() }()
	var counted time.Time
	for ctx.Err() == nil {
		if time.Since(counted) >= 5*time.Second {
			if n, err := d.cfg.Store.CountPendingLogoutDeliveries(ctx); err == nil {
				d.cfg.Metrics.pending.Set(float64(n))
			}
			counted = time.Now()
		}
		n, err := d.claim(ctx, &wg)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("backchannel: claim failed; retrying", "err", err)
		}
		if n > 0 {
			continue
		}
		t := time.NewTimer(time.Duration(float64(d.cfg.Poll) * (0.75 + 0.5*mrand.Float64())))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// RunDue delivers every due row, waiting for each POST, until none is due,
// and returns how many attempts it made (tests, benchmarks).
func (d *Deliverer) RunDue(ctx context.Context) (int, error) {
	hctx, stop := context.WithCancel(ctx)
	beat := make(chan struct{})
	go func() { defer close(beat); d.heartbeat(hctx) }()
	defer func() { stop(); <-beat }()
	total := 0
	for {
		var wg sync.WaitGroup
		n, err := d.claim(ctx, &wg)
		wg.Wait()
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// claim waits for a free slot, claims as many rows as there are free slots
// and starts a delivery for each; it returns how many it started.
func (d *Deliverer) claim(ctx context.Context, wg *sync.WaitGroup) (int, error) {
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, nil
	}
	free := 1
more:
	for free < d.cfg.Concurrency {
		select {
		case d.slots <- struct{}{}:
			free++
		default:
			break more
		}
	}
	rows, err := d.cfg.Store.ClaimLogoutDeliveries(ctx, d.cfg.ID, free, d.cfg.Lease, d.coolingClients())
	for range free - len(rows) {
		<-d.slots
	}
	if err != nil {
		return 0, err
	}
	for _, row := range rows {
		fctx, cancel := context.WithCancelCause(ctx)
		d.mu.Lock()
		d.inflight[row.ID] = &flight{lease: row.Lease(), cancel: cancel}
		d.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-d.slots }()
			defer func() {
				d.mu.Lock()
				delete(d.inflight, row.ID)
				d.mu.Unlock()
				cancel(nil)
			}()
			d.deliver(fctx, row)
		}()
	}
	return len(rows), nil
}

// coolingClients returns the clients in back-off, forgetting those past it.
func (d *Deliverer) coolingClients() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	var out []string
	for c, until := range d.cooling {
		if now.After(until) {
			delete(d.cooling, c)
			continue
		}
		out = append(out, c)
	}
	return out
}

// heartbeat renews the leases in flight every Heartbeat and cancels the
// deliveries whose lease was lost (lost lease = stop: their outcome is not
// written).
func (d *Deliverer) heartbeat(ctx context.Context) {
	t := time.NewTicker(d.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		ls := make([]storage.LogoutLease, 0, len(d.inflight))
		for _, f := range d.inflight {
			ls = append(ls, f.lease)
		}
		d.mu.Unlock()
		lost, err := d.cfg.Store.ExtendLogoutLeases(ctx, ls, d.cfg.Lease)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("backchannel: heartbeat failed; retrying", "err", err)
			}
			continue
		}
		d.mu.Lock()
		for _, id := range lost {
			if f := d.inflight[id]; f != nil {
				f.cancel(storage.ErrLeaseLost)
			}
		}
		d.mu.Unlock()
	}
}

// deliver makes one attempt at row and records its outcome.
func (d *Deliverer) deliver(ctx context.Context, row *storage.LogoutDelivery) {
	now := d.cfg.Now()
	status, errMsg, retryIn := storage.LogoutDelivered, "", time.Duration(0)
	if now.Sub(row.CreatedAt) > d.cfg.GiveUp {
		status, errMsg = storage.LogoutFailed, fmt.Sprintf("given up: not delivered within %v", d.cfg.GiveUp)
	} else if row.URI == "" {
		status, errMsg = storage.LogoutFailed, "given up: the client no longer has a backchannel_logout_uri"
	} else if err := d.post(ctx, row, now); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, storage.ErrLeaseLost) {
			d.cfg.Metrics.leasesLost.Inc()
			d.log.Warn("backchannel: lease lost; stopped, nothing written", "delivery", row.ID)
			return
		}
		if ctx.Err() != nil {
			return // stopping: the row is sent again once its lease expires
		}
		errMsg, retryIn = errorText(err), d.cfg.Backoff(row.Attempts)
		status = storage.LogoutPending
		if now.Add(retryIn).Sub(row.CreatedAt) > d.cfg.GiveUp {
			status = storage.LogoutFailed
		}
		d.mu.Lock()
		d.cooling[row.ClientID] = time.Now().Add(retryIn)
		d.mu.Unlock()
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Lease)
	defer cancel()
	err := d.cfg.Store.FinishLogoutDelivery(fctx, row.Lease(), status, errMsg, retryIn)
	if errors.Is(err, storage.ErrLeaseLost) {
		d.cfg.Metrics.leasesLost.Inc()
		d.log.Warn("backchannel: lease lost before the outcome was written; another worker sends it again", "delivery", row.ID)
		return
	}
	if err != nil {
		d.log.Error("backchannel: recording the outcome failed; sent again after the lease expires", "delivery", row.ID, "err", err)
		return
	}
	switch status {
	case storage.LogoutDelivered:
		d.cfg.Metrics.deliveries.WithLabelValues(resultDelivered).Inc()
	case storage.LogoutPending:
		d.cfg.Metrics.deliveries.WithLabelValues(resultRetry).Inc()
		d.log.Info("backchannel: delivery failed; retrying", "delivery", row.ID, "client_id", row.ClientID,
			"attempt", row.Attempts, "retry_in", retryIn, "err", errMsg)
	case storage.LogoutFailed:
		d.cfg.Metrics.deliveries.WithLabelValues(resultGivenUp).Inc()
		row.LastError = errMsg
		d.cfg.Audit(ctx, row)
	}
	if d.cfg.AfterFinish != nil {
		d.cfg.AfterFinish(row, status)
	}
}

// post signs a fresh logout token for row (same jti, new iat and exp) and
// POSTs it (§2.5): any 2xx is delivered.
func (d *Deliverer) post(ctx context.Context, row *storage.LogoutDelivery, now time.Time) error {
	if err := d.cfg.Signer.Prepare(ctx); err != nil {
		return fmt.Errorf("load signing keys: %w", err)
	}
	tok, err := Token(ctx, d.cfg.Signer, d.cfg.Issuer, row, now)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodPost, row.URI,
		strings.NewReader(url.Values{"logout_token": {tok}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	start := time.Now()
	resp, err := d.cfg.HTTPClient.Do(req)
	d.cfg.Metrics.seconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s answered %d", row.URI, resp.StatusCode)
	}
	return nil
}

// errorText bounds what an error stores in last_error.
func errorText(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
