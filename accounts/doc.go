// Package accounts is self-service for people: sign up and verify an
// address, recover a password, change the address, delete the account
// (issue 26). It is a service: it knows no HTTP (package accountweb is its
// pages) and sends mail only through the outbox (package mail), written in
// the transaction of the state change that needs it.
//
// Each step that sends a code is a storage.AccountFlow: a keyed hash of
// the 6-digit code and of the link's token, 15 minutes, at most 5 guesses,
// single use (conditional writes). The ID of a sign-up or recovery is a
// keyed hash of its form's one-time token, so a form posted twice writes
// one flow and one message. A sign-up is a flow, not a user, until its
// address is verified; it reserves no name.
//
// No answer tells whether an account exists: a sign-up with an address
// that has an account answers as a new one does (the owner gets a note
// instead of a code), and recovery answers the same for any address.
package accounts
