package storagetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

func replayRecord(key, requestID, clientID string) *storage.ReplayRecord {
	return &storage.ReplayRecord{
		Key: key, RequestID: requestID, ClientID: clientID, Subject: "sub-1",
		Fingerprint: "fp-" + key, Sealed: []byte("sealed-" + key),
		WindowEnd: time.Now().Add(30 * time.Second),
	}
}

// testReplayRecordRoundTrip: a record reads back as written; a second put
// of its key is ErrAlreadyExists; an unknown client or key is ErrNotFound;
// ReplayKeys selects by grant and by client.
func testReplayRecordRoundTrip(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	rec := replayRecord("c:sig1", "grant-1", "c1")
	if sup, err := s.PutReplayRecord(ctx, rec); err != nil || len(sup) != 0 {
		t.Fatalf("PutReplayRecord = %v, %v", sup, err)
	}
	got, err := s.GetReplayRecord(ctx, "c:sig1")
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestID != rec.RequestID || got.ClientID != "c1" || got.Subject != "sub-1" ||
		got.Fingerprint != rec.Fingerprint || string(got.Sealed) != string(rec.Sealed) ||
		!got.WindowEnd.Equal(storage.NormalizeTime(rec.WindowEnd)) || got.Revoked {
		t.Fatalf("GetReplayRecord = %+v, want %+v", got, rec)
	}
	if _, err := s.PutReplayRecord(ctx, rec); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second PutReplayRecord: %v, want ErrAlreadyExists", err)
	}
	if _, err := s.PutReplayRecord(ctx, replayRecord("c:x", "g", "nobody")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("PutReplayRecord for an unknown client: %v, want ErrNotFound", err)
	}
	if _, err := s.GetReplayRecord(ctx, "c:missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("GetReplayRecord(missing): %v, want ErrNotFound", err)
	}
	for _, scope := range []storage.ReplayScope{{RequestID: "grant-1"}, {ClientID: "c1"}} {
		keys, err := s.ReplayKeys(ctx, scope)
		if err != nil || !slices.Equal(keys, []string{"c:sig1"}) {
			t.Fatalf("ReplayKeys(%+v) = %v, %v", scope, keys, err)
		}
	}
	if _, err := s.ReplayKeys(ctx, storage.ReplayScope{}); err == nil {
		t.Fatal("ReplayKeys with an empty scope succeeded")
	}
}

// testReplayRecordRevoked: revoking a grant's access or refresh tokens marks
// its replay records revoked, and no other grant's.
func testReplayRecordRevoked(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	for _, r := range []*storage.ReplayRecord{
		replayRecord("c:a", "grant-a", "c1"), replayRecord("c:b", "grant-b", "c1"),
		replayRecord("c:c", "grant-c", "c1"),
	} {
		if _, err := s.PutReplayRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RevokeAccessToken(ctx, "grant-a"); err != nil {
		t.Fatal(err)
	}
	tctx, err := s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeRefreshToken(tctx, "grant-c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(tctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"c:a": true, "c:b": false, "c:c": true} {
		got, err := s.GetReplayRecord(ctx, key)
		if err != nil || got.Revoked != want {
			t.Errorf("record %s: revoked = %v (err %v), want %v", key, got != nil && got.Revoked, err, want)
		}
	}
}

// testReplayRecordSuperseded: a record of a grant (a refresh rotation)
// supersedes the grant's earlier records; a rolled-back put leaves nothing;
// deleting the client deletes its records.
func testReplayRecordSuperseded(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	if _, err := s.PutReplayRecord(ctx, replayRecord("c:code", "grant-1", "c1")); err != nil {
		t.Fatal(err)
	}
	sup, err := s.PutReplayRecord(ctx, replayRecord("r:rt1", "grant-1", "c1"))
	if err != nil || !slices.Equal(sup, []string{"c:code"}) {
		t.Fatalf("PutReplayRecord(rotation) superseded = %v, %v; want [c:code]", sup, err)
	}
	if got, _ := s.GetReplayRecord(ctx, "c:code"); got == nil || !got.Revoked {
		t.Fatalf("the superseded record is not revoked: %+v", got)
	}
	if got, _ := s.GetReplayRecord(ctx, "r:rt1"); got == nil || got.Revoked {
		t.Fatalf("the new record is revoked: %+v", got)
	}

	tctx, err := s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutReplayRecord(tctx, replayRecord("r:rt2", "grant-1", "c1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Rollback(tctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetReplayRecord(ctx, "r:rt2"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("rolled-back record: %v, want ErrNotFound", err)
	}
	if got, _ := s.GetReplayRecord(ctx, "r:rt1"); got == nil || got.Revoked {
		t.Fatalf("a rolled-back put superseded r:rt1: %+v", got)
	}

	if err := s.DeleteClient(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"c:code", "r:rt1"} {
		if _, err := s.GetReplayRecord(ctx, key); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("record %s after DeleteClient: %v, want ErrNotFound", key, err)
		}
	}
}

// testRedemptionLoserSeesRecord: the loser of a redemption race, run in its
// own transaction, returns only after the winner's transaction ended, so
// that the winner's replay record is visible to it (docs/architecture.md,
// "The exchange": a loser answers from the winner's record).
func testRedemptionLoserSeesRecord(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	req := newRequest("c1", "grant-1")
	if err := s.CreateAuthorizeCodeSession(ctx, "code1", req); err != nil {
		t.Fatal(err)
	}
	win, err := s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InvalidateAuthorizeCodeSession(win, "code1"); err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	go func() {
		lose, err := s.BeginTX(ctx)
		if err != nil {
			lost <- err
			return
		}
		err = s.InvalidateAuthorizeCodeSession(lose, "code1")
		_ = s.Rollback(lose)
		if errors.Is(err, storage.ErrInvalidatedAuthorizeCode) {
			_, err = s.GetReplayRecord(ctx, "c:code1")
		}
		lost <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the loser reach the row
	if _, err := s.PutReplayRecord(win, replayRecord("c:code1", "grant-1", "c1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(win); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if err != nil {
			t.Fatalf("loser: %v, want ErrInvalidatedAuthorizeCode and then the winner's record", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loser did not finish")
	}
}

// testGrantActive: a grant with an active refresh token is active; after
// rotation to a new active token still; after revocation not.
func testGrantActive(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	req := newRequest("c1", "grant-1")
	if ok, err := s.GrantActive(ctx, "grant-1"); ok || err != nil {
		t.Fatalf("GrantActive of a grant without tokens = %v, %v", ok, err)
	}
	if err := s.CreateRefreshTokenSession(ctx, "rt1", "at1", req); err != nil {
		t.Fatal(err)
	}
	if err := s.RotateRefreshToken(ctx, "grant-1", "rt1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.GrantActive(ctx, "grant-1"); ok || err != nil {
		t.Fatalf("GrantActive with its only token rotated = %v, %v", ok, err)
	}
	if err := s.CreateRefreshTokenSession(ctx, "rt2", "at2", req); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.GrantActive(ctx, "grant-1"); !ok || err != nil {
		t.Fatalf("GrantActive after rotation = %v, %v", ok, err)
	}
	if err := s.RevokeRefreshToken(ctx, "grant-1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.GrantActive(ctx, "grant-1"); ok || err != nil {
		t.Fatalf("GrantActive after revocation = %v, %v", ok, err)
	}
}

// testDeferredTx: in a transaction from BeginDeferredTX, queued token
// writes and a replay record commit together; a failing queued write fails
// the transaction and leaves nothing; a rollback leaves nothing.
func testDeferredTx(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	req := newRequest("c1", "grant-1")
	if err := s.CreatePKCERequestSession(ctx, "code1", req); err != nil {
		t.Fatal(err)
	}
	tctx, err := s.BeginDeferredTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAccessTokenSession(tctx, "at1", req); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRefreshTokenSession(tctx, "rt1", "at1", req); err != nil {
		t.Fatal(err)
	}
	_ = s.DeletePKCERequestSession(tctx, "code1")
	if _, err := s.PutReplayRecord(tctx, replayRecord("c:code1", "grant-1", "c1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(tctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAccessTokenSession(ctx, "at1", &fosite.DefaultSession{}); err != nil {
		t.Errorf("access token after commit: %v", err)
	}
	if _, err := s.GetRefreshTokenSession(ctx, "rt1", &fosite.DefaultSession{}); err != nil {
		t.Errorf("refresh token after commit: %v", err)
	}
	if _, err := s.GetPKCERequestSession(ctx, "code1", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("PKCE session after commit: %v, want ErrNotFound", err)
	}
	if _, err := s.GetReplayRecord(ctx, "c:code1"); err != nil {
		t.Errorf("replay record after commit: %v", err)
	}

	// A queued write that fails (a taken signature) fails the
	// transaction, whoever sends it, and nothing of it stays.
	for _, withRecord := range []bool{false, true} {
		tctx, err = s.BeginDeferredTX(ctx)
		if err != nil {
			t.Fatal(err)
		}
		failed := s.CreateAccessTokenSession(tctx, "at-new", req) != nil
		failed = s.CreateAccessTokenSession(tctx, "at1", req) != nil || failed
		if withRecord {
			_, perr := s.PutReplayRecord(tctx, replayRecord("c:code2", "grant-1", "c1"))
			failed = perr != nil || failed
		}
		if failed {
			// The error came at the call: the caller rolls back.
			_ = s.Rollback(tctx)
		} else if err := s.Commit(tctx); err == nil {
			t.Fatalf("a transaction with a duplicate access token committed (record %v)", withRecord)
		}
		if _, err := s.GetAccessTokenSession(ctx, "at-new", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("a write of a failed transaction stayed (record %v): %v", withRecord, err)
		}
		if _, err := s.GetReplayRecord(ctx, "c:code2"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("the replay record of a failed transaction stayed: %v", err)
		}
	}

	tctx, err = s.BeginDeferredTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAccessTokenSession(tctx, "at-rolled-back", req); err != nil {
		t.Fatal(err)
	}
	if err := s.Rollback(tctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAccessTokenSession(ctx, "at-rolled-back", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a rolled-back deferred write stayed: %v", err)
	}
}

// testDeferredRedeem: a whole exchange in a deferred transaction (the code
// read, its redemption, the tokens, the PKCE session's deletion, the
// record, committed by CommitWithReplayRecord) commits together; with a
// failing write, nothing of it does and the code stays unused; a second
// redemption of a redeemed code is refused.
func testDeferredRedeem(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	req := newRequest("c1", "grant-1")
	for _, sig := range []string{"code1", "code2"} {
		if err := s.CreateAuthorizeCodeSession(ctx, sig, req); err != nil {
			t.Fatal(err)
		}
		if err := s.CreatePKCERequestSession(ctx, sig, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateAccessTokenSession(ctx, "at-taken", req); err != nil {
		t.Fatal(err)
	}
	exchange := func(sig, access string) error {
		tctx, err := s.BeginDeferredTX(ctx)
		if err != nil {
			return err
		}
		rec, cerr := s.GetAuthorizeCodeRecord(tctx, sig)
		if cerr == nil && !rec.Active {
			cerr = storage.ErrInvalidatedAuthorizeCode
		}
		if cerr == nil {
			cerr = s.InvalidateAuthorizeCodeSession(tctx, sig)
		}
		if cerr == nil {
			cerr = s.CreateAccessTokenSession(tctx, access, req)
		}
		if cerr == nil {
			_ = s.DeletePKCERequestSession(tctx, sig)
			_, cerr = s.CommitWithReplayRecord(tctx, replayRecord("c:"+sig, "grant-"+sig, "c1"))
			return cerr
		}
		_ = s.Rollback(tctx)
		return cerr
	}
	if err := exchange("code1", "at-1"); err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if _, err := s.GetAuthorizeCodeSession(ctx, "code1", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrInvalidatedAuthorizeCode) {
		t.Errorf("code after the exchange: %v, want ErrInvalidatedAuthorizeCode", err)
	}
	if _, err := s.GetAccessTokenSession(ctx, "at-1", &fosite.DefaultSession{}); err != nil {
		t.Errorf("access token after the exchange: %v", err)
	}
	if _, err := s.GetReplayRecord(ctx, "c:code1"); err != nil {
		t.Errorf("replay record after the exchange: %v", err)
	}
	if err := exchange("code1", "at-again"); !errors.Is(err, storage.ErrInvalidatedAuthorizeCode) {
		t.Errorf("second exchange of a code: %v, want ErrInvalidatedAuthorizeCode", err)
	}
	// A taken access token signature fails the commit: the code stays
	// unused, nothing is stored.
	if err := exchange("code2", "at-taken"); err == nil {
		t.Fatal("an exchange with a failing write committed")
	}
	if _, err := s.GetAuthorizeCodeSession(ctx, "code2", &fosite.DefaultSession{}); err != nil {
		t.Errorf("code after a failed exchange: %v, want active", err)
	}
	if _, err := s.GetReplayRecord(ctx, "c:code2"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("replay record of a failed exchange: %v, want ErrNotFound", err)
	}
	if _, err := s.GetPKCERequestSession(ctx, "code2", &fosite.DefaultSession{}); err != nil {
		t.Errorf("PKCE session after a failed exchange: %v, want present", err)
	}
	if err := exchange("code2", "at-2"); err != nil {
		t.Errorf("the code after a failed exchange does not redeem: %v", err)
	}
}

// testCodeRecord: GetAuthorizeCodeRecord returns the code as stored, with
// its client, active or redeemed; a missing code is ErrNotFound.
func testCodeRecord(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	req := newRequest("c1", "grant-1")
	if err := s.CreateAuthorizeCodeSession(ctx, "code1", req); err != nil {
		t.Fatal(err)
	}
	rc, err := s.GetAuthorizeCodeRecord(ctx, "code1")
	if err != nil || !rc.Active || rc.Record.RequestID != "grant-1" || rc.Client.GetID() != "c1" || string(rc.Record.Session) == "" {
		t.Fatalf("record of an active code: %+v %v", rc, err)
	}
	decoded, err := rc.Record.Decode(rc.Client, &fosite.DefaultSession{})
	if err != nil || decoded.GetID() != "grant-1" || decoded.GetRequestForm().Get("redirect_uri") != req.GetRequestForm().Get("redirect_uri") {
		t.Fatalf("decoded record: %v %v", decoded, err)
	}
	if _, err := s.GetAuthorizeCodeRecord(ctx, "missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("record of a missing code: %v, want ErrNotFound", err)
	}
	if err := s.InvalidateAuthorizeCodeSession(ctx, "code1"); err != nil {
		t.Fatal(err)
	}
	rc, err = s.GetAuthorizeCodeRecord(ctx, "code1")
	if err != nil || rc.Active || rc.Record.RequestID != "grant-1" {
		t.Fatalf("record of a redeemed code: %+v %v, want inactive", rc, err)
	}
}

// testReplayRecordDeleteEnded: DeleteEndedReplayRecord deletes a record
// whose window ended and leaves one still open; the key is then free.
func testReplayRecordDeleteEnded(t *testing.T, s Store) {
	ctx := t.Context()
	mustClient(t, s, "c1")
	rec := replayRecord("a:step", "as:1:0", "c1")
	if _, err := s.PutReplayRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEndedReplayRecord(ctx, rec.Key, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetReplayRecord(ctx, rec.Key); err != nil {
		t.Fatalf("open record deleted: %v", err)
	}
	if err := s.DeleteEndedReplayRecord(ctx, rec.Key, rec.WindowEnd.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetReplayRecord(ctx, rec.Key); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ended record: %v, want ErrNotFound", err)
	}
	if err := s.DeleteEndedReplayRecord(ctx, "a:missing", time.Now()); err != nil {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := s.PutReplayRecord(ctx, rec); err != nil {
		t.Fatalf("key not free: %v", err)
	}
}
