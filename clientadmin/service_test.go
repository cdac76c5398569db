package clientadmin_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/internal/importcheck"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

const secret = "clientadmin-test-secret-0123456789-0123456789"

// stores are the backends the service runs on.
func stores(t *testing.T) map[string]clientadmin.Store {
	return map[string]clientadmin.Store{
		"memory":   memory.New(),
		"postgres": postgres.New(pgtest.New(t)),
	}
}

// auditLog collects audit events.
type auditLog struct {
	mu     sync.Mutex
	events []clientadmin.AuditEvent
}

func (a *auditLog) record(_ context.Context, e clientadmin.AuditEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, e)
}

// TestServiceTypedErrors: every operation answers with a typed result or
// an error that errors.Is the sentinel of its kind, and writes one audit
// event.
func TestServiceTypedErrors(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var audit auditLog
			svc, err := clientadmin.New(clientadmin.Config{Secret: []byte(secret), Store: store, Audit: audit.record})
			if err != nil {
				t.Fatal(err)
			}
			cli := svc.LocalCaller("test")
			web := clientadmin.ClientMetadata{ClientName: "Web", RedirectURIs: []string{"https://app.example/cb"}}

			first, err := svc.Create(ctx, cli, "key-1", web)
			if err != nil || first.Client.ClientID == "" || first.Client.ClientSecret == "" || first.Replayed {
				t.Fatalf("Create: %+v %v", first, err)
			}
			again, err := svc.Create(ctx, cli, "key-1", web)
			if err != nil || !again.Replayed || !bytes.Equal(again.JSON, first.JSON) || again.Client.ClientSecret != first.Client.ClientSecret {
				t.Fatalf("Create retried with its key: %+v %v", again, err)
			}
			id := first.Client.ClientID

			for _, tt := range []struct {
				what string
				err  error
				want *clientadmin.Error
			}{
				{"localhost redirect", second(svc.Create(ctx, cli, "", clientadmin.ClientMetadata{RedirectURIs: []string{"http://localhost/cb"}})), clientadmin.ErrInvalidRedirectURI},
				{"bad grant", second(svc.Create(ctx, cli, "", clientadmin.ClientMetadata{RedirectURIs: []string{"https://a.example/cb"}, GrantTypes: []string{"password"}})), clientadmin.ErrInvalidMetadata},
				{"key reused", second(svc.Create(ctx, cli, "key-1", clientadmin.ClientMetadata{ClientName: "Other", RedirectURIs: []string{"https://a.example/cb"}})), clientadmin.ErrKeyReused},
				{"bad key", second(svc.Create(ctx, cli, "a key", web)), clientadmin.ErrInvalidRequest},
				{"get unknown", second(svc.Get(ctx, cli, "nope")), clientadmin.ErrNotFound},
				{"update unknown", second(svc.Update(ctx, cli, "nope", "", clientadmin.UpdateRequest{ClientMetadata: web})), clientadmin.ErrNotFound},
				{"update other id", second(svc.Update(ctx, cli, id, "", clientadmin.UpdateRequest{ClientID: "other", ClientMetadata: web})), clientadmin.ErrInvalidMetadata},
				{"rotate unknown", second(svc.RotateSecret(ctx, cli, "nope", "")), clientadmin.ErrNotFound},
				{"delete unknown", svc.Delete(ctx, cli, "nope"), clientadmin.ErrNotFound},
				{"bad limit", second(svc.List(ctx, cli, 1000, "")), clientadmin.ErrInvalidRequest},
				{"bad cursor", second(svc.List(ctx, cli, 0, "bogus")), clientadmin.ErrInvalidRequest},
				{"bad JSON", second(clientadmin.DecodeMetadata([]byte(`{"redirect_uris":["https://a.example/cb"],"bogus":1}`))), clientadmin.ErrInvalidMetadata},
			} {
				var e *clientadmin.Error
				if !errors.Is(tt.err, tt.want) || !errors.As(tt.err, &e) || e.Description == "" {
					t.Errorf("%s: %v, want %s with a description", tt.what, tt.err, tt.want.Code)
				}
				for _, other := range []*clientadmin.Error{clientadmin.ErrNotFound, clientadmin.ErrInvalidMetadata, clientadmin.ErrKeyReused} {
					if other != tt.want && errors.Is(tt.err, other) {
						t.Errorf("%s: %v also matches %s", tt.what, tt.err, other.Code)
					}
				}
			}

			pub, err := svc.Create(ctx, cli, "", clientadmin.ClientMetadata{RedirectURIs: []string{"com.example.app:/cb"}, TokenEndpointAuthMethod: "none"})
			if err != nil || pub.Client.ClientSecret != "" {
				t.Fatalf("public client: %+v %v", pub, err)
			}
			if _, err := svc.RotateSecret(ctx, cli, pub.Client.ClientID, ""); !errors.Is(err, clientadmin.ErrInvalidRequest) {
				t.Errorf("rotating a public client: %v", err)
			}
			rot, err := svc.RotateSecret(ctx, cli, id, "")
			if err != nil || rot.Client.ClientSecret == "" || rot.Client.ClientSecret == first.Client.ClientSecret {
				t.Fatalf("RotateSecret: %+v %v", rot, err)
			}
			got, err := svc.Get(ctx, cli, id)
			if err != nil || got.ClientSecret != "" || got.ClientName != "Web" {
				t.Fatalf("Get: %+v %v", got, err)
			}
			list, err := svc.List(ctx, cli, 1, "")
			if err != nil || len(list.Clients) != 1 || list.NextCursor == "" {
				t.Fatalf("List: %+v %v", list, err)
			}
			if err := svc.Delete(ctx, cli, id); err != nil {
				t.Fatal(err)
			}

			audit.mu.Lock()
			defer audit.mu.Unlock()
			// DecodeMetadata is no operation: every other call is one event.
			if len(audit.events) != 2+11+6 {
				t.Errorf("%d audit events, want %d", len(audit.events), 2+11+6)
			}
			for _, e := range audit.events {
				if e.Who != "local:test" || e.What == "" {
					t.Errorf("event %+v", e)
				}
			}
			if !audit.events[1].Replayed || audit.events[1].ClientID != id {
				t.Errorf("the replay's event: %+v", audit.events[1])
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }

// TestServiceDefaultAuditLog: without an Audit hook, events go to Logger as
// "admin audit", with no secret in them.
func TestServiceDefaultAuditLog(t *testing.T) {
	var buf bytes.Buffer
	svc, err := clientadmin.New(clientadmin.Config{Secret: []byte(secret), Store: memory.New(), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Create(context.Background(), svc.LocalCaller("cli"), "k", clientadmin.ClientMetadata{RedirectURIs: []string{"https://a.example/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	log := buf.String()
	if !strings.Contains(log, `"msg":"admin audit"`) || !strings.Contains(log, `"who":"local:cli"`) || strings.Contains(log, res.Client.ClientSecret) {
		t.Fatalf("audit log: %s", log)
	}
	if _, err := clientadmin.New(clientadmin.Config{Secret: []byte("short"), Store: memory.New()}); !errors.Is(err, clientadmin.ErrConfig) {
		t.Fatalf("short secret: %v", err)
	}
}

// TestNoHTTP: the service imports no net/http (it knows no status code);
// the admin API's adapter lives in package adminapi.
func TestNoHTTP(t *testing.T) { importcheck.NoHTTP(t) }
