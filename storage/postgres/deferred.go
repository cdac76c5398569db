package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

// writeQueue holds the blind writes of a deferred transaction: statements
// whose result nobody reads before the commit, sent together in one round
// trip (pgx.Batch) by the next PutReplayRecord or by Commit.
type writeQueue struct {
	batch *pgx.Batch
	ops   []string
}

// BeginDeferredTX starts a transaction in which the blind writes of a token
// exchange (CreateAccessTokenSession, CreateRefreshTokenSession,
// DeletePKCERequestSession) are queued instead of sent, and go to the
// server together with PutReplayRecord or Commit: one round trip instead of
// one per row. Reads in the transaction do not see queued writes, and a
// queued write's error is reported by the call that sends it
// (storage.Batcher).
func (s *Store) BeginDeferredTX(ctx context.Context) (context.Context, error) {
	tctx, err := s.BeginTX(ctx)
	if err != nil {
		return tctx, err
	}
	t := tctx.Value(txKey{}).(ctxTx)
	t.queue = &writeQueue{batch: &pgx.Batch{}}
	return context.WithValue(tctx, txKey{}, t), nil
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
	q := s.queueFrom(ctx)
	if q == nil {
		return false
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

// flushWith sends the queued writes and then, when extraSQL is set, one
// more statement whose rows it collects as strings.
func (s *Store) flushWith(ctx context.Context, extra *queuedQuery) ([]string, error) {
	q := s.queueFrom(ctx)
	tx := s.txFrom(ctx)
	if q == nil || tx == nil || (len(q.ops) == 0 && extra == nil) {
		return nil, nil
	}
	if extra != nil {
		q.batch.Queue(extra.sql, extra.args...)
	}
	batch, ops := q.batch, q.ops
	q.batch, q.ops = &pgx.Batch{}, nil
	br := tx.SendBatch(ctx, batch)
	var firstErr error
	for _, op := range ops {
		if _, err := br.Exec(); err != nil && firstErr == nil {
			firstErr = translate(op, err)
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
	if err := br.Close(); err != nil && firstErr == nil {
		firstErr = translate("batch", err)
	}
	return out, firstErr
}

// queuedQuery is a statement sent at the end of a batch.
type queuedQuery struct {
	op   string
	sql  string
	args []any
}

var _ storage.Batcher = (*Store)(nil)
