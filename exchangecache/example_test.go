package exchangecache_test

import (
	"context"
	"fmt"
	"time"

	"github.com/authd/authd/exchangecache"
)

// This example shows the flow the token endpoint follows for an
// authorization_code exchange that is retried.
func Example() {
	ctx := context.Background()
	cache := exchangecache.NewMemory() // exchangecache.NewRedis(client, opts) in production
	secret := []byte("0123456789abcdef0123456789abcdef")

	codeSig := "signature-of-the-code" // never the code itself
	verifier := "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	fp := exchangecache.Fingerprint("client-1", "https://app.example/cb", verifier)

	// First attempt: claim, exchange, seal, complete.
	res, err := cache.Claim(ctx, codeSig, fp, 10*time.Second)
	if err != nil {
		return // fail open: plain exchange without the cache
	}
	fmt.Println("first:", res.Outcome)
	response := []byte(`{"access_token":"at","token_type":"bearer","expires_in":3600}`)
	sealed, _ := exchangecache.Seal(secret, verifier, codeSig, response)
	if err := cache.Complete(ctx, codeSig, res.Owner, sealed, 30*time.Second); err != nil {
		fmt.Println("not cached:", err) // the response is still returned to the client
	}

	// Retry with the same code, client, redirect_uri and verifier.
	res, _ = cache.Claim(ctx, codeSig, fp, 10*time.Second)
	fmt.Println("retry:", res.Outcome)
	replay, err := exchangecache.Open(secret, verifier, codeSig, res.Sealed)
	fmt.Println(string(replay), err)

	// Another verifier for the same code: code reuse.
	other := exchangecache.Fingerprint("client-1", "https://app.example/cb", "attacker-verifier")
	res, _ = cache.Claim(ctx, codeSig, other, 10*time.Second)
	fmt.Println("reuse:", res.Outcome)
	_ = cache.Forget(ctx, codeSig)

	// Output:
	// first: claimed
	// retry: completed
	// {"access_token":"at","token_type":"bearer","expires_in":3600} <nil>
	// reuse: mismatch
}
