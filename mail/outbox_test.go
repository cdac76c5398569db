package mail

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authd/authd/jobs"
	"github.com/authd/authd/mail/mailtest"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef-mail-tests")

type harness struct {
	store   *postgres.Store
	pool    *pgxpool.Pool
	outbox  *Outbox
	smtp    *mailtest.Server
	metrics *Metrics
	logs    *syncBuffer
	log     *slog.Logger
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHarness(t testing.TB, giveUp time.Duration, decide func(n int, m mailtest.Message) mailtest.Action) *harness {
	t.Helper()
	pool := pgtest.New(t)
	h := &harness{store: postgres.New(pool), pool: pool, smtp: mailtest.Start(t, decide), logs: &syncBuffer{}}
	h.log = slog.New(slog.NewTextHandler(h.logs, nil))
	h.metrics = NewMetrics(prometheus.NewRegistry())
	o, err := NewOutbox(h.store, OutboxConfig{Secret: testSecret, Domain: "example.test", GiveUp: giveUp})
	if err != nil {
		t.Fatal(err)
	}
	h.outbox = o
	return h
}

// worker returns a mail worker on its own deliverer; lease and a fast
// backoff keep tests short.
func (h *harness) worker(t testing.TB, id string, lease time.Duration) (*jobs.Worker, *Deliverer) {
	t.Helper()
	d, err := NewDeliverer(h.outbox, DelivererConfig{From: "authd <no-reply@example.test>",
		Sender: NewSMTP(SMTPConfig{Host: h.smtp.Host, Port: h.smtp.Port, TLS: "opportunistic", Timeout: 5 * time.Second}),
		Logger: h.log, Metrics: h.metrics})
	if err != nil {
		t.Fatal(err)
	}
	w, err := jobs.NewWorker(h.store, jobs.Config{ID: id, Lease: lease, Poll: 50 * time.Millisecond, Logger: h.log,
		Backoff: func(int) time.Duration { return 100 * time.Millisecond }}, d.Kind())
	if err != nil {
		t.Fatal(err)
	}
	return w, d
}

func run(t testing.TB, w *jobs.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	return func() { cancel(); <-done }
}

func (h *harness) send(t testing.TB, to, code string) *storage.Mail {
	t.Helper()
	id, err := h.outbox.Send(context.Background(), Message{To: to, Template: TemplateSignupCode,
		Data: Data{App: "Example", Code: code, Link: "https://login.example.test/signup/verify?t=x"}})
	if err != nil {
		t.Fatal(err)
	}
	row, err := h.store.GetMail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// waitStatus waits until the row leaves pending, and returns it.
func (h *harness) waitStatus(t *testing.T, id int64, want storage.MailStatus, timeout time.Duration) *storage.Mail {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		row, err := h.store.GetMail(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if row.Status == want {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("row %d is %s after %v, want %s (last error %q)", id, row.Status, timeout, want, row.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDeliveredOnceAndErased(t *testing.T) {
	h := newHarness(t, 0, nil)
	row := h.send(t, "ann@example.test", "123456")
	if bytes.Contains(row.Sealed, []byte("123456")) || len(row.Sealed) == 0 {
		t.Fatal("the code is not sealed at rest")
	}
	w, _ := h.worker(t, "w1", 5*time.Second)
	stop := run(t, w)
	defer stop()
	sent := h.waitStatus(t, row.ID, storage.MailSent, 10*time.Second)
	if sent.Sealed != nil {
		t.Fatal("sealed data not erased after delivery")
	}
	got := h.smtp.Delivered()
	if len(got) != 1 {
		t.Fatalf("delivered %d messages, want 1", len(got))
	}
	m := got[0]
	if m.MessageID != "<"+row.MessageID+">" || m.To != "ann@example.test" || m.Code() != "123456" ||
		!strings.Contains(m.Body, "Example") || !strings.Contains(m.Body, "ann@example.test") {
		t.Fatalf("message: id %q to %q body %q", m.MessageID, m.To, m.Body)
	}
	if n := testutil.ToFloat64(h.metrics.sent.WithLabelValues(TemplateSignupCode)); n != 1 {
		t.Fatalf("sent metric %v", n)
	}
	if strings.Contains(h.logs.String(), "123456") {
		t.Fatal("the code was logged")
	}
}

// The server takes the message and drops the connection before its
// answer, twice: every attempt carries the one Message-ID of the row.
func TestAmbiguousDropKeepsMessageID(t *testing.T) {
	h := newHarness(t, 0, func(n int, _ mailtest.Message) mailtest.Action {
		if n < 2 {
			return mailtest.Drop
		}
		return mailtest.Accept
	})
	row := h.send(t, "bob@example.test", "222222")
	w, _ := h.worker(t, "w1", 5*time.Second)
	stop := run(t, w)
	defer stop()
	h.waitStatus(t, row.ID, storage.MailSent, 15*time.Second)
	got := h.smtp.Received()
	if len(got) != 3 {
		t.Fatalf("server saw %d attempts, want 3", len(got))
	}
	ids := map[string]bool{}
	for _, m := range got {
		ids[m.MessageID] = true
	}
	if len(ids) != 1 || !ids["<"+row.MessageID+">"] {
		t.Fatalf("Message-IDs seen: %v, want only <%s>", ids, row.MessageID)
	}
}

// 451 twice, then 250: delivered once.
func TestRefusedTwiceThenDeliveredOnce(t *testing.T) {
	h := newHarness(t, 0, func(n int, _ mailtest.Message) mailtest.Action {
		if n < 2 {
			return mailtest.Refuse
		}
		return mailtest.Accept
	})
	row := h.send(t, "cy@example.test", "333333")
	w, _ := h.worker(t, "w1", 5*time.Second)
	stop := run(t, w)
	h.waitStatus(t, row.ID, storage.MailSent, 15*time.Second)
	time.Sleep(300 * time.Millisecond) // a further (wrong) attempt would show now
	stop()
	if n := len(h.smtp.Delivered()); n != 1 {
		t.Fatalf("delivered %d times, want 1", n)
	}
	if n := len(h.smtp.Received()); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	if n := testutil.ToFloat64(h.metrics.failed.WithLabelValues(TemplateSignupCode)); n != 2 {
		t.Fatalf("failed attempts metric %v, want 2", n)
	}
}

// A worker that claims the row and dies before sending (its process
// stops: no outcome recorded, no heartbeat) leaves the row to another
// worker, which delivers it once its lease expires.
func TestWorkerKilledBeforeSendIsTakenOver(t *testing.T) {
	h := newHarness(t, 0, nil)
	row := h.send(t, "dee@example.test", "444444")
	w1, d1 := h.worker(t, "doomed", time.Second)
	claimed := make(chan struct{})
	d1.beforeSend = func(ctx context.Context, _ *storage.Mail) {
		close(claimed)
		<-ctx.Done() // the process "dies" here: nothing after the claim happens
	}
	stop1 := run(t, w1)
	select {
	case <-claimed:
	case <-time.After(10 * time.Second):
		t.Fatal("the first worker never claimed the row")
	}
	stop1() // killed between the claim and the send
	w2, _ := h.worker(t, "survivor", 5*time.Second)
	stop2 := run(t, w2)
	defer stop2()
	h.waitStatus(t, row.ID, storage.MailSent, 15*time.Second)
	if n := len(h.smtp.Delivered()); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
}

// A worker whose lease is taken over mid-send (expired while it was
// stalled) stops without sending or committing; the message is delivered
// by the new holder with the same Message-ID.
func TestLostLeaseStopsTheWorker(t *testing.T) {
	h := newHarness(t, 0, nil)
	row := h.send(t, "eve@example.test", "555555")
	w1, d1 := h.worker(t, "stalled", 3*time.Second)
	claimed := make(chan struct{})
	stopped := make(chan error, 1)
	d1.beforeSend = func(ctx context.Context, _ *storage.Mail) {
		close(claimed)
		<-ctx.Done() // the heartbeat finds the lease gone and cancels
		stopped <- context.Cause(ctx)
	}
	stop1 := run(t, w1)
	defer stop1()
	select {
	case <-claimed:
	case <-time.After(10 * time.Second):
		t.Fatal("never claimed")
	}
	// The lease expires under the stalled worker.
	if _, err := h.pool.Exec(context.Background(), `update jobs set lease_until = now() - interval '1 second' where kind = 'mail'`); err != nil {
		t.Fatal(err)
	}
	w2, _ := h.worker(t, "taker", 5*time.Second)
	stop2 := run(t, w2)
	defer stop2()
	h.waitStatus(t, row.ID, storage.MailSent, 15*time.Second)
	select {
	case cause := <-stopped:
		if !errors.Is(cause, storage.ErrLeaseLost) {
			t.Fatalf("the stalled worker stopped for %v", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled worker never stopped")
	}
	if n := len(h.smtp.Received()); n != 1 {
		t.Fatalf("%d sends, want 1 (the stalled worker must not send)", n)
	}
}

// N workers race over many rows: each row is delivered exactly once.
func TestWorkersRaceDeliverEachOnce(t *testing.T) {
	h := newHarness(t, 0, nil)
	const rows = 24
	want := map[string]bool{}
	for i := range rows {
		r := h.send(t, "race@example.test", "6666"+string(rune('0'+i/10))+string(rune('0'+i%10)))
		want["<"+r.MessageID+">"] = true
	}
	var stops []func()
	for i := range 4 {
		w, _ := h.worker(t, "racer-"+string(rune('a'+i)), 5*time.Second)
		stops = append(stops, run(t, w))
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(h.smtp.Delivered()) < rows && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	for _, s := range stops {
		s()
	}
	seen := map[string]int{}
	for _, m := range h.smtp.Delivered() {
		seen[m.MessageID]++
	}
	if len(seen) != rows {
		t.Fatalf("%d distinct messages delivered, want %d", len(seen), rows)
	}
	for id, n := range seen {
		if n != 1 || !want[id] {
			t.Fatalf("message %s delivered %d times (known: %v)", id, n, want[id])
		}
	}
}

func TestGiveUpAfterBoundedTime(t *testing.T) {
	h := newHarness(t, 1500*time.Millisecond, func(int, mailtest.Message) mailtest.Action { return mailtest.Refuse })
	row := h.send(t, "fay@example.test", "777777")
	w, _ := h.worker(t, "w1", 5*time.Second)
	stop := run(t, w)
	defer stop()
	got := h.waitStatus(t, row.ID, storage.MailGivenUp, 15*time.Second)
	if got.Sealed != nil {
		t.Fatal("sealed data kept after giving up")
	}
	if n := testutil.ToFloat64(h.metrics.givenUp.WithLabelValues(TemplateSignupCode, "expired")); n != 1 {
		t.Fatalf("given-up metric %v", n)
	}
	if !strings.Contains(h.logs.String(), "mail.given_up") {
		t.Fatalf("no audit event in %s", h.logs.String())
	}
}

func TestPermanentRefusalGivesUpAtOnce(t *testing.T) {
	h := newHarness(t, 0, func(int, mailtest.Message) mailtest.Action { return mailtest.Reject })
	row := h.send(t, "gus@example.test", "888888")
	w, _ := h.worker(t, "w1", 5*time.Second)
	stop := run(t, w)
	defer stop()
	h.waitStatus(t, row.ID, storage.MailGivenUp, 10*time.Second)
	if n := len(h.smtp.Received()); n != 1 {
		t.Fatalf("%d attempts after a 550, want 1", n)
	}
}

// The row and its job are written in the caller's transaction: a rollback
// leaves neither.
func TestEnqueueIsPartOfTheCallersTransaction(t *testing.T) {
	h := newHarness(t, 0, nil)
	ctx := context.Background()
	tx, err := h.store.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := h.outbox.Enqueue(tx, Message{To: "hal@example.test", Template: TemplateAccountDeleted})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Rollback(tx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.GetMail(ctx, id); err == nil {
		t.Fatal("the row survived the rollback")
	}
	js, err := h.store.ListJobs(ctx, storage.JobFilter{Kind: JobKind})
	if err != nil || len(js) != 0 {
		t.Fatalf("jobs after rollback: %d, %v", len(js), err)
	}
}

func TestBackoffFirstRetryWithin30s(t *testing.T) {
	if d := Backoff(1); d <= 0 || d > 30*time.Second {
		t.Fatalf("first retry after %v", d)
	}
	var total time.Duration
	for a := 1; total < DefaultGiveUp; a++ {
		total += Backoff(a)
		if a > maxJobAttempts/2 {
			t.Fatalf("the give-up time needs %d attempts: raise maxJobAttempts", a)
		}
	}
}
