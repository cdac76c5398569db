// Package jobs runs authd's background work (docs/architecture.md, "Background work:
// leases").
//
// Jobs are rows of a storage.JobStore. A Worker claims one due job at a time
// with a lease, heartbeats the lease while the job's Handler runs, and
// records the outcome with writes that are conditional on still holding the
// lease: done, queued again with backoff, or failed for good after its last
// attempt. A running job whose lease expired (its worker died or paused) is
// claimed again by any worker. A worker whose heartbeat finds the lease lost
// cancels its handler and commits nothing; writes a handler makes through
// Job.Tx or Job.Commit are fenced by the lease in the same transaction. Any
// number of workers, in any number of replicas, may share one store.
//
// The janitor (JanitorKinds) is a set of recurring jobs, one per kind of row,
// that delete expired rows in short batches and schedule their own next run;
// the store keeps at most one pending run of each. For a store without a job
// queue (the in-memory store of "authd dev", one process), RunSweeper does the
// same cleanup on a ticker.
//
// The package never decides ownership by reading: "is this job mine?" is
// always a conditional write in the store (docs/architecture.md, principle 1). It knows
// no backend; cmd/authd wires it.
package jobs
