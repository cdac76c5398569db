package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is the pgx.Tx of a deferred transaction (BeginDeferredTX): its
// BEGIN is not a round trip of its own but travels in front of the
// transaction's first statement (one pgx.Batch, one Sync), and its COMMIT
// travels behind the queued writes (commitBatch). A token exchange is then
// two round trips: BEGIN with the code's read, and the writes with
// COMMIT. A transaction that never sent a statement commits or rolls back
// without a round trip.
//
// Statements in one pipeline before a Sync are one unit in PostgreSQL's
// extended protocol: once BEGIN has run, an error in a later statement
// leaves the transaction aborted (every later statement skipped), exactly
// as if they had been sent one by one; Rollback then ends it.
//
// Nested transactions (savepoints) are not supported in a deferred
// transaction: nothing in a token exchange opens one.
type lazyTx struct {
	conn   *pgxpool.Conn
	begun  bool // BEGIN has been sent
	closed bool // committed or rolled back; conn released
}

var _ pgx.Tx = (*lazyTx)(nil)

var errNestedDeferred = errors.New("postgres: a deferred transaction cannot nest a transaction")

// withBegin returns b with BEGIN in front if the transaction has not begun,
// and marks it begun (the caller sends the result and must read BEGIN's
// result first: see send).
func (t *lazyTx) withBegin(b *pgx.Batch) (*pgx.Batch, bool) {
	if t.begun {
		return b, false
	}
	nb := &pgx.Batch{}
	nb.Queue("BEGIN")
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	t.begun = true
	return nb, true
}

// send sends b (with BEGIN in front when needed) and consumes BEGIN's
// result. On an error the returned results report it.
func (t *lazyTx) send(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	b, withBegin := t.withBegin(b)
	br := t.conn.SendBatch(ctx, b)
	if withBegin {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return errBatchResults{err}
		}
	}
	return br
}

// begin sends BEGIN alone, for the operations that cannot carry it.
func (t *lazyTx) begin(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	t.begun = true
	return nil
}

// Exec runs one statement (after BEGIN, in the same round trip, if the
// transaction has not begun).
func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	if t.begun {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs one query (after BEGIN, in the same round trip, if the
// transaction has not begun). The rows must be closed, as always.
func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	if t.begun {
		return t.conn.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow is Query for one row.
func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return rowOf{rows: rows, err: err}
}

// SendBatch sends b (after BEGIN, in the same round trip, if the
// transaction has not begun).
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.closed {
		return errBatchResults{pgx.ErrTxClosed}
	}
	return t.send(ctx, b)
}

// commitBatch sends b followed by COMMIT (and BEGIN in front if needed) in
// one round trip. read consumes b's results, in order; then COMMIT's result
// is checked. On any error the transaction is rolled back. The connection
// is released either way.
func (t *lazyTx) commitBatch(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if !t.begun && len(b.QueuedQueries) == 0 {
		t.release()
		return nil // nothing was sent: nothing to commit
	}
	nb := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery(nil), b.QueuedQueries...)}
	nb.Queue("COMMIT")
	br := t.send(ctx, nb)
	err := read(br)
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = t.Rollback(context.WithoutCancel(ctx))
		return err
	}
	t.release()
	return nil
}

// Commit commits (nothing to send if no statement was sent).
func (t *lazyTx) Commit(ctx context.Context) error {
	return t.commitBatch(ctx, &pgx.Batch{}, func(pgx.BatchResults) error { return nil })
}

// Rollback rolls back (nothing to send if no statement was sent) and
// releases the connection. Rolling back a finished transaction returns
// pgx.ErrTxClosed.
func (t *lazyTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	var err error
	if t.begun && !t.conn.Conn().IsClosed() {
		_, err = t.conn.Exec(ctx, "ROLLBACK")
	}
	t.release()
	return err
}

// release returns the connection to the pool; one still in a transaction
// (a failed ROLLBACK) is closed by the pool, not reused.
func (t *lazyTx) release() {
	t.closed = true
	t.conn.Release()
}

// Begin would open a savepoint: not supported (errNestedDeferred).
func (t *lazyTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNestedDeferred }

// CopyFrom runs COPY in the transaction.
func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

// LargeObjects is not supported in a deferred transaction (authd stores
// none): the zero value.
func (t *lazyTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Prepare prepares a statement on the transaction's connection.
func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Conn().Prepare(ctx, name, sql)
}

// Conn returns the underlying connection (the transaction begun).
func (t *lazyTx) Conn() *pgx.Conn {
	_ = t.begin(context.Background())
	return t.conn.Conn()
}

// batchRows closes its batch with its rows.
type batchRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closeErr error
	done     bool
}

func (r *batchRows) Close() {
	if r.done {
		return
	}
	r.done = true
	r.Rows.Close()
	r.closeErr = r.br.Close()
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

// rowOf is a pgx.Row over rows, as pgx's own QueryRow.
type rowOf struct {
	rows pgx.Rows
	err  error
}

func (r rowOf) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errBatchResults reports err for every result.
type errBatchResults struct{ err error }

func (e errBatchResults) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errBatchResults) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errBatchResults) QueryRow() pgx.Row                { return rowOf{err: e.err} }
func (e errBatchResults) Close() error                     { return e.err }
func (e errBatchResults) Tx() pgx.Tx                       { return nil }
