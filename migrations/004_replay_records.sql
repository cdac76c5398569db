-- The durable exchange replay record (docs/architecture.md, "The exchange").
--
-- One row per successful code redemption or refresh rotation, written in the
-- transaction that redeems the code (or rotates the refresh token), so that a
-- retry finds it whenever the redemption committed, whatever happened to
-- Redis or to the node that answered first.
--
-- key is "c:" + the code's signature or "r:" + the refresh token's signature;
-- the code and the token themselves are never stored. fingerprint is
-- exchangecache.Fingerprint (client_id, redirect_uri, SHA-256 of the
-- code_verifier or refresh token), itself a hash. sealed is the token
-- response encrypted (AES-256-GCM) under a key derived from the system
-- secret and the presented code_verifier or refresh token: nothing in this
-- table is usable without them. window_end closes the replay window; the
-- janitor deletes the row after it. revoked is set when the grant is revoked
-- or superseded by a later rotation, so a revoked response is never
-- replayed.

create table replay_records (
    key         text primary key,
    request_id  text not null,
    client_id   text not null references clients (id) on delete cascade,
    subject     text not null default '',
    fingerprint text not null,
    sealed      bytea not null,
    window_end  timestamptz not null,
    revoked     boolean not null default false
);
create index replay_records_request_id_idx on replay_records (request_id);
create index replay_records_client_id_idx on replay_records (client_id);
create index replay_records_window_end_idx on replay_records (window_end);

---- create above / drop below ----

drop table replay_records;
