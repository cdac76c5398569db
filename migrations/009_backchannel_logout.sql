-- OpenID Connect Back-Channel Logout 1.0 (issue 29).
--
-- clients.backchannel_logout_uri (§2.2): where the client's logout tokens
-- are POSTed; '' means none. clients.backchannel_logout_session_required:
-- the client wants a sid in every logout token (authd always sends one).
--
-- sessions.rp_clients lists the clients that were issued a code with
-- openid for the session (so an ID token with its sid). It is written by a
-- conditional UPDATE in the transaction that stores the code, which holds
-- the session's row lock (TouchSession); the statement that ends a
-- session is a DELETE … RETURNING rp_clients, which waits for that lock and
-- so sees every client committed before it. No separate table, no read
-- then write, nothing to clean up: the list goes with its session.
--
-- logout_deliveries is the outbox: one row per (event, client, sid),
-- inserted by the statement that ends the sessions (storage.SessionStore),
-- delivered by workers that claim due rows in chunks with FOR UPDATE SKIP
-- LOCKED and a lease (locked_by, attempts, lease_until) they heartbeat, as
-- jobs are claimed (003_jobs.sql). Every later write is conditional on the
-- lease. jti is the logout token's identity, the same on every attempt.

alter table clients
    add column backchannel_logout_uri text not null default '',
    add column backchannel_logout_session_required boolean not null default false;

alter table sessions
    add column rp_clients text[] not null default '{}';

create table logout_deliveries (
    id           bigint generated always as identity primary key,
    event_id     uuid not null,
    client_id    text not null references clients (id) on delete cascade,
    subject      text not null,
    sid          text not null,
    jti          uuid not null default gen_random_uuid() unique,
    status       text not null default 'pending'
                 check (status in ('pending', 'delivered', 'failed')),
    run_at       timestamptz not null default now(),
    locked_by    text,
    lease_until  timestamptz,
    attempts     integer not null default 0,
    last_error   text,
    created_at   timestamptz not null default now(),
    finished_at  timestamptz,
    unique (event_id, client_id, sid),
    check ((status = 'pending') = (finished_at is null))
);

-- The claim scans pending rows in run_at order.
create index logout_deliveries_pending_idx on logout_deliveries (run_at) where status = 'pending';
-- Retention: the janitor deletes finished rows by age.
create index logout_deliveries_finished_idx on logout_deliveries (finished_at) where status <> 'pending';

---- create above / drop below ----

drop table logout_deliveries;

alter table sessions
    drop column rp_clients;

alter table clients
    drop column backchannel_logout_uri,
    drop column backchannel_logout_session_required;
