// Package mail sends authd's mail exactly once, as far as SMTP allows:
// through an outbox (docs/architecture.md, "Mail: the outbox").
//
// A message is a row (storage.MailStore) written by Outbox.Enqueue in the
// transaction of the state change that needs it, together with a job of
// kind "mail" (storage.JobStore). Nothing is sent inside the request: a
// jobs.Worker running Deliverer.Kind claims the job with a lease (FOR UPDATE
// SKIP LOCKED, heartbeat; a worker that lost its lease stops and commits
// nothing), renders the row's template, sends it with its Sender, and marks
// the row sent in a transaction fenced by the lease. A failure is retried
// with Backoff (the first retry within 30 s) until the row's give-up time
// (AUTHD_MAIL_GIVE_UP, 24 h), then given up with a metric and an audit
// event; a permanent refusal (SMTP 5xx) is given up at once.
//
// The one ambiguity SMTP leaves is a server that accepted the message and
// dropped the connection before its answer: the message is then sent again.
// Every attempt carries the same Message-ID, chosen when the row was
// written, so the receiver can recognise the repeat.
//
// What a row carries until it is sent (a code, a link) is sealed under the
// system secret (package secrets) and erased when the row is finished. The
// package never logs a message's data, except LogSender, which "authd dev"
// uses instead of SMTP.
package mail
