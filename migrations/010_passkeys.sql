-- Passkeys (issue 24): WebAuthn discoverable credentials, and the server
-- side of their ceremonies.
--
-- A credential is addressed by its credential ID (the authenticator's,
-- unique across users: WebAuthn L3 §7.1 step 26 refuses one registered
-- twice). public_key is the COSE key as the authenticator sent it.
-- disabled_at is set when a sign count went backwards (a cloned
-- authenticator, §6.1.1): the credential signs no one in until it is
-- removed. A user without a password has an empty password_hash.
create table passkeys (
    id              bytea primary key,
    subject         text not null references users (subject) on delete cascade,
    public_key      bytea not null,
    sign_count      bigint not null default 0,
    aaguid          bytea not null,
    transports      text[] not null default '{}',
    backup_eligible boolean not null,
    backup_state    boolean not null,
    name            text not null,
    created_at      timestamptz not null,
    last_used_at    timestamptz,
    disabled_at     timestamptz
);
create index passkeys_subject_idx on passkeys (subject);

-- A ceremony's state between its options and its answer, single-use:
-- taken with DELETE … RETURNING. key is the SHA-256 of the challenge;
-- binding the SHA-256 of what ties it to one browser (the page's CSRF
-- token, or an enrolment link).
create table passkey_ceremonies (
    key         bytea primary key,
    kind        text not null,
    subject     text not null default '',
    binding     bytea not null,
    data        bytea not null,
    expires_at  timestamptz not null
);
create index passkey_ceremonies_expires_idx on passkey_ceremonies (expires_at);

-- Single-use enrolment links (authd users passkey-link): the SHA-256 of
-- the link's token.
create table passkey_links (
    token_hash  bytea primary key,
    subject     text not null references users (subject) on delete cascade,
    expires_at  timestamptz not null
);
create index passkey_links_expires_idx on passkey_links (expires_at);

---- create above / drop below ----

drop table passkey_links;
drop table passkey_ceremonies;
drop table passkeys;
