// Package postgres is the PostgreSQL storage.Store, on pgx v5 (pgxpool).
//
// The schema is in package migrations; apply it with Migrate.
//
// Transactions travel in the context: BeginTX puts a pgx.Tx in the returned
// context and every method run with that context uses it; without one, the
// pool is used (one implicit transaction per statement). Transactions use the
// server's default isolation level (READ COMMITTED): single-use operations
// do not rely on isolation but on conditional writes
// (UPDATE … WHERE active RETURNING, DELETE … RETURNING), which PostgreSQL
// serializes on the row lock (docs/architecture.md, principle 1).
//
// Errors are translated at this edge: pgx.ErrNoRows and foreign-key
// violations become storage.ErrNotFound, SQLSTATE 23505 becomes
// storage.ErrAlreadyExists, 40001/40P01 become storage.ErrSerializationFailure,
// and a database that cannot be reached (or a connection that broke) becomes
// storage.ErrUnavailable. The driver error stays wrapped too.
//
// Deleting a client deletes every code, token and PKCE session issued to it
// (ON DELETE CASCADE) in the same statement: they are not merely deactivated
// but gone, so a later Get returns storage.ErrNotFound, and a client
// re-created with the same ID never inherits them.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/pkce"
	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/storage"
)

var (
	_ storage.Store                 = (*Store)(nil)
	_ fosite.Storage                = (*Store)(nil)
	_ fosite.ClientManager          = (*Store)(nil)
	_ oauth2.CoreStorage            = (*Store)(nil)
	_ oauth2.TokenRevocationStorage = (*Store)(nil)
	_ pkce.PKCERequestStorage       = (*Store)(nil)
	_ fositestorage.Transactional   = (*Store)(nil)
)

// Store is a storage.Store on a pgxpool.Pool. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool. The schema must be migrated (see Migrate).
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// querier is what both *pgxpool.Pool and pgx.Tx offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type txKey struct{}

// ctxTx is the transaction carried by a context, tagged with its pool so a
// context of another Store is never mistaken for ours.
type ctxTx struct {
	pool *pgxpool.Pool
	tx   pgx.Tx
	// queue, in a transaction from BeginDeferredTX, holds the blind
	// writes not sent yet (deferred.go).
	queue *writeQueue
}

func (s *Store) txFrom(ctx context.Context) pgx.Tx {
	if t, ok := ctx.Value(txKey{}).(ctxTx); ok && t.pool == s.pool {
		return t.tx
	}
	return nil
}

// q returns the transaction in ctx, or the pool.
func (s *Store) q(ctx context.Context) querier {
	if tx := s.txFrom(ctx); tx != nil {
		return tx
	}
	return s.pool
}

// translate maps driver errors to storage sentinels, wrapping both.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: %s: %w", op, storage.ErrNotFound)
	}
	if unavailable(err) {
		return fmt.Errorf("postgres: %s: %w: %w", op, storage.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgerrcode.UniqueViolation:
			return fmt.Errorf("postgres: %s: %w: %w", op, storage.ErrAlreadyExists, err)
		case pgerrcode.ForeignKeyViolation:
			return fmt.Errorf("postgres: %s: referenced row missing: %w: %w", op, storage.ErrNotFound, err)
		case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected:
			return fmt.Errorf("postgres: %s: %w: %w", op, storage.ErrSerializationFailure, err)
		case pgerrcode.CharacterNotInRepertoire, pgerrcode.UntranslatableCharacter:
			// A key with NUL or invalid UTF-8 (client input such as a
			// garbage token) cannot be stored, so no row has it.
			return fmt.Errorf("postgres: %s: invalid text: %w", op, storage.ErrNotFound)
		}
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// unavailable reports whether err means that PostgreSQL could not be
// reached or the connection broke before an answer: a failed connect, a
// network error or timeout, a connection closed under the query (EOF), or
// the server refusing work while it shuts down, restarts or starts
// (SQLSTATE class 08, 57P01–57P03). A request the client canceled is not
// an outage.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgerrcode.AdminShutdown, pgerrcode.CrashShutdown, pgerrcode.CannotConnectNow:
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	// SafeToRetry: the driver failed before sending anything;
	// ErrConnClosed: the connection was closed by an earlier failure
	// (a COMMIT on it never reached the server).
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
}

// ---- transactions and health ----

// BeginTX starts a transaction and returns a context carrying it. If ctx
// already carries a transaction of this Store, a nested one (a savepoint) is
// started instead. It returns the translated driver error on failure.
func (s *Store) BeginTX(ctx context.Context) (context.Context, error) {
	var (
		tx  pgx.Tx
		err error
	)
	if parent := s.txFrom(ctx); parent != nil {
		tx, err = parent.Begin(ctx)
	} else {
		tx, err = s.pool.Begin(ctx)
	}
	if err != nil {
		return ctx, translate("begin", err)
	}
	return context.WithValue(ctx, txKey{}, ctxTx{pool: s.pool, tx: tx}), nil
}

// Commit commits the transaction in ctx (releases the savepoint, if nested),
// after sending the writes a deferred transaction queued. It returns an
// error if ctx carries no transaction, the error of a queued write (the
// transaction is then rolled back), and storage.ErrSerializationFailure if
// PostgreSQL aborted it for a conflict.
func (s *Store) Commit(ctx context.Context) error {
	tx := s.txFrom(ctx)
	if tx == nil {
		return errors.New("postgres: commit: no transaction in context")
	}
	if lt, ok := tx.(*lazyTx); ok {
		if q := s.queueFrom(ctx); q != nil {
			// A deferred transaction: the queued writes with COMMIT.
			_, err := s.commitDeferred(ctx, lt, q, nil)
			return err
		}
	}
	if err := s.flush(ctx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return translate("commit", tx.Commit(ctx))
}

// Rollback rolls back the transaction in ctx (to the savepoint, if nested).
// Rolling back a transaction that is already finished is a no-op. It returns
// an error if ctx carries no transaction.
func (s *Store) Rollback(ctx context.Context) error {
	tx := s.txFrom(ctx)
	if tx == nil {
		return errors.New("postgres: rollback: no transaction in context")
	}
	// Roll back even if ctx was canceled, so the connection is released
	// cleanly.
	err := tx.Rollback(context.WithoutCancel(ctx))
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return translate("rollback", err)
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return translate("ping", s.pool.Ping(ctx))
}

// ---- helpers ----

// nonNil turns a nil slice into an empty one for NOT NULL text[] columns.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// nullTime maps the zero time to SQL NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
