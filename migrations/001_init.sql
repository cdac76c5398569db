-- authd initial schema.
--
-- Tokens, codes and PKCE sessions are keyed by their *signature*: the raw
-- code or token is never stored (docs/architecture.md, principle 4). Every token table
-- references clients ON DELETE CASCADE, so deleting a client removes the
-- codes and tokens issued to it in the same statement. clients.id uses the
-- "C" collation so that ListClients pages in byte order, as Go compares.

create table clients (
    id                         text collate "C" primary key,
    secret_hash                bytea,
    name                       text not null default '',
    redirect_uris              text[] not null default '{}',
    grant_types                text[] not null default '{}',
    response_types             text[] not null default '{}',
    scopes                     text[] not null default '{}',
    token_endpoint_auth_method text not null default '',
    client_uri                 text not null default '',
    logo_uri                   text not null default '',
    contacts                   text[] not null default '{}',
    skip_consent               boolean not null default false,
    created_at                 timestamptz not null default now(),
    updated_at                 timestamptz not null default now()
);

create table users (
    username      text primary key,
    password_hash bytea not null,
    created_at    timestamptz not null default now()
);

create table authorize_codes (
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
create index authorize_codes_request_id_idx on authorize_codes (request_id);
create index authorize_codes_client_id_idx on authorize_codes (client_id);
create index authorize_codes_expires_at_idx on authorize_codes (expires_at);

create table access_tokens (
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
create index access_tokens_request_id_idx on access_tokens (request_id);
create index access_tokens_client_id_idx on access_tokens (client_id);
create index access_tokens_expires_at_idx on access_tokens (expires_at);

create table refresh_tokens (
    signature         text primary key,
    access_signature  text not null default '',
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
create index refresh_tokens_request_id_idx on refresh_tokens (request_id);
create index refresh_tokens_client_id_idx on refresh_tokens (client_id);
create index refresh_tokens_expires_at_idx on refresh_tokens (expires_at);

create table pkce_sessions (
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
create index pkce_sessions_request_id_idx on pkce_sessions (request_id);
create index pkce_sessions_client_id_idx on pkce_sessions (client_id);
create index pkce_sessions_expires_at_idx on pkce_sessions (expires_at);

-- JWT IDs of used client assertions (fosite.ClientManager,
-- RFC 7523 §3 replay protection).
create table client_assertion_jwts (
    jti        text primary key,
    expires_at timestamptz not null
);
create index client_assertion_jwts_expires_at_idx on client_assertion_jwts (expires_at);

---- create above / drop below ----

drop table client_assertion_jwts;
drop table pkce_sessions;
drop table refresh_tokens;
drop table access_tokens;
drop table authorize_codes;
drop table users;
drop table clients;
