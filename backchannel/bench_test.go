package backchannel_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// BenchmarkFanOut: one session noted by 1 or 100 apps ends (DeleteSession, the
// statement that queues the 100 rows, timed as end_ms) and one Deliverer
// (AUTHD_BACKCHANNEL_CONCURRENCY's default, 16) delivers them to loopback
// receivers that answer at once (deliveries/s). PostgreSQL; docs/benchmarks.md.
func BenchmarkFanOut(b *testing.B) {
	for _, apps := range []int{1, 100} {
		b.Run(fmt.Sprintf("apps=%d", apps), func(b *testing.B) { benchFanOut(b, apps) })
	}
}

func benchFanOut(b *testing.B, apps int) {
	ctx := b.Context()
	store := postgres.New(pgtest.New(b))
	var hits atomic.Int64
	rp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		hits.Add(1)
	}))
	defer rp.Close()
	u := &storage.User{Username: "bench", PasswordHash: []byte("x")}
	if err := store.CreateUser(ctx, u); err != nil {
		b.Fatal(err)
	}
	for i := range apps {
		if err := store.CreateClient(ctx, &storage.Client{ID: fmt.Sprintf("app-%03d", i), RedirectURIs: []string{redirect},
			TokenEndpointAuthMethod: "none", BackchannelLogoutURI: fmt.Sprintf("%s/app-%03d", rp.URL, i)}); err != nil {
			b.Fatal(err)
		}
	}
	d := standaloneDeliverer(b, store)
	var ending, delivering time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		sid := fmt.Sprintf("s-%d", i)
		now := time.Now().UTC()
		if err := store.CreateSession(ctx, &storage.Session{ID: sid, Subject: u.Subject, AuthTime: now,
			IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		for a := range apps {
			if err := store.NoteSessionClient(ctx, sid, fmt.Sprintf("app-%03d", a)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		if err := store.DeleteSession(ctx, sid); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := d.RunDue(ctx); err != nil {
			b.Fatal(err)
		}
		ending += t1.Sub(t0)
		delivering += time.Since(t1)
	}
	b.StopTimer()
	if got := hits.Load(); got != int64(apps*b.N) {
		b.Fatalf("%d POSTs, want %d", got, apps*b.N)
	}
	b.ReportMetric(float64(ending.Microseconds())/float64(b.N)/1000, "end_ms")
	b.ReportMetric(float64(apps*b.N)/delivering.Seconds(), "deliveries/s")
}
