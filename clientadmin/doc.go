// Package clientadmin manages OAuth clients: the RFC 7591 metadata rules,
// typed operations (Create, List, Get, Update, Delete, RotateSecret) with
// typed errors (*Error, compared with errors.Is against ErrNotFound,
// ErrInvalidMetadata, …), every write run through the Idempotency-Key engine
// (package idempotency; docs/architecture.md, "Admin writes"), and one
// audit event per operation.
//
// It is a service without HTTP: it imports no net/http and knows no status
// code. The admin API (package adminapi) is a thin adapter that maps its
// errors to RFC 7591 answers; "authd clients" calls it directly and picks
// exit codes from the same errors. Keys it needs are derived from the
// system secret by package secrets.
package clientadmin
