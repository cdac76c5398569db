-- Background jobs, claimed with a lease (docs/architecture.md, "Background work:
-- leases"; storage.JobStore).
--
-- A worker claims a due job with UPDATE … WHERE id = (SELECT … FOR UPDATE
-- SKIP LOCKED LIMIT 1), setting locked_by and lease_until and counting an
-- attempt; it heartbeats lease_until while it works. A running job whose
-- lease_until has passed is claimable again. Every later write is
-- conditional on (locked_by, attempts, lease_until > now()): a worker that
-- lost its lease changes nothing.

create table jobs (
    id           bigint generated always as identity primary key,
    kind         text not null,
    payload      jsonb not null default '{}',
    status       text not null default 'queued'
                 check (status in ('queued', 'running', 'done', 'failed')),
    run_at       timestamptz not null default now(),
    locked_by    text,
    lease_until  timestamptz,
    attempts     integer not null default 0,
    max_attempts integer not null default 5 check (max_attempts > 0),
    last_error   text,
    unique_key   text,
    created_at   timestamptz not null default now(),
    finished_at  timestamptz,
    -- Only a running job has a lease. locked_by stays set after the run: it
    -- names the worker that finished (or last tried) the job.
    check ((status = 'running') = (lease_until is not null)),
    check (status <> 'running' or locked_by is not null)
);

-- The claim scans pending jobs in run_at order: queued ones that are due and
-- running ones (whose run_at has passed too) with an expired lease.
create index jobs_pending_run_at_idx on jobs (run_at) where status in ('queued', 'running');

-- At most one pending run per unique_key: N replicas scheduling the next run
-- of a recurring job (INSERT … ON CONFLICT DO NOTHING) create one row.
create unique index jobs_pending_unique_key_idx on jobs (unique_key)
    where unique_key is not null and status in ('queued', 'running');

-- Retention: the janitor deletes finished jobs by age.
create index jobs_finished_at_idx on jobs (finished_at) where status in ('done', 'failed');

---- create above / drop below ----

drop table jobs;
