package oauth

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/authd/authd/exchangecache"
)

const (
	// replayInflightTTL bounds how long a claim survives a crashed node;
	// longer than any sane exchange.
	replayInflightTTL = 10 * time.Second
	// replayClaimRounds bounds claim → wait → released → claim loops.
	replayClaimRounds = 3
)

// replayCache is the replay cache in front of an exchanger
// (docs/architecture.md, "The exchange"): the fast path for a duplicate
// request, and the coordinator of duplicates in flight. It adds exactly
// that; the durable record, reuse detection and revocation belong to the
// exchanger it wraps, which answers whenever the cache cannot (fail open).
//
//  1. Claim the request's key. Claimed: run the exchange, then store its
//     sealed response for the replay window (Complete), or Release the
//     claim on failure so a retry gets a clean shot.
//  2. Completed with the same fingerprint: open the sealed response with
//     the presented code_verifier (or refresh token) and answer it, with no
//     database read. Revocation drops the entry (revocation.Store), so a
//     revoked response is never found here.
//  3. In flight with the same fingerprint: wait (bounded) for the first
//     attempt, then 2, or 1 if it released its claim; still in flight
//     after the wait (slow, or its node died after committing): the
//     exchanger, where PostgreSQL decides (5).
//  4. Another fingerprint, or a response that does not open for this
//     request: let the exchanger decide (reuse, or a failure that
//     consumes nothing); its revocation drops the entry.
//  5. Cache error: the exchanger alone (the durable record answers).
type replayCache struct {
	next      exchanger
	cache     exchangecache.Cache
	sealKey   []byte
	waitLimit time.Duration
	now       func() time.Time
	metrics   *Metrics
	log       *slog.Logger
}

func (c *replayCache) exchange(ctx context.Context, req *tokenRequest) (*answer, error) {
	id := req.id
	if id.key == "" {
		return c.next.exchange(ctx, req) // nothing to replay or supersede
	}
	for round := 0; round < replayClaimRounds; round++ {
		res, err := c.cache.Claim(ctx, id.key, id.fingerprint, replayInflightTTL)
		if err != nil {
			c.failOpen(err)
			break
		}
		if res.Outcome == exchangecache.Claimed {
			return c.claimed(ctx, req, res.Owner)
		}
		if res.Outcome == exchangecache.InFlight {
			c.metrics.replay.WithLabelValues("wait").Inc()
			res, err = c.cache.Wait(ctx, id.key, id.fingerprint, c.waitLimit)
			if err != nil && ctx.Err() != nil {
				return nil, errBusy // the client is gone
			}
			if errors.Is(err, exchangecache.ErrWaitTimeout) {
				// The first attempt is still running, or its node died
				// after its commit and before Complete. PostgreSQL decides:
				// a committed first attempt answers from its record, a
				// running one holds the row lock until it commits, and one
				// that never committed leaves the code to this request.
				c.metrics.replay.WithLabelValues("wait_timeout").Inc()
				return c.run(ctx, req)
			}
			if err != nil {
				c.failOpen(err)
				break
			}
		}
		switch res.Outcome {
		case exchangecache.Completed:
			if a, ok := openReplay(c.sealKey, req, res.Sealed, c.now()); ok {
				c.metrics.replay.WithLabelValues("hit").Inc()
				a.path = pathReplay
				return a, nil
			}
			c.metrics.replay.WithLabelValues("mismatch").Inc()
			return c.run(ctx, req)
		case exchangecache.Mismatch:
			c.metrics.replay.WithLabelValues("mismatch").Inc()
			return c.run(ctx, req)
		case exchangecache.Absent:
			continue // the first attempt released its claim, or it expired
		}
		break
	}
	return c.run(ctx, req)
}

// run is the exchanger without a claim of ours (the cache failed, another
// fingerprint, a wait that timed out). A rotation it answers still
// supersedes the grant's earlier responses: their entries go, whichever
// path answered.
func (c *replayCache) run(ctx context.Context, req *tokenRequest) (*answer, error) {
	a, err := c.next.exchange(ctx, req)
	if err == nil {
		c.forget(ctx, a.superseded)
	}
	return a, err
}

// forget drops the cache entries of superseded responses, detached from
// the request.
func (c *replayCache) forget(ctx context.Context, keys []string) {
	ctx = context.WithoutCancel(ctx)
	for _, k := range keys {
		if err := c.cache.Forget(ctx, k); err != nil {
			c.failOpen(err)
			return
		}
	}
}

// claimed runs the exchange as the owner of the claim and completes it.
func (c *replayCache) claimed(ctx context.Context, req *tokenRequest, owner string) (*answer, error) {
	a, err := c.next.exchange(ctx, req)
	// The cache writes must not be abandoned because the client hung up:
	// that is exactly when the retry is coming.
	cctx := context.WithoutCancel(ctx)
	if err != nil || a.sealed == nil {
		if rerr := c.cache.Release(cctx, req.id.key, owner); rerr != nil && !errors.Is(rerr, exchangecache.ErrNotOwner) {
			c.failOpen(rerr)
		}
		return a, err
	}
	c.forget(cctx, a.superseded)
	if ttl := a.windowEnd.Sub(c.now()); ttl > 0 {
		if err := c.cache.Complete(cctx, req.id.key, owner, a.sealed, ttl); err != nil {
			c.metrics.replay.WithLabelValues("store_failed").Inc()
			if !errors.Is(err, exchangecache.ErrNotOwner) {
				c.failOpen(err)
				_ = c.cache.Release(cctx, req.id.key, owner)
			}
		}
	} else {
		_ = c.cache.Release(cctx, req.id.key, owner)
	}
	return a, nil
}

// failOpen records that the cache could not answer; the request proceeds
// without it. The cache reports its own health in the log (at most one
// warning per 10 s, exchangecache.RedisOptions.Logger); here it is counted.
func (c *replayCache) failOpen(err error) {
	c.metrics.replay.WithLabelValues("fail_open").Inc()
	c.log.Debug("replay cache unavailable; answering from PostgreSQL", "error", err)
}

// openReplay opens a cached answer of either kind of exchange: a token
// response, or a challenge step's reply (key prefix "a:").
func openReplay(sealKey []byte, req *tokenRequest, sealed []byte, now time.Time) (*answer, bool) {
	if req.step != nil {
		return openChallenge(sealKey, req, sealed)
	}
	return openAnswer(sealKey, req, sealed, now)
}
