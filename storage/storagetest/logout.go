package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/storage"
)

// logoutCases are the back-channel logout cases of the suite
// (storage.LogoutStore, and the deliveries the session ends write).
var logoutCases = []testCase{
	{"LogoutQueuedWithSessionEnd", testLogoutQueued},
	{"LogoutQueuedByRevokeSubjectRollsBack", testLogoutRollback},
	{"LogoutLease", testLogoutLease},
	{"LogoutConcurrentClaims", testLogoutConcurrentClaims},
	{"LogoutNoteRacesSessionEnd", testLogoutNoteRace},
	{"LogoutOnConsentWithdrawn", testLogoutConsent},
	{"TrimSessions", testTrimSessions},
	{"LogoutEndWaitsForNote", testLogoutEndWaits},
}

// testTrimSessions: the sessions beyond the newest keep end (oldest
// first), their apps are told, other users' sessions stay, and racing
// trims leave exactly keep.
func testTrimSessions(t *testing.T, s Store) {
	ctx := t.Context()
	logoutClient(t, s, "rp-trim", "https://trim.example/logout")
	u := mustUser(t, s, "trim-user")
	other := mustUser(t, s, "trim-other")
	base := time.Now().UTC().Truncate(time.Microsecond)
	for i := range 6 {
		at := base.Add(time.Duration(i) * time.Second)
		noErr(t, "CreateSession", s.CreateSession(ctx, &storage.Session{ID: fmt.Sprintf("trim-%d", i), Subject: u.Subject, AuthTime: at,
			AMR: []string{"pwd"}, IdleExpiresAt: base.Add(time.Hour), ExpiresAt: base.Add(2 * time.Hour), CreatedAt: at, LastSeenAt: at}))
	}
	logoutSession(t, s, other, "trim-other-s")
	noErr(t, "Note", s.NoteSessionClient(ctx, "trim-0", "rp-trim"))
	n, err := s.TrimSessions(ctx, u.Subject, 4)
	noErr(t, "TrimSessions", err)
	if n != 2 {
		t.Fatalf("TrimSessions ended %d, want 2", n)
	}
	for i, want := range []bool{false, false, true, true, true, true} {
		_, err := s.GetSession(ctx, fmt.Sprintf("trim-%d", i), base)
		if got := err == nil; got != want {
			t.Errorf("session trim-%d alive=%v, want %v (the oldest end first)", i, got, want)
		}
	}
	if _, err := s.GetSession(ctx, "trim-other-s", base); err != nil {
		t.Errorf("another user's session ended: %v", err)
	}
	if ds := deliveries(t, s); len(ds) != 1 || ds[0].SID != "trim-0" || ds[0].ClientID != "rp-trim" {
		t.Errorf("deliveries after the trim: %+v, want rp-trim told for trim-0", ds)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.TrimSessions(ctx, u.Subject, 1)
			noErr(t, "racing TrimSessions", err)
		}()
	}
	wg.Wait()
	ss, err := s.ListSessions(ctx, u.Subject, base)
	noErr(t, "ListSessions", err)
	if len(ss) != 1 || ss[0].ID != "trim-5" {
		t.Fatalf("after racing trims to 1: %d sessions, want the newest", len(ss))
	}
}

// testLogoutEndWaits: a session's end that meets a code's transaction
// holding the session (TouchSession noting the client, not yet committed)
// waits for it, and tells the client it noted.
func testLogoutEndWaits(t *testing.T, s Store) {
	ctx := t.Context()
	logoutClient(t, s, "rp-x", "https://x.example/logout")
	u := mustUser(t, s, "bcl-wait")
	logoutSession(t, s, u, "s1")
	tx, err := s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	_, err = s.TouchSession(tx, "s1", "rp-x", time.Now(), time.Hour)
	noErr(t, "TouchSession", err)
	_, err = s.TouchSession(tx, "s1", "rp-x", time.Now(), time.Hour) // noted once
	noErr(t, "TouchSession again", err)
	ended := make(chan error, 1)
	go func() { _, err := s.EndSessions(ctx, u.Subject); ended <- err }()
	time.Sleep(100 * time.Millisecond) // PostgreSQL: EndSessions waits on the row lock
	noErr(t, "Commit", s.Commit(tx))
	noErr(t, "EndSessions", <-ended)
	if ds := deliveries(t, s); len(ds) != 1 || ds[0].ClientID != "rp-x" {
		t.Fatalf("deliveries %+v, want one to rp-x: the end did not see the note committed before it", ds)
	}
}

// testLogoutConsent: withdrawing a consent signs the app out of every
// session it was noted in, once; the sessions stay, and their end later
// tells only the other apps.
func testLogoutConsent(t *testing.T, s Store) {
	ctx := t.Context()
	logoutClient(t, s, "rp-a", "https://a.example/logout")
	logoutClient(t, s, "rp-b", "https://b.example/logout")
	u := mustUser(t, s, "bcl-consent")
	logoutSession(t, s, u, "s1")
	logoutSession(t, s, u, "s2")
	for _, n := range []struct{ sid, client string }{{"s1", "rp-a"}, {"s1", "rp-b"}, {"s2", "rp-a"}} {
		noErr(t, "Note", s.NoteSessionClient(ctx, n.sid, n.client))
	}
	noErr(t, "GrantConsent", s.GrantConsent(ctx, u.Subject, "rp-a", []string{"openid"}))
	noErr(t, "RevokeConsent", s.RevokeConsent(ctx, u.Subject, "rp-a"))
	ds := deliveries(t, s)
	if len(ds) != 2 || ds[0].ClientID != "rp-a" || ds[1].ClientID != "rp-a" || ds[0].SID == ds[1].SID {
		t.Fatalf("after RevokeConsent: %+v, want rp-a told for s1 and s2", ds)
	}
	if _, err := s.GetSession(ctx, "s1", time.Now()); err != nil {
		t.Fatalf("RevokeConsent ended the session: %v", err)
	}
	wantErr(t, "RevokeConsent again", s.RevokeConsent(ctx, u.Subject, "rp-a"), storage.ErrNotFound)
	_, err := s.EndSessions(ctx, u.Subject)
	noErr(t, "EndSessions", err)
	ds = deliveries(t, s)
	if len(ds) != 3 || ds[0].ClientID != "rp-b" || ds[0].SID != "s1" {
		t.Fatalf("after EndSessions: %d deliveries, newest %+v; want one more, to rp-b for s1", len(ds), ds[0])
	}
}

// logoutClient creates a client with a backchannel_logout_uri ("" for none).
func logoutClient(t *testing.T, s Store, id, uri string) {
	t.Helper()
	c := mustClient(t, s, id)
	c.BackchannelLogoutURI, c.BackchannelLogoutSessionRequired = uri, uri != ""
	noErr(t, "UpdateClient", s.UpdateClient(t.Context(), c))
}

// logoutSession opens a session of u.
func logoutSession(t *testing.T, s Store, u *storage.User, id string) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	noErr(t, "CreateSession", s.CreateSession(t.Context(), &storage.Session{ID: id, Subject: u.Subject, AuthTime: now,
		AMR: []string{"pwd"}, IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}))
}

// deliveries lists every delivery, newest first.
func deliveries(t *testing.T, s Store) []*storage.LogoutDelivery {
	t.Helper()
	ds, err := s.ListLogoutDeliveries(t.Context(), storage.LogoutFilter{Limit: 1000})
	noErr(t, "ListLogoutDeliveries", err)
	return ds
}

func testLogoutQueued(t *testing.T, s Store) {
	ctx := t.Context()
	logoutClient(t, s, "rp-a", "https://a.example/logout")
	logoutClient(t, s, "rp-b", "") // no backchannel_logout_uri: not told
	logoutClient(t, s, "rp-c", "https://c.example/logout")
	u := mustUser(t, s, "bcl")
	logoutSession(t, s, u, "s1")
	logoutSession(t, s, u, "s2")
	logoutSession(t, s, u, "s3")
	for _, n := range []struct{ sid, client string }{{"s1", "rp-a"}, {"s1", "rp-a"}, {"s1", "rp-b"}, {"s2", "rp-a"}, {"s2", "rp-c"}, {"s3", "rp-c"}} {
		noErr(t, "NoteSessionClient", s.NoteSessionClient(ctx, n.sid, n.client))
	}
	noErr(t, "NoteSessionClient of an unknown session", s.NoteSessionClient(ctx, "nope", "rp-a"))

	noErr(t, "DeleteSession", s.DeleteSession(ctx, "s1"))
	ds := deliveries(t, s)
	if len(ds) != 1 || ds[0].ClientID != "rp-a" || ds[0].SID != "s1" || ds[0].Subject != u.Subject ||
		ds[0].URI != "https://a.example/logout" || ds[0].Status != storage.LogoutPending || ds[0].JTI == "" || ds[0].EventID == "" {
		t.Fatalf("after DeleteSession: %+v, want one pending delivery to rp-a for s1", ds)
	}
	noErr(t, "DeleteSession again", s.DeleteSession(ctx, "s1"))
	if n, err := s.CountPendingLogoutDeliveries(ctx); err != nil || n != 1 {
		t.Fatalf("a second DeleteSession queued more: %d pending (%v)", n, err)
	}

	n, err := s.EndSessions(ctx, u.Subject)
	noErr(t, "EndSessions", err)
	if n != 2 {
		t.Errorf("EndSessions = %d, want 2", n)
	}
	ds = deliveries(t, s)
	if len(ds) != 4 {
		t.Fatalf("after EndSessions: %d deliveries, want 4", len(ds))
	}
	seen := map[string]bool{}
	for _, d := range ds[:3] {
		seen[d.ClientID+"/"+d.SID] = true
		if d.EventID != ds[0].EventID || d.EventID == ds[3].EventID {
			t.Errorf("event IDs %q and %q: want one per session end", d.EventID, ds[3].EventID)
		}
	}
	if !seen["rp-a/s2"] || !seen["rp-c/s2"] || !seen["rp-c/s3"] {
		t.Errorf("EndSessions queued %v, want rp-a/s2, rp-c/s2, rp-c/s3", seen)
	}
	if ds[0].JTI == ds[1].JTI {
		t.Error("two deliveries share a jti")
	}
}

func testLogoutRollback(t *testing.T, s Store) {
	ctx := t.Context()
	logoutClient(t, s, "rp-a", "https://a.example/logout")
	u := mustUser(t, s, "bcl-rb")
	logoutSession(t, s, u, "s1")
	noErr(t, "NoteSessionClient", s.NoteSessionClient(ctx, "s1", "rp-a"))
	tx, err := s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	noErr(t, "SetUserDisabled", s.SetUserDisabled(tx, u.Subject, true))
	noErr(t, "RevokeSubject", s.RevokeSubject(tx, u.Subject))
	noErr(t, "Rollback", s.Rollback(tx))
	if ds := deliveries(t, s); len(ds) != 0 {
		t.Fatalf("a rolled-back disable left deliveries: %+v", ds)
	}
	tx, err = s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	noErr(t, "SetUserDisabled", s.SetUserDisabled(tx, u.Subject, true))
	noErr(t, "RevokeSubject", s.RevokeSubject(tx, u.Subject))
	noErr(t, "Commit", s.Commit(tx))
	if ds := deliveries(t, s); len(ds) != 1 || ds[0].SID != "s1" {
		t.Fatalf("a committed disable queued %+v, want one delivery for s1", ds)
	}
}

func testLogoutLease(t *testing.T, s Store) {
	ctx := t.Context()
	logoutClient(t, s, "rp-a", "https://a.example/logout")
	logoutClient(t, s, "rp-b", "http://127.0.0.1:9/logout")
	u := mustUser(t, s, "bcl-lease")
	logoutSession(t, s, u, "s1")
	noErr(t, "Note", s.NoteSessionClient(ctx, "s1", "rp-a"))
	noErr(t, "Note", s.NoteSessionClient(ctx, "s1", "rp-b"))
	noErr(t, "DeleteSession", s.DeleteSession(ctx, "s1"))

	skipped, err := s.ClaimLogoutDeliveries(ctx, "w1", 10, time.Minute, []string{"rp-a"})
	noErr(t, "Claim skipping rp-a", err)
	if len(skipped) != 1 || skipped[0].ClientID != "rp-b" || skipped[0].URI != "http://127.0.0.1:9/logout" || skipped[0].Attempts != 1 || skipped[0].LockedBy != "w1" {
		t.Fatalf("claim skipping rp-a = %+v", skipped)
	}
	b := skipped[0]
	got, err := s.ClaimLogoutDeliveries(ctx, "w2", 10, 50*time.Millisecond, nil)
	noErr(t, "Claim", err)
	if len(got) != 1 || got[0].ClientID != "rp-a" {
		t.Fatalf("second claim = %+v, want only rp-a (rp-b is leased)", got)
	}
	a := got[0]
	lost, err := s.ExtendLogoutLeases(ctx, []storage.LogoutLease{b.Lease(), a.Lease()}, time.Minute)
	noErr(t, "Extend", err)
	if len(lost) != 0 {
		t.Fatalf("Extend lost %v", lost)
	}
	noErr(t, "Finish delivered", s.FinishLogoutDelivery(ctx, b.Lease(), storage.LogoutDelivered, "", 0))
	wantErr(t, "Finish twice", s.FinishLogoutDelivery(ctx, b.Lease(), storage.LogoutDelivered, "", 0), storage.ErrLeaseLost)
	noErr(t, "Finish retry", s.FinishLogoutDelivery(ctx, a.Lease(), storage.LogoutPending, "answered 500", 0))
	again, err := s.ClaimLogoutDeliveries(ctx, "w3", 10, 50*time.Millisecond, nil)
	noErr(t, "Claim again", err)
	if len(again) != 1 || again[0].ID != a.ID || again[0].Attempts != 2 || again[0].JTI != a.JTI || again[0].LastError != "answered 500" {
		t.Fatalf("claim after retry = %+v, want rp-a's row, attempt 2, same jti", again)
	}
	// The lease expires: another worker takes the row over, and the first
	// one's writes are refused.
	time.Sleep(120 * time.Millisecond)
	over, err := s.ClaimLogoutDeliveries(ctx, "w4", 10, time.Minute, nil)
	noErr(t, "Claim after expiry", err)
	if len(over) != 1 || over[0].ID != a.ID || over[0].Attempts != 3 {
		t.Fatalf("takeover claim = %+v", over)
	}
	lost, err = s.ExtendLogoutLeases(ctx, []storage.LogoutLease{again[0].Lease()}, time.Minute)
	noErr(t, "Extend lost", err)
	if len(lost) != 1 || lost[0] != a.ID {
		t.Errorf("Extend of a taken-over lease lost %v, want [%d]", lost, a.ID)
	}
	wantErr(t, "Finish with a lost lease", s.FinishLogoutDelivery(ctx, again[0].Lease(), storage.LogoutDelivered, "", 0), storage.ErrLeaseLost)
	noErr(t, "Finish failed", s.FinishLogoutDelivery(ctx, over[0].Lease(), storage.LogoutFailed, "given up", 0))
	failed, err := s.ListLogoutDeliveries(ctx, storage.LogoutFilter{Status: storage.LogoutFailed})
	noErr(t, "List failed", err)
	if len(failed) != 1 || failed[0].ID != a.ID || failed[0].FinishedAt.IsZero() || failed[0].LastError != "given up" {
		t.Errorf("failed deliveries = %+v", failed)
	}
	if n, err := s.CountPendingLogoutDeliveries(ctx); err != nil || n != 0 {
		t.Errorf("%d pending (%v), want 0", n, err)
	}
	if rest, err := s.ClaimLogoutDeliveries(ctx, "w5", 10, time.Minute, nil); err != nil || len(rest) != 0 {
		t.Errorf("a finished delivery was claimed again: %+v (%v)", rest, err)
	}
	if c, ok := any(s).(storage.Cleaner); ok {
		n, err := c.DeleteExpired(ctx, storage.CleanupLogoutDeliveries, time.Now().Add(time.Hour), 10)
		noErr(t, "DeleteExpired", err)
		if n != 2 || len(deliveries(t, s)) != 0 {
			t.Errorf("DeleteExpired deleted %d finished deliveries, want 2", n)
		}
	}
}

// testLogoutConcurrentClaims: chunks claimed by Concurrency goroutines at
// once never overlap, and together hold every row.
func testLogoutConcurrentClaims(t *testing.T, s Store) {
	ctx := t.Context()
	u := mustUser(t, s, "bcl-many")
	const clients = 40
	for i := range clients {
		id := fmt.Sprintf("rp-%02d", i)
		logoutClient(t, s, id, "https://"+id+".example/logout")
	}
	logoutSession(t, s, u, "s1")
	for i := range clients {
		noErr(t, "Note", s.NoteSessionClient(ctx, "s1", fmt.Sprintf("rp-%02d", i)))
	}
	noErr(t, "DeleteSession", s.DeleteSession(ctx, "s1"))
	var (
		mu      sync.Mutex
		claimed = map[int64]string{}
		wg      sync.WaitGroup
	)
	for g := range Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := fmt.Sprintf("w%d", g)
			for range clients {
				ds, err := s.ClaimLogoutDeliveries(ctx, w, 3, time.Minute, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, d := range ds {
					if prev, dup := claimed[d.ID]; dup {
						t.Errorf("delivery %d claimed by %s and %s", d.ID, prev, w)
					}
					claimed[d.ID] = w
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(claimed) != clients {
		t.Errorf("%d deliveries claimed, want %d", len(claimed), clients)
	}
}

// testLogoutNoteRace: codes issued (TouchSession and
// NoteSessionClient in one transaction) while the session ends: every
// client whose transaction committed gets a delivery.
func testLogoutNoteRace(t *testing.T, s Store) {
	ctx := t.Context()
	u := mustUser(t, s, "bcl-race")
	logoutSession(t, s, u, "s1")
	const n = 16
	for i := range n {
		logoutClient(t, s, fmt.Sprintf("rp-%02d", i), fmt.Sprintf("https://rp-%02d.example/logout", i))
	}
	var (
		mu        sync.Mutex
		committed = map[string]bool{}
		wg        sync.WaitGroup
		start     = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			id := fmt.Sprintf("rp-%02d", i)
			// Half as the authorization endpoint does it: a deferred
			// transaction whose writes go with COMMIT.
			begin := s.BeginTX
			if i%2 == 1 {
				begin = s.BeginDeferredTX
			}
			tx, err := begin(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := s.TouchSession(tx, "s1", id, time.Now(), time.Hour); err != nil {
				_ = s.Rollback(tx)
				if !errors.Is(err, storage.ErrNotFound) {
					t.Error(err)
				}
				return
			}
			if err := s.Commit(tx); err == nil {
				mu.Lock()
				committed[id] = true
				mu.Unlock()
			}
		}()
	}
	close(start)
	time.Sleep(time.Millisecond)
	_, err := s.EndSessions(ctx, u.Subject)
	noErr(t, "EndSessions", err)
	wg.Wait()
	got := map[string]bool{}
	for _, d := range deliveries(t, s) {
		got[d.ClientID] = true
	}
	t.Logf("%d of %d code transactions committed before or around the session's end", len(committed), n)
	for id := range committed {
		if !got[id] {
			t.Errorf("client %s noted in a committed transaction got no delivery (%d committed, %d delivered)", id, len(committed), len(got))
		}
	}
	for id := range got {
		if !committed[id] {
			t.Errorf("client %s got a delivery without a committed note", id)
		}
	}
}
