package backchannel_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/backchannel"
	"github.com/authd/authd/storage"
)

// TestFanOutTwelveApps (issue 29, the first Done-when line): one user
// signed in to 12 apps signs out on the sign-out page. Three Deliverers
// (as three processes would) race for the rows. Nine apps answer 200 and
// receive one valid logout token for that sid; one answers 500 twice and
// receives it three times with the same jti, then is delivered; one acts
// and then stalls past the timeout, and receives it again with the same
// jti; one never answers and is given up after the bound, with the metric.
// No other app receives a second token.
func TestFanOutTwelveApps(t *testing.T) {
	h := newHarness(t)
	const n = 12
	const flaky, stall, dead, esApp = "app-09", "app-10", "app-11", "app-03"
	rcv := map[string]*receiver{}
	for i := range n {
		app := fmt.Sprintf("app-%02d", i)
		var behave func(w http.ResponseWriter, r *http.Request, n int)
		switch app {
		case flaky:
			behave = func(w http.ResponseWriter, r *http.Request, n int) {
				if n <= 2 {
					http.Error(w, "try later", http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusOK)
			}
		case stall:
			behave = func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 { // acted (the receipt is recorded), then too slow to answer
					select {
					case <-r.Context().Done():
					case <-time.After(4 * time.Second):
					}
				}
				w.WriteHeader(http.StatusOK)
			}
		case dead:
			behave = func(w http.ResponseWriter, r *http.Request, n int) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			}
		}
		rcv[app] = h.receiver(app, behave)
		alg := ""
		if app == esApp {
			alg = "ES256" // the logout token is signed with the client's ID token alg
		}
		h.addApp(app, rcv[app].srv.URL+"/backchannel", alg)
	}
	b := newBrowser()
	var sid string
	for i := range n {
		id := h.signIn(b, fmt.Sprintf("app-%02d", i))
		s, _ := claimsOf(t, id)["sid"].(string)
		if sid == "" {
			sid = s
		}
		if s == "" || s != sid {
			t.Fatalf("ID token of app-%02d has sid %q, want the session's %q", i, s, sid)
		}
	}
	h.signOut(b)

	reg := prometheus.NewRegistry()
	m := backchannel.NewMetrics(reg)
	var (
		auditMu sync.Mutex
		audited []string
	)
	audit := func(_ context.Context, d *storage.LogoutDelivery) {
		auditMu.Lock()
		audited = append(audited, d.ClientID)
		auditMu.Unlock()
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range 3 {
		d := h.deliverer(fmt.Sprintf("w%d", w), nil, backchannel.Config{Metrics: m, Audit: audit, Timeout: time.Second,
			GiveUp: 3 * time.Second, Concurrency: 4, Poll: 50 * time.Millisecond,
			Backoff: func(int) time.Duration { return 300 * time.Millisecond }})
		wg.Add(1)
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
	h.waitSettled(20 * time.Second)
	cancel()
	wg.Wait()

	for app, rc := range rcv {
		if bad := rc.rejected(); len(bad) > 0 {
			t.Errorf("%s rejected logout tokens: %v", app, bad)
		}
		got := rc.receipts()
		want := 1
		switch app {
		case flaky:
			want = 3
		case stall:
			want = 2
		}
		if app == dead {
			if len(got) < 1 {
				t.Errorf("%s received nothing", app)
			}
		} else if len(got) != want {
			t.Errorf("%s received %d logout tokens, want %d", app, len(got), want)
		}
		for _, r := range got {
			if wantAlg := map[bool]string{true: "ES256", false: "RS256"}[app == esApp]; r.alg != wantAlg {
				t.Errorf("%s received a token signed with %s, want %s", app, r.alg, wantAlg)
			}
			if r.sid != sid || r.sub != h.sub || r.jti != got[0].jti {
				t.Errorf("%s received sid %q sub %q jti %q, want sid %q sub %q and one jti %q", app, r.sid, r.sub, r.jti, sid, h.sub, got[0].jti)
			}
		}
	}
	ds, err := h.store.ListLogoutDeliveries(t.Context(), storage.LogoutFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != n {
		t.Fatalf("%d deliveries, want %d", len(ds), n)
	}
	for _, d := range ds {
		want := storage.LogoutDelivered
		if d.ClientID == dead {
			want = storage.LogoutFailed
		}
		if d.Status != want {
			t.Errorf("%s: %s after %d attempts (%s), want %s", d.ClientID, d.Status, d.Attempts, d.LastError, want)
		}
	}
	if g := counter(t, reg, "authd_backchannel_deliveries_total", "result", "given_up"); g != 1 {
		t.Errorf("given_up = %v, want 1", g)
	}
	if len(audited) != 1 || audited[0] != dead {
		t.Errorf("audit events for %v, want one for %s", audited, dead)
	}
	if d := counter(t, reg, "authd_backchannel_deliveries_total", "result", "delivered"); d != n-1 {
		t.Errorf("delivered = %v, want %d", d, n-1)
	}
}

// TestSignOutDoesNotWait (Done-when: delivery does not slow sign-out):
// with every app's receiver sleeping and a Deliverer running, the sign-out
// page answers at once; the logouts arrive afterwards.
func TestSignOutDoesNotWait(t *testing.T) {
	h := newHarness(t)
	var rcv []*receiver
	for i := range 3 {
		app := fmt.Sprintf("slow-%d", i)
		rc := h.receiver(app, func(w http.ResponseWriter, r *http.Request, _ int) {
			time.Sleep(3 * time.Second)
			w.WriteHeader(http.StatusOK)
		})
		h.addApp(app, rc.srv.URL+"/bc")
		rcv = append(rcv, rc)
	}
	b := newBrowser()
	for i := range 3 {
		h.signIn(b, fmt.Sprintf("slow-%d", i))
	}
	d := h.deliverer("w", prometheus.NewRegistry(), backchannel.Config{Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	took := h.signOut(b)
	if took > 2*time.Second {
		t.Errorf("the sign-out page took %v with receivers sleeping 3s: it waited for a delivery", took)
	}
	// The first attempt is made within 10 s of the sign-out (issue 29).
	h.waitSettled(15 * time.Second)
	for _, rc := range rcv {
		if got := rc.receipts(); len(got) != 1 {
			t.Errorf("%s received %d logout tokens, want 1", rc.app, len(got))
		} else if lag := got[0].at.Sub(time.Now().Add(-took)); lag > 10*time.Second {
			t.Errorf("%s received its logout token %v after the sign-out", rc.app, lag)
		}
	}
}

// TestLostLeaseStops: a delivery whose lease is taken over while its POST
// is in flight is stopped by the heartbeat (lost lease = stop): nothing is
// written for it, and the metric counts it.
func TestLostLeaseStops(t *testing.T) {
	h := newHarness(t)
	started := make(chan struct{}, 1)
	rc := h.receiver("rp-slow", func(w http.ResponseWriter, r *http.Request, _ int) {
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	h.addApp("rp-slow", rc.srv.URL+"/bc")
	b := newBrowser()
	h.signIn(b, "rp-slow")
	h.signOut(b)
	reg := prometheus.NewRegistry()
	d := h.deliverer("w1", reg, backchannel.Config{Timeout: 3 * time.Second, Heartbeat: 100 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); _, _ = d.RunDue(t.Context()) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no POST")
	}
	// Another worker takes the row over (as after an expired lease).
	if _, err := h.pool.Exec(t.Context(), `UPDATE logout_deliveries SET locked_by = 'w2', attempts = attempts + 1`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the deliverer did not stop the POST whose lease was lost")
	}
	ds, err := h.store.ListLogoutDeliveries(t.Context(), storage.LogoutFilter{})
	if err != nil || len(ds) != 1 || ds[0].Status != storage.LogoutPending || ds[0].LockedBy != "w2" || ds[0].LastError != "" {
		t.Fatalf("after the lost lease: %+v (%v); want the row as w2 holds it, untouched", ds[0], err)
	}
	mfs, _ := reg.Gather()
	lost := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "authd_backchannel_leases_lost_total" {
			lost = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if lost != 1 {
		t.Errorf("authd_backchannel_leases_lost_total = %v, want 1", lost)
	}
}

// TestFailingAppDoesNotHoldUpOthers: twenty sessions each noted by a dead
// app and a good one end at once (40 rows, interleaved); one Deliverer
// with 4 slots. After the dead app's first timeouts its rows wait out their
// back-off and are not claimed by this process meanwhile, so the good
// app's twenty are delivered long before the dead app's rows would have
// let them through one slot at a time.
func TestFailingAppDoesNotHoldUpOthers(t *testing.T) {
	h := newHarness(t)
	dead := h.receiver("rp-dead", func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	good := h.receiver("rp-good", nil)
	h.addApp("rp-dead", dead.srv.URL+"/bc")
	h.addApp("rp-good", good.srv.URL+"/bc")
	now := time.Now().UTC()
	for i := range 20 {
		sid := fmt.Sprintf("s-%02d", i)
		if err := h.store.CreateSession(t.Context(), &storage.Session{ID: sid, Subject: h.sub, AuthTime: now,
			IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		for _, app := range []string{"rp-dead", "rp-good"} {
			if _, err := h.store.TouchSession(t.Context(), sid, app, now, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := h.store.EndSessions(t.Context(), h.sub); err != nil {
		t.Fatal(err)
	}
	d := h.deliverer("w", prometheus.NewRegistry(), backchannel.Config{Timeout: time.Second, Concurrency: 4,
		Poll: 20 * time.Millisecond, Backoff: func(int) time.Duration { return 5 * time.Second }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	for len(good.receipts()) < 20 {
		if time.Since(start) > 4*time.Second {
			t.Fatalf("after %v the good app has %d of its 20 logouts: the dead app holds the slots", time.Since(start), len(good.receipts()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the good app's 20 logouts took %v (the dead app's timeout is 1s)", time.Since(start))
}
