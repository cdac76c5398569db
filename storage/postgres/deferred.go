package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/authd/authd/storage"
)

// writeQueue holds the blind writes of a deferred transaction: statements
// whose result nobody reads before the commit, sent together in one round
// trip (pgx.Batch) by the next PutReplayRecord, or with COMMIT by Commit
// and CommitWithReplayRecord.
type writeQueue struct {
	batch *pgx.Batch
	ops   []queuedOp
	// locked holds the code signatures this transaction read FOR UPDATE
	// and found active: their redemption cannot lose a race (the row lock
	// is ours until the commit), so it is queued too.
	locked map[string]bool
}

// queuedOp names a queued statement for its error, and says whether it
// must have affected exactly one row (errNone otherwise).
type queuedOp struct {
	op      string
	errNone error
}

// BeginDeferredTX starts a transaction for a token exchange
// (storage.Batcher), in which:
//
//   - BEGIN is sent with the first statement, not on its own (lazyTx);
//   - the code is read FOR UPDATE (GetAuthorizeCodeRecord), so its
//     redemption (InvalidateAuthorizeCodeSession) is a blind write;
//   - the blind writes (the redemption, CreateAccessTokenSession,
//     CreateRefreshTokenSession, DeletePKCERequestSession) are queued and go
//     to the server with the next PutReplayRecord, or with COMMIT
//     (Commit, CommitWithReplayRecord).
//
// An authorization code exchange is then two round trips: BEGIN and the
// reads; the writes, the replay record and COMMIT. Reads in the transaction
// do not see queued writes, and a queued write's error is reported by the
// call that sends it.
func (s *Store) BeginDeferredTX(ctx context.Context) (context.Context, error) {
	if s.txFrom(ctx) != nil {
		return s.BeginTX(ctx) // nested: a savepoint, sent at once
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return ctx, translate("begin", err)
	}
	t := ctxTx{pool: s.pool, tx: &lazyTx{conn: conn},
		queue: &writeQueue{batch: &pgx.Batch{}, locked: map[string]bool{}}}
	return context.WithValue(ctx, txKey{}, t), nil
}

// queueFrom returns the write queue of ctx's deferred transaction, or nil.
func (s *Store) queueFrom(ctx context.Context) *writeQueue {
	if t, ok := ctx.Value(txKey{}).(ctxTx); ok && t.pool == s.pool {
		return t.queue
	}
	return nil
}

// enqueue queues a blind write when ctx carries a deferred transaction and
// reports whether it did.
func (s *Store) enqueue(ctx context.Context, op, sql string, args ...any) bool {
	return s.enqueueChecked(ctx, queuedOp{op: op}, sql, args...)
}

// enqueueChecked is enqueue with a row count check (queuedOp.errNone).
func (s *Store) enqueueChecked(ctx context.Context, op queuedOp, sql string, args ...any) bool {
	q := s.queueFrom(ctx)
	if q == nil {
		return false
	}
	if op.errNone != nil {
		// A statement matching no row is no error in PostgreSQL: the
		// COMMIT behind it in the same pipeline would run and commit the
		// other writes. Make "not one row" an error that aborts the
		// transaction (division by zero), so COMMIT is skipped.
		sql = `WITH checked AS (` + sql + ` RETURNING 1) SELECT 1 / (SELECT count(*) FROM checked)`
	}
	q.batch.Queue(sql, args...)
	q.ops = append(q.ops, op)
	return true
}

// flush sends the queued writes of ctx's deferred transaction, if any.
func (s *Store) flush(ctx context.Context) error {
	_, err := s.flushWith(ctx, nil)
	return err
}

// take returns the queued writes (with extra, when set, at the end) and
// empties the queue.
func (q *writeQueue) take(extra *queuedQuery) (*pgx.Batch, []queuedOp) {
	if extra != nil {
		q.batch.Queue(extra.sql, extra.args...)
	}
	batch, ops := q.batch, q.ops
	q.batch, q.ops = &pgx.Batch{}, nil
	return batch, ops
}

// readQueued reads the results of ops and then, when extra is set, the
// rows of extra as strings; it returns the first error.
func readQueued(br pgx.BatchResults, ops []queuedOp, extra *queuedQuery) ([]string, error) {
	var firstErr error
	for _, op := range ops {
		tag, err := br.Exec()
		var pgErr *pgconn.PgError
		if err != nil && op.errNone != nil && errors.As(err, &pgErr) && pgErr.Code == pgerrcode.DivisionByZero && firstErr == nil {
			firstErr = fmt.Errorf("postgres: %s: %w", op.op, op.errNone)
		}
		if err != nil && firstErr == nil {
			firstErr = translate(op.op, err)
		}
		if err == nil && op.errNone != nil && tag.RowsAffected() != 1 && firstErr == nil {
			firstErr = fmt.Errorf("postgres: %s: %w", op.op, op.errNone)
		}
	}
	var out []string
	if extra != nil && firstErr == nil {
		rows, err := br.Query()
		if err == nil {
			out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			firstErr = translate(extra.op, err)
		}
	}
	return out, firstErr
}

// flushWith sends the queued writes and then, when extra is set, one more
// statement whose rows it collects as strings.
func (s *Store) flushWith(ctx context.Context, extra *queuedQuery) ([]string, error) {
	q := s.queueFrom(ctx)
	tx := s.txFrom(ctx)
	if q == nil || tx == nil || (len(q.ops) == 0 && extra == nil) {
		return nil, nil
	}
	batch, ops := q.take(extra)
	br := tx.SendBatch(ctx, batch)
	out, firstErr := readQueued(br, ops, extra)
	if err := br.Close(); err != nil && firstErr == nil {
		firstErr = translate("batch", err)
	}
	return out, firstErr
}

// commitDeferred sends the queued writes, extra (when set) and COMMIT in
// one round trip; on an error the transaction is rolled back.
func (s *Store) commitDeferred(ctx context.Context, lt *lazyTx, q *writeQueue, extra *queuedQuery) ([]string, error) {
	batch, ops := q.take(extra)
	var out []string
	err := lt.commitBatch(ctx, batch, func(br pgx.BatchResults) error {
		var err error
		out, err = readQueued(br, ops, extra)
		return err
	})
	if err != nil {
		return nil, translate("commit", err)
	}
	return out, nil
}

// CommitWithReplayRecord is PutReplayRecord then Commit for ctx's
// transaction, in one round trip in a deferred transaction
// (storage.Batcher): the queued writes, the record and COMMIT.
func (s *Store) CommitWithReplayRecord(ctx context.Context, rec *storage.ReplayRecord) ([]string, error) {
	lt, _ := s.txFrom(ctx).(*lazyTx)
	q := s.queueFrom(ctx)
	if lt == nil || q == nil {
		keys, err := s.PutReplayRecord(ctx, rec)
		if err != nil {
			_ = s.Rollback(ctx)
			return nil, err
		}
		return keys, s.Commit(ctx)
	}
	return s.commitDeferred(ctx, lt, q, putReplayQuery(rec))
}

// queuedQuery is a statement sent at the end of a batch.
type queuedQuery struct {
	op   string
	sql  string
	args []any
}

var _ storage.Batcher = (*Store)(nil)
