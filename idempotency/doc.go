// Package idempotency is the Idempotency-Key engine
// (draft-ietf-httpapi-idempotency-key-header; docs/architecture.md, "Admin
// writes"): a write claims its key, does its work and stores its sealed
// answer in one transaction, so that a retry gets the answer byte for byte,
// a concurrent duplicate is refused without waiting, and a request that
// fails leaves no key behind. The client operations (package clientadmin)
// and the user operations (package identity) run their writes through it,
// and so does any later operation an operator or an app may repeat.
//
// What reaches the database is never usable on its own: the key as a keyed
// hash, the caller's credential as a keyed fingerprint, the request as a
// keyed hash of its canonical JSON (under the raw key too when it carries a
// secret), and the answer sealed under a key derived from the system secret
// and the raw key, which only the caller holds.
//
// It knows no HTTP: it imports no net/http and knows no status code. A
// write names its Outcome; the adapter that serves it over HTTP maps
// outcomes and errors onto answers.
package idempotency
