// Package backchannel delivers OpenID Connect Back-Channel Logout 1.0
// logout tokens (docs/architecture.md, "Back-channel logout").
//
// The deliveries are rows of a storage.LogoutStore, one per (session end,
// client, sid), written by the store in the transaction that ends the
// sessions: nothing here decides who is told. A Deliverer claims due rows in
// chunks with a lease (FOR UPDATE SKIP LOCKED, as package jobs claims jobs),
// heartbeats the leases while it POSTs, and records each row's outcome on
// its own with a write conditional on the lease: delivered on a 2xx, queued
// again with back-off otherwise, given up (a metric and an audit event) once
// the row is older than GiveUp. A row whose lease was lost is not written;
// a process that dies leaves its rows to any other Deliverer once their
// leases expire. Each attempt signs a fresh logout token (new iat and exp)
// with the row's jti, so a receiver that acted on an attempt whose answer
// was lost recognises the repeat (§2.6).
//
// The package never runs inside a request: a sign-out only writes rows. It
// knows no HTTP server and no backend; cmd/authd wires it.
package backchannel
