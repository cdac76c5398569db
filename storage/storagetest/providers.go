package storagetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authd/authd/storage"
)

// RunProviders is the conformance suite of storage.ProviderStore (issue
// 25): providers, linked identities, consumed subject tokens and browser
// sign-ins in flight. Each case gets a fresh store.
func RunProviders(t *testing.T, newStore func(t *testing.T) storage.Store) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, s storage.Store)
	}{
		{"ProviderCRUD", testProviderCRUD},
		{"LinkOnceConcurrently", testLinkOnce},
		{"ConsumeSubjectTokenOnce", testConsumeOnce},
		{"FederationLoginSingleUse", testFederationLogin},
		{"UnlinkLastWayIn", testUnlinkLastWayIn},
		{"VerifiedEmailUnique", testVerifiedEmail},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newStore(t))
		})
	}
}

func testProviderCRUD(t *testing.T, s storage.Store) {
	ctx := t.Context()
	v0, err := s.ProvidersVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &storage.Provider{ID: "b", Kind: "oidc", Issuer: "https://b.example", ClientID: "c", DisplayName: "B",
		Scopes: []string{"openid"}, NativeAudiences: []string{"app"}, Sealed: []byte{1, 2, 3}}
	if err := s.CreateProvider(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProvider(ctx, p); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := s.CreateProvider(ctx, &storage.Provider{ID: "a", Kind: "apple", Issuer: "https://appleid.apple.com", ClientID: "x", DisplayName: "Apple"}); err != nil {
		t.Fatal(err)
	}
	v1, _ := s.ProvidersVersion(ctx)
	if v1 == v0 {
		t.Fatal("version unchanged by a create")
	}
	got, err := s.GetProvider(ctx, "b")
	if err != nil || got.Issuer != p.Issuer || len(got.Sealed) != 3 || got.NativeAudiences[0] != "app" {
		t.Fatalf("get: %+v %v", got, err)
	}
	list, err := s.ListProviders(ctx, "", 1)
	if err != nil || len(list) != 1 || list[0].ID != "a" {
		t.Fatalf("list page: %v %v", list, err)
	}
	if list, _ := s.ListProviders(ctx, "a", 0); len(list) != 1 || list[0].ID != "b" {
		t.Fatalf("list after a: %v", list)
	}
	p.DisplayName = "B2"
	if err := s.UpdateProvider(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetProvider(ctx, "b"); got.DisplayName != "B2" {
		t.Fatal("update lost")
	}
	if err := s.DeleteProvider(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	v2, _ := s.ProvidersVersion(ctx)
	if v2 == v1 {
		t.Fatal("version unchanged by a delete")
	}
	for _, err := range []error{s.DeleteProvider(ctx, "b"), s.UpdateProvider(ctx, p)} {
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("missing provider: %v", err)
		}
	}
	if _, err := s.GetProvider(ctx, "b"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
}

func newFedUser(t *testing.T, s storage.Store, name string, password bool) *storage.User {
	t.Helper()
	u := &storage.User{Username: name, PasswordHash: []byte{}}
	if password {
		u.PasswordHash = []byte("hash")
	}
	if err := s.CreateUser(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// Of concurrent links of one (issuer, sub), exactly one inserts.
func testLinkOnce(t *testing.T, s storage.Store) {
	u := newFedUser(t, s, "link", false)
	var wins atomic.Int32
	noErr(t, "concurrent links", errors.Join(race(t, s, func(ctx context.Context) error {
		ok, err := s.LinkFederatedIdentity(ctx, &storage.FederatedIdentity{Issuer: "https://i", Sub: "s", ProviderID: "p", Subject: u.Subject})
		if ok {
			wins.Add(1)
		}
		return err
	})...))
	if wins.Load() != 1 {
		t.Fatalf("%d links inserted", wins.Load())
	}
	if l, err := s.GetFederatedIdentity(t.Context(), "https://i", "s"); err != nil || l.Subject != u.Subject {
		t.Fatalf("link: %v %v", l, err)
	}
}

// Of concurrent consumptions of one subject token, each in a transaction
// that commits, exactly one is first; one that rolls back frees the key.
func testConsumeOnce(t *testing.T, s storage.Store) {
	exp := time.Now().Add(time.Hour)
	ctx, _ := s.BeginTX(t.Context())
	if ok, err := s.ConsumeSubjectToken(ctx, "x:rolled-back", exp); err != nil || !ok {
		t.Fatalf("first: %v %v", ok, err)
	}
	_ = s.Rollback(ctx)
	var wins atomic.Int32
	noErr(t, "concurrent consumptions", errors.Join(race(t, s, func(ctx context.Context) error {
		ok, err := s.ConsumeSubjectToken(ctx, "x:rolled-back", exp)
		if ok {
			wins.Add(1)
		}
		return err
	})...))
	if wins.Load() != 1 {
		t.Fatalf("%d consumptions were first", wins.Load())
	}
}

func testFederationLogin(t *testing.T, s storage.Store) {
	ctx := t.Context()
	now := time.Now()
	l := &storage.FederationLogin{Key: "fl:1", Browser: "b1", ProviderID: "p", Sealed: []byte("sealed"), ExpiresAt: now.Add(time.Minute)}
	if err := s.CreateFederationLogin(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeFederationLogin(ctx, "fl:1", "other-browser", now); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another browser: %v", err)
	}
	got, err := s.TakeFederationLogin(ctx, "fl:1", "b1", now)
	if err != nil || string(got.Sealed) != "sealed" || got.ProviderID != "p" {
		t.Fatalf("take: %v %v", got, err)
	}
	if _, err := s.TakeFederationLogin(ctx, "fl:1", "b1", now); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("taken twice: %v", err)
	}
	_ = s.CreateFederationLogin(ctx, &storage.FederationLogin{Key: "fl:2", Browser: "b1", ProviderID: "p", Sealed: []byte("x"), ExpiresAt: now.Add(-time.Second)})
	if _, err := s.TakeFederationLogin(ctx, "fl:2", "b1", now); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired: %v", err)
	}
}

func testUnlinkLastWayIn(t *testing.T, s storage.Store) {
	ctx := t.Context()
	u := newFedUser(t, s, "only-links", false)
	for _, sub := range []string{"s1", "s2"} {
		if _, err := s.LinkFederatedIdentity(ctx, &storage.FederatedIdentity{Issuer: "https://i", Sub: sub, ProviderID: "p", Subject: u.Subject}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.UnlinkFederatedIdentity(ctx, u.Subject, "https://i", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := s.UnlinkFederatedIdentity(ctx, u.Subject, "https://i", "s2"); !errors.Is(err, storage.ErrLastWayIn) {
		t.Fatalf("last way in: %v", err)
	}
	if links, _ := s.ListFederatedIdentities(ctx, u.Subject); len(links) != 1 {
		t.Fatalf("links: %v", links)
	}
	if err := s.UnlinkFederatedIdentity(ctx, u.Subject, "https://i", "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing link: %v", err)
	}
	pw := newFedUser(t, s, "with-password", true)
	if _, err := s.LinkFederatedIdentity(ctx, &storage.FederatedIdentity{Issuer: "https://i", Sub: "s3", ProviderID: "p", Subject: pw.Subject}); err != nil {
		t.Fatal(err)
	}
	if err := s.UnlinkFederatedIdentity(ctx, pw.Subject, "https://i", "s3"); err != nil {
		t.Fatalf("a user with a password: %v", err)
	}
}

func testVerifiedEmail(t *testing.T, s storage.Store) {
	ctx := t.Context()
	for i, v := range []bool{true, false} {
		u := &storage.User{Username: []string{"v1", "u1"}[i], PasswordHash: []byte{}, Email: "Mail@Example.com", EmailVerified: v}
		if err := s.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if u, err := s.GetUserByVerifiedEmail(ctx, "mail@example.com"); err != nil || u.Username != "v1" {
		t.Fatalf("verified: %v %v", u, err)
	}
	if err := s.CreateUser(ctx, &storage.User{Username: "v2", PasswordHash: []byte{}, Email: "mail@example.com", EmailVerified: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUserByVerifiedEmail(ctx, "mail@example.com"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("two verified users: %v", err)
	}
}
