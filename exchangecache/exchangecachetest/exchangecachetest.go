// Package exchangecachetest is the conformance suite for implementations of
// exchangecache.Cache. Every implementation's tests call [Run]; a behaviour
// the OAuth layer relies on belongs here, not in one backend's tests.
//
// The suite uses real time with short TTLs (100-300 ms) and runs its cases in
// parallel, so it takes well under a few seconds. It never imports a backend.
package exchangecachetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/exchangecache"
)

const (
	key     = "sig-of-code-AbC_123"
	fpA     = "fingerprint-a"
	fpB     = "fingerprint-b"
	long    = 10 * time.Second       // TTL that never expires within a test
	short   = 150 * time.Millisecond // TTL that a test waits out
	expired = 350 * time.Millisecond // sleep that outlasts short
)

var sealed = []byte("sealed-response\x00\xff binary-safe")

// Run runs every conformance case as a parallel subtest of t. newCache must
// return a fresh, empty cache that no other case shares (for Redis: a unique
// key prefix); it may register cleanup with t.Cleanup.
func Run(t *testing.T, newCache func(t *testing.T) exchangecache.Cache) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, c exchangecache.Cache)
	}{
		{"ClaimCompleteLookup", testClaimCompleteLookup},
		{"OwnersAreUnique", testOwnersAreUnique},
		{"Mismatch", testMismatch},
		{"ReleaseThenReclaim", testReleaseThenReclaim},
		{"OwnerCheck", testOwnerCheck},
		{"CompleteAndReleaseAbsent", testCompleteAndReleaseAbsent},
		{"KeysAreIndependent", testKeysAreIndependent},
		{"BinaryValuesRoundTrip", testBinaryValuesRoundTrip},
		{"InFlightTTLExpiry", testInFlightTTLExpiry},
		{"CompletedTTLExpiry", testCompletedTTLExpiry},
		{"CompleteSetsReplayTTL", testCompleteSetsReplayTTL},
		{"WaitCompleted", testWaitCompleted},
		{"WaitReleased", testWaitReleased},
		{"WaitExpired", testWaitExpired},
		{"WaitTimeout", testWaitTimeout},
		{"WaitImmediate", testWaitImmediate},
		{"WaitContextCanceled", testWaitContextCanceled},
		{"Forget", testForget},
		{"InvalidArguments", testInvalidArguments},
		{"ConcurrentClaim", testConcurrentClaim},
		{"ConcurrentClaimMixedFingerprints", testConcurrentClaimMixedFingerprints},
		{"ConcurrentWaiters", testConcurrentWaiters},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, newCache(t))
		})
	}
}

// claim claims key with fp and fails the test unless it is Claimed.
func claim(t *testing.T, c exchangecache.Cache, key, fp string, ttl time.Duration) string {
	t.Helper()
	res, err := c.Claim(t.Context(), key, fp, ttl)
	if err != nil {
		t.Fatalf("Claim(%q): %v", key, err)
	}
	if res.Outcome != exchangecache.Claimed || res.Owner == "" {
		t.Fatalf("Claim(%q) = %v owner %q, want claimed with an owner", key, res.Outcome, res.Owner)
	}
	if res.Sealed != nil {
		t.Fatalf("Claim(%q) returned Sealed on a fresh claim", key)
	}
	return res.Owner
}

// expect checks a Result and its error.
func expect(t *testing.T, what string, res exchangecache.Result, err error, want exchangecache.Outcome, wantSealed []byte) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error %v", what, err)
	}
	if res.Outcome != want {
		t.Fatalf("%s = %v, want %v", what, res.Outcome, want)
	}
	if want != exchangecache.Claimed && res.Owner != "" {
		t.Fatalf("%s: Owner %q set on outcome %v", what, res.Owner, res.Outcome)
	}
	if !bytes.Equal(res.Sealed, wantSealed) {
		t.Fatalf("%s: Sealed = %q, want %q", what, res.Sealed, wantSealed)
	}
}

func lookup(t *testing.T, c exchangecache.Cache, key, fp string, want exchangecache.Outcome, wantSealed []byte) {
	t.Helper()
	res, err := c.Lookup(t.Context(), key, fp)
	expect(t, "Lookup", res, err, want, wantSealed)
}

func testClaimCompleteLookup(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	lookup(t, c, key, fpA, exchangecache.Absent, nil)
	owner := claim(t, c, key, fpA, long)
	lookup(t, c, key, fpA, exchangecache.InFlight, nil)
	res, err := c.Claim(ctx, key, fpA, long)
	expect(t, "second Claim", res, err, exchangecache.InFlight, nil)

	if err := c.Complete(ctx, key, owner, sealed, long); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	lookup(t, c, key, fpA, exchangecache.Completed, sealed)
	res, err = c.Claim(ctx, key, fpA, long)
	expect(t, "Claim after Complete", res, err, exchangecache.Completed, sealed)

	// The returned slice belongs to the caller.
	res.Sealed[0] ^= 0xff
	lookup(t, c, key, fpA, exchangecache.Completed, sealed)
}

func testOwnersAreUnique(t *testing.T, c exchangecache.Cache) {
	seen := map[string]bool{}
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		o := claim(t, c, k, fpA, long)
		if seen[o] {
			t.Fatalf("owner %q handed out twice", o)
		}
		seen[o] = true
	}
}

func testMismatch(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	owner := claim(t, c, key, fpA, long)
	res, err := c.Claim(ctx, key, fpB, long)
	expect(t, "Claim other fingerprint (in flight)", res, err, exchangecache.Mismatch, nil)
	lookup(t, c, key, fpB, exchangecache.Mismatch, nil)

	if err := c.Complete(ctx, key, owner, sealed, long); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// A mismatching caller never sees the sealed bytes.
	res, err = c.Claim(ctx, key, fpB, long)
	expect(t, "Claim other fingerprint (completed)", res, err, exchangecache.Mismatch, nil)
	lookup(t, c, key, fpB, exchangecache.Mismatch, nil)
	// The entry is unchanged for the right fingerprint.
	lookup(t, c, key, fpA, exchangecache.Completed, sealed)
}

func testReleaseThenReclaim(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	first := claim(t, c, key, fpA, long)
	if err := c.Release(ctx, key, first); err != nil {
		t.Fatalf("Release: %v", err)
	}
	lookup(t, c, key, fpA, exchangecache.Absent, nil)
	second := claim(t, c, key, fpA, long)
	if second == first {
		t.Fatal("re-claim reused the released owner token")
	}
	// The first owner no longer holds the claim.
	if err := c.Release(ctx, key, first); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Release by old owner = %v, want ErrNotOwner", err)
	}
	if err := c.Complete(ctx, key, first, sealed, long); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Complete by old owner = %v, want ErrNotOwner", err)
	}
	lookup(t, c, key, fpA, exchangecache.InFlight, nil)
	// After a release, a different fingerprint can claim too.
	if err := c.Release(ctx, key, second); err != nil {
		t.Fatalf("Release: %v", err)
	}
	claim(t, c, key, fpB, long)
}

func testOwnerCheck(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	owner := claim(t, c, key, fpA, long)
	if err := c.Complete(ctx, key, owner+"x", sealed, long); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Complete with wrong owner = %v, want ErrNotOwner", err)
	}
	if err := c.Release(ctx, key, "not-the-owner"); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Release with wrong owner = %v, want ErrNotOwner", err)
	}
	lookup(t, c, key, fpA, exchangecache.InFlight, nil)

	if err := c.Complete(ctx, key, owner, sealed, long); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// Complete is not repeatable and Release never drops a completed entry.
	if err := c.Complete(ctx, key, owner, []byte("other"), long); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("second Complete = %v, want ErrNotOwner", err)
	}
	if err := c.Release(ctx, key, owner); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Release after Complete = %v, want ErrNotOwner", err)
	}
	lookup(t, c, key, fpA, exchangecache.Completed, sealed)
}

func testCompleteAndReleaseAbsent(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	if err := c.Complete(ctx, key, "owner", sealed, long); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Complete on absent key = %v, want ErrNotOwner", err)
	}
	if err := c.Release(ctx, key, "owner"); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Release on absent key = %v, want ErrNotOwner", err)
	}
	lookup(t, c, key, fpA, exchangecache.Absent, nil)
}

func testKeysAreIndependent(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	keys := []string{"k", "k2", "a}b", "{k}", "k:x", "ü/ß"}
	owners := map[string]string{}
	for _, k := range keys {
		owners[k] = claim(t, c, k, fpA, long)
	}
	if err := c.Complete(ctx, "k", owners["k"], sealed, long); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := c.Release(ctx, "{k}", owners["{k}"]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := c.Forget(ctx, "k2"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	// Another key's owner token is useless here.
	if err := c.Complete(ctx, "k:x", owners["a}b"], sealed, long); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Complete with another key's owner = %v, want ErrNotOwner", err)
	}
	lookup(t, c, "k", fpA, exchangecache.Completed, sealed)
	lookup(t, c, "{k}", fpA, exchangecache.Absent, nil)
	lookup(t, c, "k2", fpA, exchangecache.Absent, nil)
	for _, k := range []string{"a}b", "k:x", "ü/ß"} {
		lookup(t, c, k, fpA, exchangecache.InFlight, nil)
	}
}

func testBinaryValuesRoundTrip(t *testing.T, c exchangecache.Cache) {
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(i)
	}
	fp := "\x00fp\xff" + string(big[:64])
	owner := claim(t, c, key, fp, long)
	if err := c.Complete(t.Context(), key, owner, big, long); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	lookup(t, c, key, fp, exchangecache.Completed, big)
	lookup(t, c, key, "\x00fp\xfe"+string(big[:64]), exchangecache.Mismatch, nil)
}

func testInFlightTTLExpiry(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	owner := claim(t, c, key, fpA, short)
	time.Sleep(expired)
	lookup(t, c, key, fpA, exchangecache.Absent, nil)
	if err := c.Complete(ctx, key, owner, sealed, long); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Complete after in-flight expiry = %v, want ErrNotOwner", err)
	}
	second := claim(t, c, key, fpB, long)
	if err := c.Release(ctx, key, owner); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Release by expired owner = %v, want ErrNotOwner", err)
	}
	if err := c.Complete(ctx, key, second, sealed, long); err != nil {
		t.Fatalf("Complete by new owner: %v", err)
	}
}

func testCompletedTTLExpiry(t *testing.T, c exchangecache.Cache) {
	owner := claim(t, c, key, fpA, long)
	if err := c.Complete(t.Context(), key, owner, sealed, short); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	lookup(t, c, key, fpA, exchangecache.Completed, sealed)
	time.Sleep(expired)
	lookup(t, c, key, fpA, exchangecache.Absent, nil)
	claim(t, c, key, fpA, long)
}

func testCompleteSetsReplayTTL(t *testing.T, c exchangecache.Cache) {
	// The in-flight TTL must not cut the replay window short.
	owner := claim(t, c, key, fpA, 250*time.Millisecond)
	if err := c.Complete(t.Context(), key, owner, sealed, long); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	lookup(t, c, key, fpA, exchangecache.Completed, sealed)
}

// later runs f after d in a goroutine and reports its error on the returned
// channel.
func later(d time.Duration, f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() {
		time.Sleep(d)
		ch <- f()
	}()
	return ch
}

func testWaitCompleted(t *testing.T, c exchangecache.Cache) {
	owner := claim(t, c, key, fpA, long)
	done := later(50*time.Millisecond, func() error {
		return c.Complete(context.Background(), key, owner, sealed, long)
	})
	res, err := c.Wait(t.Context(), key, fpA, 5*time.Second)
	expect(t, "Wait", res, err, exchangecache.Completed, sealed)
	if err := <-done; err != nil {
		t.Fatalf("Complete: %v", err)
	}
}

func testWaitReleased(t *testing.T, c exchangecache.Cache) {
	owner := claim(t, c, key, fpA, long)
	done := later(50*time.Millisecond, func() error {
		return c.Release(context.Background(), key, owner)
	})
	res, err := c.Wait(t.Context(), key, fpA, 5*time.Second)
	expect(t, "Wait", res, err, exchangecache.Absent, nil)
	if err := <-done; err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The waiter may now claim.
	claim(t, c, key, fpA, long)
}

func testWaitExpired(t *testing.T, c exchangecache.Cache) {
	claim(t, c, key, fpA, short)
	start := time.Now()
	res, err := c.Wait(t.Context(), key, fpA, 5*time.Second)
	expect(t, "Wait", res, err, exchangecache.Absent, nil)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Wait took %v for a %v claim", d, short)
	}
}

func testWaitTimeout(t *testing.T, c exchangecache.Cache) {
	claim(t, c, key, fpA, long)
	const timeout = 100 * time.Millisecond
	start := time.Now()
	res, err := c.Wait(t.Context(), key, fpA, timeout)
	d := time.Since(start)
	if !errors.Is(err, exchangecache.ErrWaitTimeout) {
		t.Fatalf("Wait = %v, %v; want ErrWaitTimeout", res.Outcome, err)
	}
	if d < timeout || d > timeout+time.Second {
		t.Fatalf("Wait returned after %v, want about %v", d, timeout)
	}
	lookup(t, c, key, fpA, exchangecache.InFlight, nil)
}

func testWaitImmediate(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	res, err := c.Wait(ctx, key, fpA, 5*time.Second)
	expect(t, "Wait on absent key", res, err, exchangecache.Absent, nil)

	claim(t, c, key, fpA, long)
	start := time.Now()
	res, err = c.Wait(ctx, key, fpB, 5*time.Second)
	expect(t, "Wait with other fingerprint", res, err, exchangecache.Mismatch, nil)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Wait on a mismatch took %v, want immediate", d)
	}
}

func testWaitContextCanceled(t *testing.T, c exchangecache.Cache) {
	claim(t, c, key, fpA, long)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Wait(ctx, key, fpA, 5*time.Second)
	if err == nil || errors.Is(err, exchangecache.ErrWaitTimeout) {
		t.Fatalf("Wait with canceled context = %v, want a context error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Wait ignored its context for %v", d)
	}
}

func testForget(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	if err := c.Forget(ctx, key); err != nil {
		t.Fatalf("Forget on absent key: %v", err)
	}
	owner := claim(t, c, key, fpA, long)
	if err := c.Complete(ctx, key, owner, sealed, long); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := c.Forget(ctx, key); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	lookup(t, c, key, fpA, exchangecache.Absent, nil)
	if err := c.Forget(ctx, key); err != nil {
		t.Fatalf("second Forget: %v", err)
	}

	// Forgetting an in-flight entry takes the claim away from its owner.
	owner = claim(t, c, key, fpA, long)
	if err := c.Forget(ctx, key); err != nil {
		t.Fatalf("Forget in flight: %v", err)
	}
	if err := c.Complete(ctx, key, owner, sealed, long); !errors.Is(err, exchangecache.ErrNotOwner) {
		t.Fatalf("Complete after Forget = %v, want ErrNotOwner", err)
	}
	lookup(t, c, key, fpA, exchangecache.Absent, nil)
}

func testInvalidArguments(t *testing.T, c exchangecache.Cache) {
	ctx := t.Context()
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, exchangecache.ErrInvalidArgument) {
			t.Errorf("%s = %v, want ErrInvalidArgument", name, err)
		}
	}
	_, err := c.Claim(ctx, "", fpA, long)
	check("Claim empty key", err)
	_, err = c.Claim(ctx, key, "", long)
	check("Claim empty fingerprint", err)
	_, err = c.Claim(ctx, key, fpA, 0)
	check("Claim zero TTL", err)
	_, err = c.Lookup(ctx, "", fpA)
	check("Lookup empty key", err)
	check("Complete empty owner", c.Complete(ctx, key, "", sealed, long))
	check("Complete zero TTL", c.Complete(ctx, key, "o", sealed, 0))
	check("Release empty owner", c.Release(ctx, key, ""))
	_, err = c.Wait(ctx, key, fpA, 0)
	check("Wait zero timeout", err)
	check("Forget empty key", c.Forget(ctx, ""))
	// Nothing was created.
	lookup(t, c, key, fpA, exchangecache.Absent, nil)
}

// claimAll has n goroutines Claim key at once and returns their results.
func claimAll(t *testing.T, c exchangecache.Cache, n int, fp func(i int) string) []exchangecache.Result {
	t.Helper()
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		res   = make([]exchangecache.Result, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			res[i], errs[i] = c.Claim(t.Context(), key, fp(i), long)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: Claim: %v", i, err)
		}
	}
	return res
}

func testConcurrentClaim(t *testing.T, c exchangecache.Cache) {
	const n = 32
	res := claimAll(t, c, n, func(int) string { return fpA })
	claimed, inFlight := 0, 0
	for _, r := range res {
		switch r.Outcome {
		case exchangecache.Claimed:
			claimed++
		case exchangecache.InFlight:
			inFlight++
		default:
			t.Errorf("unexpected outcome %v", r.Outcome)
		}
	}
	if claimed != 1 || inFlight != n-1 {
		t.Fatalf("%d goroutines: %d claimed, %d in flight; want exactly 1 claimed, %d in flight", n, claimed, inFlight, n-1)
	}
}

func testConcurrentClaimMixedFingerprints(t *testing.T, c exchangecache.Cache) {
	const n = 32
	fp := func(i int) string {
		if i%2 == 0 {
			return fpA
		}
		return fpB
	}
	res := claimAll(t, c, n, fp)
	winner := -1
	for i, r := range res {
		if r.Outcome == exchangecache.Claimed {
			if winner >= 0 {
				t.Fatalf("goroutines %d and %d both claimed", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no goroutine claimed")
	}
	for i, r := range res {
		if i == winner {
			continue
		}
		want := exchangecache.Mismatch
		if fp(i) == fp(winner) {
			want = exchangecache.InFlight
		}
		if r.Outcome != want {
			t.Errorf("goroutine %d (same fingerprint as winner: %v) = %v, want %v", i, fp(i) == fp(winner), r.Outcome, want)
		}
	}
}

func testConcurrentWaiters(t *testing.T, c exchangecache.Cache) {
	const n = 32
	owner := claim(t, c, key, fpA, long)
	var wg sync.WaitGroup
	res := make([]exchangecache.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res[i], errs[i] = c.Wait(t.Context(), key, fpA, 5*time.Second)
		})
	}
	time.Sleep(30 * time.Millisecond)
	if err := c.Complete(t.Context(), key, owner, sealed, long); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	wg.Wait()
	for i := range n {
		expect(t, "Wait", res[i], errs[i], exchangecache.Completed, sealed)
	}
}
