package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/storage"
)

// idempotencyCases are the storage.IdempotencyStore cases of the suite.
var idempotencyCases = []testCase{
	{"IdempotencyClaimCompleteReplay", testIdempotencyReplay},
	{"IdempotencyKeyReused", testIdempotencyReused},
	{"IdempotencyInFlight", testIdempotencyInFlight},
	{"IdempotencyRollbackLeavesNoKey", testIdempotencyRollback},
	{"IdempotencyScope", testIdempotencyScope},
	{"IdempotencyExpiredReclaimed", testIdempotencyExpired},
	{"IdempotencyCompleteContract", testIdempotencyComplete},
	{"IdempotencyClaimNeedsTx", testIdempotencyNeedsTx},
	{"IdempotencyDeleteExpired", testIdempotencyDeleteExpired},
	{"ConcurrentClaimIdempotencyKey", testConcurrentClaim},
}

// idemClaim returns a claim of key under a fixed credential and endpoint,
// created now (in a non-UTC zone, with nanoseconds) and expiring in a day.
func idemClaim(key, request string) storage.IdempotencyClaim {
	now := time.Now().In(nonUTC)
	return storage.IdempotencyClaim{
		IdempotencyKey: storage.IdempotencyKey{
			Credential: []byte("cred-hash-0123456789"),
			Endpoint:   "POST /admin/clients",
			KeyHash:    []byte("key-hash-" + key),
		},
		RequestHash: []byte("request-hash-" + request),
		CreatedAt:   now,
		ExpiresAt:   now.Add(24 * time.Hour),
	}
}

// inTx runs f in a transaction, committing when f returns nil and rolling
// back otherwise; it returns f's error or the commit's. It never stops the
// test, so goroutines may call it.
func inTx(ctx context.Context, s Store, f func(ctx context.Context) error) error {
	tx, err := s.BeginTX(ctx)
	if err != nil {
		return fmt.Errorf("BeginTX: %w", err)
	}
	if err := f(tx); err != nil {
		if rbErr := s.Rollback(tx); rbErr != nil {
			return fmt.Errorf("%w; rollback: %w", err, rbErr)
		}
		return err
	}
	return s.Commit(tx)
}

// claimAndComplete claims c and, if claimed, completes it with status and
// response, in one committed transaction. It fails the test unless the key
// was claimed.
func claimAndComplete(t *testing.T, s Store, c storage.IdempotencyClaim, status int, response []byte) {
	t.Helper()
	noErr(t, "claim and complete", inTx(t.Context(), s, func(ctx context.Context) error {
		stored, claimed, err := s.ClaimIdempotencyKey(ctx, c)
		if err != nil {
			return err
		}
		if !claimed || stored != nil {
			return fmt.Errorf("ClaimIdempotencyKey = %v, %v; want nil, true", stored, claimed)
		}
		return s.CompleteIdempotencyKey(ctx, c.IdempotencyKey, status, response)
	}))
}

// claimOnce claims c in its own transaction and rolls it back, returning
// ClaimIdempotencyKey's results. It never stops the test, so goroutines may
// call it.
func claimOnce(ctx context.Context, s Store, c storage.IdempotencyClaim) (*storage.IdempotencyRecord, bool, error) {
	tx, err := s.BeginTX(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("BeginTX: %w", err)
	}
	stored, claimed, err := s.ClaimIdempotencyKey(tx, c)
	if rbErr := s.Rollback(tx); rbErr != nil {
		err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
	}
	return stored, claimed, err
}

func testIdempotencyReplay(t *testing.T, s Store) {
	c := idemClaim("k1", "body")
	// Every byte value, so no backend can mangle the sealed response.
	response := make([]byte, 256)
	for i := range response {
		response[i] = byte(i)
	}
	claimAndComplete(t, s, c, 201, response)

	stored, claimed, err := claimOnce(t.Context(), s, c)
	noErr(t, "ClaimIdempotencyKey again", err)
	if claimed || stored == nil {
		t.Fatalf("ClaimIdempotencyKey of a completed key = %v, %v; want the record, false", stored, claimed)
	}
	wantCreated := c.CreatedAt.UTC().Truncate(time.Microsecond)
	wantExpires := c.ExpiresAt.UTC().Truncate(time.Microsecond)
	check := func(what string, r *storage.IdempotencyRecord) {
		t.Helper()
		if r.Status != 201 || !bytes.Equal(r.Response, response) {
			t.Errorf("%s: status %d, response %x; want 201, %x", what, r.Status, r.Response, response)
		}
		if !bytes.Equal(r.RequestHash, c.RequestHash) || !bytes.Equal(r.Credential, c.Credential) ||
			!bytes.Equal(r.KeyHash, c.KeyHash) || r.Endpoint != c.Endpoint {
			t.Errorf("%s: record %+v does not match claim %+v", what, r, c)
		}
		if r.CreatedAt != wantCreated || r.ExpiresAt != wantExpires {
			t.Errorf("%s: times %v, %v; want %v, %v (UTC, microseconds)", what, r.CreatedAt, r.ExpiresAt, wantCreated, wantExpires)
		}
	}
	check("replayed claim", stored)
	got, err := s.GetIdempotencyKey(t.Context(), c.IdempotencyKey)
	noErr(t, "GetIdempotencyKey", err)
	check("GetIdempotencyKey", got)

	// The returned record is a copy.
	got.Response[0] = 0xff
	again, err := s.GetIdempotencyKey(t.Context(), c.IdempotencyKey)
	noErr(t, "GetIdempotencyKey again", err)
	if again.Response[0] != 0 {
		t.Error("mutating a returned record changed the stored one")
	}
}

func testIdempotencyReused(t *testing.T, s Store) {
	claimAndComplete(t, s, idemClaim("k1", "body-a"), 201, []byte("sealed"))
	_, claimed, err := claimOnce(t.Context(), s, idemClaim("k1", "body-b"))
	wantErr(t, "claim with another request hash", err, storage.ErrIdempotencyKeyReused)
	if claimed {
		t.Error("a reused key was claimed")
	}
	// The stored record is untouched.
	got, err := s.GetIdempotencyKey(t.Context(), idemClaim("k1", "").IdempotencyKey)
	noErr(t, "GetIdempotencyKey", err)
	if string(got.RequestHash) != "request-hash-body-a" || string(got.Response) != "sealed" {
		t.Errorf("stored record changed: %+v", got)
	}
}

func testIdempotencyInFlight(t *testing.T, s Store) {
	ctx := t.Context()
	c := idemClaim("k1", "body")
	holder, err := s.BeginTX(ctx)
	noErr(t, "BeginTX holder", err)
	defer func() { _ = s.Rollback(holder) }() // a no-op once rolled back below
	_, claimed, err := s.ClaimIdempotencyKey(holder, c)
	noErr(t, "holder's claim", err)
	if !claimed {
		t.Fatal("first claim not claimed")
	}

	// Another transaction: in flight, for the same and for another body,
	// without waiting for the holder.
	for _, req := range []string{"body", "other-body"} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, claimed, err := claimOnce(t.Context(), s, idemClaim("k1", req))
			if !errors.Is(err, storage.ErrIdempotencyInFlight) || claimed {
				t.Errorf("claim of a key in flight (%s) = %v, %v; want ErrIdempotencyInFlight", req, claimed, err)
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("claim of a key in flight blocked")
		}
	}

	noErr(t, "holder's rollback", s.Rollback(holder))
	_, claimed, err = claimOnce(t.Context(), s, c)
	noErr(t, "claim after the holder rolled back", err)
	if !claimed {
		t.Error("key not claimable after the holder rolled back")
	}
}

func testIdempotencyRollback(t *testing.T, s Store) {
	ctx := t.Context()
	c := idemClaim("k1", "body")
	tx, err := s.BeginTX(ctx)
	noErr(t, "BeginTX", err)
	defer func() { _ = s.Rollback(tx) }() // a no-op once rolled back below
	_, claimed, err := s.ClaimIdempotencyKey(tx, c)
	noErr(t, "ClaimIdempotencyKey", err)
	if !claimed {
		t.Fatal("not claimed")
	}
	noErr(t, "CompleteIdempotencyKey", s.CompleteIdempotencyKey(tx, c.IdempotencyKey, 201, []byte("sealed")))
	noErr(t, "Rollback", s.Rollback(tx))

	_, err = s.GetIdempotencyKey(ctx, c.IdempotencyKey)
	wantErr(t, "GetIdempotencyKey after rollback", err, storage.ErrNotFound)
	// A fixed request may reuse the key.
	claimAndComplete(t, s, idemClaim("k1", "fixed-body"), 201, []byte("sealed"))
}

func testIdempotencyScope(t *testing.T, s Store) {
	base := idemClaim("k1", "body")
	claimAndComplete(t, s, base, 201, []byte("a"))
	otherCred := idemClaim("k1", "body")
	otherCred.Credential = []byte("another-credential")
	claimAndComplete(t, s, otherCred, 201, []byte("b"))
	otherEndpoint := idemClaim("k1", "body")
	otherEndpoint.Endpoint = "PUT /admin/clients/x"
	claimAndComplete(t, s, otherEndpoint, 200, []byte("c"))
	claimAndComplete(t, s, idemClaim("k2", "body"), 201, []byte("d"))

	for want, k := range map[string]storage.IdempotencyKey{
		"a": base.IdempotencyKey, "b": otherCred.IdempotencyKey, "c": otherEndpoint.IdempotencyKey,
	} {
		got, err := s.GetIdempotencyKey(t.Context(), k)
		noErr(t, "GetIdempotencyKey", err)
		if string(got.Response) != want {
			t.Errorf("response of %q/%q = %q, want %q", k.Credential, k.Endpoint, got.Response, want)
		}
	}
}

func testIdempotencyExpired(t *testing.T, s Store) {
	old := idemClaim("k1", "old-body")
	old.CreatedAt = old.CreatedAt.Add(-25 * time.Hour)
	old.ExpiresAt = old.CreatedAt.Add(24 * time.Hour) // an hour ago
	claimAndComplete(t, s, old, 201, []byte("old"))

	// An expired record is treated as absent, whatever the body.
	fresh := idemClaim("k1", "new-body")
	claimAndComplete(t, s, fresh, 201, []byte("new"))
	got, err := s.GetIdempotencyKey(t.Context(), fresh.IdempotencyKey)
	noErr(t, "GetIdempotencyKey", err)
	if string(got.Response) != "new" || string(got.RequestHash) != "request-hash-new-body" {
		t.Errorf("record after re-claim: %+v", got)
	}
}

func testIdempotencyComplete(t *testing.T, s Store) {
	c := idemClaim("k1", "body")
	err := inTx(t.Context(), s, func(ctx context.Context) error {
		return s.CompleteIdempotencyKey(ctx, c.IdempotencyKey, 201, []byte("x"))
	})
	wantErr(t, "CompleteIdempotencyKey without claim", err, storage.ErrNotFound)

	claimAndComplete(t, s, c, 201, []byte("first"))
	err = inTx(t.Context(), s, func(ctx context.Context) error {
		return s.CompleteIdempotencyKey(ctx, c.IdempotencyKey, 200, []byte("second"))
	})
	wantErr(t, "CompleteIdempotencyKey twice", err, storage.ErrNotFound)
	got, err := s.GetIdempotencyKey(t.Context(), c.IdempotencyKey)
	noErr(t, "GetIdempotencyKey", err)
	if got.Status != 201 || string(got.Response) != "first" {
		t.Errorf("record = %d %q after a second Complete, want 201 \"first\"", got.Status, got.Response)
	}

	// An empty response is stored as empty, not as "in flight".
	e := idemClaim("k2", "body")
	claimAndComplete(t, s, e, 200, nil)
	stored, claimed, err := claimOnce(t.Context(), s, e)
	noErr(t, "claim of a key completed with an empty response", err)
	if claimed || stored == nil || stored.Status != 200 || len(stored.Response) != 0 {
		t.Errorf("claim = %+v, %v; want the completed record", stored, claimed)
	}
}

func testIdempotencyNeedsTx(t *testing.T, s Store) {
	_, claimed, err := s.ClaimIdempotencyKey(t.Context(), idemClaim("k1", "body"))
	if err == nil || claimed {
		t.Fatalf("ClaimIdempotencyKey without a transaction = %v, %v; want an error", claimed, err)
	}
	_, err = s.GetIdempotencyKey(t.Context(), idemClaim("k1", "body").IdempotencyKey)
	wantErr(t, "GetIdempotencyKey after a refused claim", err, storage.ErrNotFound)
}

func testIdempotencyDeleteExpired(t *testing.T, s Store) {
	now := time.Now()
	for i := range 5 {
		c := idemClaim(fmt.Sprint("expired-", i), "body")
		c.CreatedAt = now.Add(-48 * time.Hour)
		c.ExpiresAt = now.Add(-time.Duration(i+1) * time.Minute)
		claimAndComplete(t, s, c, 201, []byte("x"))
	}
	fresh := idemClaim("fresh", "body")
	claimAndComplete(t, s, fresh, 201, []byte("x"))

	n, err := s.DeleteExpiredIdempotencyKeys(t.Context(), now, 3)
	noErr(t, "DeleteExpiredIdempotencyKeys limit 3", err)
	if n != 3 {
		t.Errorf("deleted %d, want 3 (the limit)", n)
	}
	n, err = s.DeleteExpiredIdempotencyKeys(t.Context(), now, 0)
	noErr(t, "DeleteExpiredIdempotencyKeys no limit", err)
	if n != 2 {
		t.Errorf("deleted %d, want the remaining 2", n)
	}
	for i := range 5 {
		_, err := s.GetIdempotencyKey(t.Context(), idemClaim(fmt.Sprint("expired-", i), "").IdempotencyKey)
		wantErr(t, "expired record after cleanup", err, storage.ErrNotFound)
	}
	_, err = s.GetIdempotencyKey(t.Context(), fresh.IdempotencyKey)
	noErr(t, "fresh record after cleanup", err)
}

// testConcurrentClaim races Concurrency goroutines claiming one key, each in
// its own transaction; the winner does "the work" (creates a client) and
// completes. Exactly one claims; the others see it in flight or, once it
// committed, get its stored response. Exactly one client exists.
func testConcurrentClaim(t *testing.T, s Store) {
	c := idemClaim("k1", "body")
	type result struct {
		stored  *storage.IdempotencyRecord
		claimed bool
		err     error
	}
	results := make([]result, Concurrency)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range Concurrency {
		wg.Go(func() {
			<-start
			var r result
			err := inTx(t.Context(), s, func(ctx context.Context) error {
				r.stored, r.claimed, r.err = s.ClaimIdempotencyKey(ctx, c)
				if r.err != nil || !r.claimed {
					return errors.New("not claimed")
				}
				if err := s.CreateClient(ctx, &storage.Client{ID: "created-once", TokenEndpointAuthMethod: "none"}); err != nil {
					return err
				}
				return s.CompleteIdempotencyKey(ctx, c.IdempotencyKey, 201, []byte("created-once"))
			})
			if r.claimed && err != nil {
				r.err = err
			}
			results[i] = r
		})
	}
	close(start)
	wg.Wait()

	wins := 0
	for _, r := range results {
		switch {
		case r.err == nil && r.claimed:
			wins++
		case r.err == nil && r.stored != nil:
			if r.stored.Status != 201 || string(r.stored.Response) != "created-once" {
				t.Errorf("replayed record = %+v", r.stored)
			}
		case errors.Is(r.err, storage.ErrIdempotencyInFlight):
		default:
			t.Errorf("loser: claimed=%v stored=%v err=%v; want ErrIdempotencyInFlight or the stored record", r.claimed, r.stored, r.err)
		}
	}
	if wins != 1 {
		t.Errorf("%d of %d concurrent claims won, want exactly 1", wins, Concurrency)
	}
	all, err := s.ListClients(t.Context(), "", 0)
	noErr(t, "ListClients", err)
	if len(all) != 1 {
		t.Errorf("%d clients exist after the race, want 1", len(all))
	}
	stored, claimed, err := claimOnce(t.Context(), s, c)
	noErr(t, "claim after the race", err)
	if claimed || stored == nil || string(stored.Response) != "created-once" {
		t.Errorf("claim after the race = %+v, %v; want the stored record", stored, claimed)
	}
}
