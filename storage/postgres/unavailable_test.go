package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/storage"
)

// TestTranslateUnavailable: errors that mean PostgreSQL could not answer
// become storage.ErrUnavailable (the token endpoint's 503); others do not.
func TestTranslateUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "refused"}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection closed under the query", fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), true},
		{"EOF", io.EOF, true},
		{"connection closed before (commit: conn closed)", fmt.Errorf("commit: %w", pgconn.ErrConnClosed), true},
		{"dial error", refused, true},
		{"connection reset", fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{"timeout", context.DeadlineExceeded, true},
		{"server shutting down (57P01)", &pgconn.PgError{Code: "57P01"}, true},
		{"server starting up (57P03)", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure (08006)", &pgconn.PgError{Code: "08006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false},
		{"client went away", context.Canceled, false},
		{"other", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := translate("op", tt.err)
			if got := errors.Is(err, storage.ErrUnavailable); got != tt.want {
				t.Fatalf("translate(%v) = %v: unavailable %v, want %v", tt.err, err, got, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("translate(%v) = %v does not wrap the driver error", tt.err, err)
			}
		})
	}
}

// TestStoreUnreachable: a store whose server refuses connections answers
// storage.ErrUnavailable, fast.
func TestStoreUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	pool, err := pgxpool.New(t.Context(), "postgres://authd@"+addr+"/authd?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool)
	if _, err := s.GetClient(t.Context(), "app"); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("GetClient: %v, want storage.ErrUnavailable", err)
	}
	if _, err := s.BeginTX(t.Context()); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("BeginTX: %v, want storage.ErrUnavailable", err)
	}
}
