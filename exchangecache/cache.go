package exchangecache

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Outcome says what a [Cache] found for a key.
type Outcome int

const (
	// OutcomeUnknown is the zero value; no Cache method returns it with a nil
	// error.
	OutcomeUnknown Outcome = iota
	// Claimed means the caller created the entry and owns it: it must run the
	// exchange and then call Complete or Release with [Result.Owner].
	Claimed
	// InFlight means another attempt with the same fingerprint owns the entry
	// and has not finished yet. The caller should Wait.
	InFlight
	// Completed means an attempt with the same fingerprint finished and stored
	// its sealed response, available in [Result.Sealed].
	Completed
	// Mismatch means an entry exists (in flight or completed) whose
	// fingerprint differs from the caller's: a different client, redirect_uri
	// or verifier presented the same code. Treat it as code reuse.
	Mismatch
	// Absent means there is no entry: never claimed, released, expired or
	// forgotten. After Wait it means the first attempt released its claim (or
	// it expired), so the caller may Claim itself.
	Absent
)

// String returns the outcome's name, for logs and metrics labels.
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case InFlight:
		return "in_flight"
	case Completed:
		return "completed"
	case Mismatch:
		return "mismatch"
	case Absent:
		return "absent"
	default:
		return fmt.Sprintf("outcome(%d)", int(o))
	}
}

// Result is the answer of Claim, Lookup and Wait.
type Result struct {
	// Outcome says what was found.
	Outcome Outcome
	// Owner is the claim's owner token; set only when Outcome is Claimed.
	// Pass it to Complete or Release. It is a random, unguessable string.
	Owner string
	// Sealed is the stored sealed response; set only when Outcome is
	// Completed. The caller owns the slice. Decrypt it with [Open].
	Sealed []byte
}

var (
	// ErrNotOwner is returned by Complete and Release when the caller does not
	// hold the claim any more: the entry expired, was released, forgotten,
	// completed already, or re-claimed by someone else. Nothing was changed.
	ErrNotOwner = errors.New("exchangecache: claim not held")
	// ErrWaitTimeout is returned by Wait when the entry was still in flight
	// when the timeout elapsed.
	ErrWaitTimeout = errors.New("exchangecache: wait timed out")
	// ErrInvalidArgument is returned (wrapped) for an empty key, fingerprint
	// or owner, or a non-positive TTL or timeout. It is a programming error
	// in the caller.
	ErrInvalidArgument = errors.New("exchangecache: invalid argument")
)

// Cache is the replay cache contract. Implementations: [Redis] and [Memory];
// both pass exchangecache/exchangecachetest.
//
// Keys and fingerprints are opaque, non-empty strings. The key must be the
// signature of the authorization code or refresh token, never the code or
// token itself; the fingerprint should come from [Fingerprint].
//
// A non-nil error always means "the cache could not answer" (backend down,
// timeout, invalid argument, or one of the documented sentinels); outcomes are
// never reported as errors. Callers fail open on errors.
//
// All methods are safe for concurrent use, including from different processes
// sharing one backend.
type Cache interface {
	// Claim atomically creates an in-flight entry for key if none exists
	// (set-if-absent) and returns Claimed with a fresh owner token. The entry
	// expires after inflightTTL unless completed first; choose it longer than
	// a slow exchange (for example 10 s).
	//
	// If an entry exists, Claim changes nothing and reports it: InFlight or
	// Completed (with Sealed) when its fingerprint equals fingerprint
	// (compared in constant time), Mismatch otherwise. Exactly one of any
	// number of concurrent Claims for an absent key returns Claimed.
	Claim(ctx context.Context, key, fingerprint string, inflightTTL time.Duration) (Result, error)

	// Lookup reports the entry for key without changing it: Absent,
	// InFlight, Completed (with Sealed) or Mismatch, with the same
	// fingerprint rules as Claim. It never returns Claimed.
	Lookup(ctx context.Context, key, fingerprint string) (Result, error)

	// Complete atomically replaces the in-flight entry owned by owner with the
	// completed response sealed (output of [Seal]) and sets its expiry to ttl
	// from now (the replay window, for example 30 s). It returns ErrNotOwner
	// and changes nothing if the entry is absent, completed, or held by
	// another owner. Repeating a successful Complete returns ErrNotOwner.
	Complete(ctx context.Context, key, owner string, sealed []byte, ttl time.Duration) error

	// Release atomically deletes the in-flight entry if owner holds it, so
	// the next attempt can claim it. It returns ErrNotOwner and changes
	// nothing otherwise; in particular it never deletes a completed entry, so
	// a deferred Release after Complete is harmless.
	Release(ctx context.Context, key, owner string) error

	// Wait blocks until the entry for key is no longer in flight, polling
	// every few milliseconds (which works across nodes), for at most timeout.
	// It returns Completed (with Sealed), Mismatch or Absent (the claim was
	// released or expired: the caller may Claim). It returns ErrWaitTimeout if
	// the entry is still in flight after timeout, and the context's error
	// (wrapped) if ctx ends first.
	Wait(ctx context.Context, key, fingerprint string, timeout time.Duration) (Result, error)

	// Forget deletes the entry for key whatever its state or owner. It is
	// used on code reuse so that no later replay returns revoked tokens.
	// Forgetting an absent key is not an error; Forget is safe to repeat.
	Forget(ctx context.Context, key string) error
}

// invalid returns a wrapped ErrInvalidArgument for operation op.
func invalid(op, what string) error {
	return fmt.Errorf("exchangecache: %s: %s: %w", op, what, ErrInvalidArgument)
}

// checkKeyFP validates the arguments shared by Claim, Lookup and Wait.
func checkKeyFP(op, key, fingerprint string) error {
	if key == "" {
		return invalid(op, "empty key")
	}
	if fingerprint == "" {
		return invalid(op, "empty fingerprint")
	}
	return nil
}

// checkTTL validates a TTL or timeout argument.
func checkTTL(op string, d time.Duration) error {
	if d <= 0 {
		return invalid(op, fmt.Sprintf("non-positive duration %v", d))
	}
	return nil
}

// waitPoll calls lookup every interval until it reports something other than
// InFlight, lookup fails, ctx ends, or timeout elapses.
func waitPoll(ctx context.Context, timeout, interval time.Duration, lookup func(context.Context) (Result, error)) (Result, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		res, err := lookup(ctx)
		if err != nil {
			return Result{}, err
		}
		if res.Outcome != InFlight {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return Result{}, fmt.Errorf("exchangecache: wait: %w", ctx.Err())
		case <-deadline.C:
			// One last look, so an entry finished just now is not missed.
			res, err := lookup(ctx)
			if err != nil {
				return Result{}, err
			}
			if res.Outcome != InFlight {
				return res, nil
			}
			return Result{}, ErrWaitTimeout
		case <-tick.C:
		}
	}
}
