-- Second factors (issue 27): TOTP (RFC 6238) with its recovery codes, the
-- operator's requirement of a second factor for a user, and a client's
-- (require_mfa client metadata).
--
-- The TOTP secret is stored sealed (AES-256-GCM under a key derived from
-- the system secret, bound to the subject: package totp); last_step is the
-- last accepted 30-second step, moved forward only by a conditional
-- UPDATE, so a code is never accepted twice. A row with confirmed_at null
-- is a set-up in progress (the secret shown, no code typed yet).
create table totp_factors (
    subject      text primary key references users (subject) on delete cascade,
    secret       bytea not null,
    last_step    bigint not null default 0,
    created_at   timestamptz not null,
    confirmed_at timestamptz
);

-- Recovery codes, single use: code_hash is an HMAC of the code under a key
-- derived from the system secret (the codes are random, so a fast keyed
-- hash suffices; a dump without the secret yields nothing usable).
create table recovery_codes (
    subject    text not null references users (subject) on delete cascade,
    code_hash  bytea not null,
    created_at timestamptz not null,
    used_at    timestamptz,
    primary key (subject, code_hash)
);

-- Users an operator requires to have a second factor (authd users
-- require-mfa NAME).
create table mfa_required_users (
    subject    text primary key references users (subject) on delete cascade,
    created_at timestamptz not null
);

alter table clients add column require_mfa boolean not null default false;

---- create above / drop below ----

alter table clients drop column require_mfa;
drop table mfa_required_users;
drop table recovery_codes;
drop table totp_factors;
