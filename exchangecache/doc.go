// Package exchangecache is the replay cache in front of the token endpoint.
//
// A token exchange that is retried (same authorization code or refresh token,
// same client_id, same redirect_uri, same code_verifier) must receive the
// ORIGINAL token response instead of invalid_grant. The cache makes that
// possible: the first attempt claims an entry, runs the real exchange and
// stores the sealed response for a short replay window; a retry that finds the
// entry waits for it and replays the response.
//
// The package provides:
//
//   - the [Cache] contract (Claim, Lookup, Complete, Release, Wait, Forget),
//     its [Result] and [Outcome] types and sentinel errors;
//   - two implementations: [Redis] (shared between nodes, Cluster-safe) and
//     [Memory] (in-process, for tests and single-node development);
//   - sealing of cached responses ([Seal], [Open]) and the request
//     [Fingerprint] helper;
//   - the conformance suite in exchangecache/exchangecachetest and a Redis
//     test helper in exchangecache/redistest.
//
// # Protocol
//
// The caller (the OAuth layer) uses the cache like this:
//
//  1. Claim(key, fingerprint, inflightTTL). Claimed: run the normal exchange;
//     on success Complete(key, owner, sealed, replayTTL), on failure
//     Release(key, owner). Completed: authenticate the client, Open the sealed
//     response and return it. InFlight: Wait, then act on its result (Absent
//     means "claim again"). Mismatch: this is code reuse; let the OAuth layer
//     answer invalid_grant and call Forget(key).
//  2. Any non-nil error means the cache could not answer. The caller must fail
//     open: proceed with the plain exchange as if no cache existed.
//
// # What this package must never do
//
//   - Store a raw authorization code, refresh token or code_verifier. The key
//     is the code's or refresh token's signature; the fingerprint is a hash
//     (see [Fingerprint]).
//   - Store an unsealed token response. Only the output of [Seal], which is
//     useless without the server secret AND the verifier or refresh token the
//     client presents, is given to [Cache.Complete].
//   - Be a source of truth. Whether a code was already redeemed is decided by
//     the database; an entry that is missing, expired or evicted only costs a
//     retry its replay. Nothing here may ever cause a token to be issued twice.
package exchangecache
