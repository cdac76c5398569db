-- DPoP (RFC 9449) and pushed authorization requests (RFC 9126), issue 13.
--
-- clients.dpop_bound_access_tokens (RFC 9449 §5.2): the client must present
-- a DPoP proof on every token request. clients.require_pushed_authorization_requests
-- (RFC 9126 §6): the client's authorization requests must come by PAR.
-- Existing clients get false for both: as before.
--
-- pushed_requests holds pushed authorization requests under the signature
-- of their request_uri (never the request_uri itself), as authorize_codes
-- holds codes; active turns false, with a conditional UPDATE, when a code
-- is issued from it (single use, RFC 9126 §4).

alter table clients
    add column dpop_bound_access_tokens boolean not null default false,
    add column require_pushed_authorization_requests boolean not null default false;

create table pushed_requests (
    signature         text primary key,
    request_id        text not null,
    client_id         text not null references clients (id) on delete cascade,
    subject           text not null default '',
    requested_at      timestamptz not null,
    expires_at        timestamptz,
    scopes            text[] not null default '{}',
    granted_scopes    text[] not null default '{}',
    audience          text[] not null default '{}',
    granted_audience  text[] not null default '{}',
    form              text not null default '',
    session           jsonb not null,
    active            boolean not null default true
);
create index pushed_requests_client_id_idx on pushed_requests (client_id);
create index pushed_requests_expires_at_idx on pushed_requests (expires_at);

---- create above / drop below ----

drop table pushed_requests;

alter table clients
    drop column dpop_bound_access_tokens,
    drop column require_pushed_authorization_requests;
