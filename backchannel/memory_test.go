package backchannel_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// TestMemoryStore: the in-memory store of "authd dev" keeps the same
// outbox: a session's end queues the delivery, a Deliverer sends it once,
// and a delivered row is not sent again.
func TestMemoryStore(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	var hits atomic.Int32
	rp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("logout_token") != "" {
			hits.Add(1)
		}
	}))
	defer rp.Close()
	u := &storage.User{Username: "dev", PasswordHash: []byte("x")}
	if err := store.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateClient(ctx, &storage.Client{ID: "dev-app", RedirectURIs: []string{redirect},
		TokenEndpointAuthMethod: "none", BackchannelLogoutURI: rp.URL}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := store.CreateSession(ctx, &storage.Session{ID: "s1", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := store.NoteSessionClient(ctx, "s1", "dev-app"); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	d := standaloneDeliverer(t, store)
	for range 2 {
		if _, err := d.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := store.CountPendingLogoutDeliveries(ctx); hits.Load() != 1 || n != 0 {
		t.Fatalf("%d POSTs, %d pending; want 1 and 0", hits.Load(), n)
	}
}
