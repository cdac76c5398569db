-- Idempotency-Keys of admin writes (docs/architecture.md, "Admin writes").
--
-- A row is claimed (INSERT … ON CONFLICT DO NOTHING RETURNING), the work is
-- done and the response stored, all in one transaction: a rolled-back request
-- leaves no row. Nothing here is usable on its own (docs/architecture.md, principle 4):
-- credential and key_hash are keyed hashes of the admin credential and of the
-- raw Idempotency-Key, and response is sealed (AEAD) under a key derived from
-- the raw Idempotency-Key and the system secret. status is NULL while the
-- request is in flight.

create table idempotency_keys (
    credential   bytea not null,
    endpoint     text collate "C" not null,
    key_hash     bytea not null,
    request_hash bytea not null,
    status       integer,
    response     bytea,
    created_at   timestamptz not null,
    expires_at   timestamptz not null,
    primary key (credential, endpoint, key_hash),
    check ((status is null) = (response is null))
);
create index idempotency_keys_expires_at_idx on idempotency_keys (expires_at);

---- create above / drop below ----

drop table idempotency_keys;
