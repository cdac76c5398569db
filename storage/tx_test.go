package storage_test

import (
	"context"
	"errors"
	"testing"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestInTx: what f writes is kept when it returns nil and undone when it
// fails, on both backends.
func TestInTx(t *testing.T) {
	for name, st := range map[string]storage.Store{"memory": memory.New(), "postgres": postgres.New(pgtest.New(t))} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			failed := errors.New("f failed")
			undone, kept := &storage.User{Username: "undone", PasswordHash: []byte("x")}, &storage.User{Username: "kept", PasswordHash: []byte("x")}
			err := storage.InTx(ctx, st, func(tx context.Context) error {
				if err := st.CreateUser(tx, undone); err != nil {
					return err
				}
				return failed
			})
			if !errors.Is(err, failed) {
				t.Fatalf("InTx = %v, want f's error", err)
			}
			if undone.Subject == "" {
				t.Fatal("CreateUser gave no subject")
			}
			if _, err := st.GetUserBySubject(ctx, undone.Subject); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("the failed transaction's user: %v, want ErrNotFound", err)
			}
			if err := storage.InTx(ctx, st, func(tx context.Context) error {
				return st.CreateUser(tx, kept)
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.GetUserBySubject(ctx, kept.Subject); err != nil {
				t.Fatalf("the committed user: %v", err)
			}
		})
	}
}
