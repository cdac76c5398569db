// Package storage is the contract between authd's OAuth layer and its
// persistence backends (storage/postgres and storage/memory).
//
// It declares the domain types (Client, User), the Store interface — composed
// from fosite's storage interfaces plus small interfaces of authd's own — and
// the sentinel errors every backend translates its driver errors into.
//
// The package must never contain protocol logic: the OAuth rules live in
// package oauth. Backends persist, translate errors and guarantee atomicity;
// in particular every "single use" operation is a conditional write that
// reports whether it changed anything (docs/architecture.md, principle 1).
//
// storage/storagetest holds the conformance suite every backend must pass.
package storage
