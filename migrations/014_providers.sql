-- Upstream OpenID providers (issue 25): Apple, Google or any OpenID
-- provider, to sign in through in the browser or by RFC 8693 token
-- exchange of the provider's ID token.
--
-- sealed holds the provider's client secret (or, for Apple, the PKCS #8
-- private key that signs the client-secret JWT) sealed (AES-256-GCM) under a
-- key derived from the system secret, like signing keys: nothing in this
-- table authenticates to a provider without AUTHD_SECRET. updated_at moves
-- on every change: replicas poll max(updated_at) and the row count to pick
-- changes up within seconds.

create table providers (
    id                     text collate "C" primary key,
    kind                   text not null check (kind in ('oidc', 'apple', 'google')),
    issuer                 text not null,
    client_id              text not null,
    team_id                text not null default '',
    key_id                 text not null default '',
    sealed                 bytea,
    scopes                 text[] not null default '{}',
    display_name           text not null,
    native_audiences       text[] not null default '{}',
    link_by_verified_email boolean not null default false,
    created_at             timestamptz not null default now(),
    updated_at             timestamptz not null default now()
);

-- An identity is the pair (provider issuer, provider sub), linked to one
-- authd user (design note 4): email is a claim, never a key. provider_id
-- names the provider it came through (kept when the provider is deleted, so
-- re-adding it finds the same users).
create table federated_identities (
    issuer      text collate "C" not null,
    sub         text collate "C" not null,
    provider_id text collate "C" not null,
    subject     text not null references users (subject) on delete cascade,
    email       text not null default '',
    created_at  timestamptz not null default now(),
    primary key (issuer, sub)
);
create index federated_identities_subject_idx on federated_identities (subject);

-- Provider ID tokens exchanged natively (RFC 8693): key is "x:" and the
-- SHA-256 of the token, written in the transaction that mints authd's
-- tokens, so a provider ID token signs in once (a concurrent duplicate
-- waits on the key's index entry, then finds it taken and is answered from
-- the replay record). expires_at is the ID token's exp: after it the row is
-- worth nothing and the janitor may drop it.
create table federation_exchanges (
    key        text collate "C" primary key,
    expires_at timestamptz not null
);
create index federation_exchanges_expires_at_idx on federation_exchanges (expires_at);

-- Browser sign-ins in flight at a provider (authd is its relying party):
-- key is the SHA-256 of the state sent to the provider, browser the SHA-256
-- of the random cookie that binds the sign-in to the browser that started
-- it. sealed holds the nonce, the PKCE code_verifier and the authorization
-- request to return to, sealed under a key derived from the system secret
-- and the state: nothing here is usable without the state. A callback
-- takes its row with one conditional DELETE (single-use, and only from the
-- browser that started it).
create table federation_logins (
    key         text collate "C" primary key,
    browser     text collate "C" not null,
    provider_id text collate "C" not null,
    sealed      bytea not null,
    expires_at  timestamptz not null
);
create index federation_logins_expires_at_idx on federation_logins (expires_at);

-- Apple refresh tokens (sealed under the system secret), revoked at Apple
-- when the user is deleted (App Store Review Guideline 5.1.1(v)). The row
-- is its own outbox: deleting the user marks it pending in the same
-- transaction (no foreign key: it outlives the user), and a leased job
-- revokes it at the provider, retrying with back-off until it succeeds,
-- then deletes it.
create table provider_tokens (
    issuer          text collate "C" not null,
    sub             text collate "C" not null,
    provider_id     text collate "C" not null,
    subject         text not null,
    sealed          bytea not null,
    created_at      timestamptz not null default now(),
    pending         boolean not null default false,
    attempts        integer not null default 0,
    next_attempt_at timestamptz,
    primary key (issuer, sub)
);
create index provider_tokens_subject_idx on provider_tokens (subject);
create index provider_tokens_pending_idx on provider_tokens (next_attempt_at) where pending;

---- create above / drop below ----

drop table provider_tokens;
drop table federation_logins;
drop table federation_exchanges;
drop table federated_identities;
drop table providers;
