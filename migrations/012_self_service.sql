-- Self-service accounts (package accounts): a pending sign-up, password
-- recovery or email change is a row here until its code is used.
--
-- A sign-up is not a user: it reserves no name, and the user is created
-- when the address is verified. The id of a sign-up or recovery is a keyed
-- hash of the form's one-time token, so a form posted twice (double
-- submit, a retry after a timeout) writes one row and one message: the
-- insert is ON CONFLICT (id) DO NOTHING. The code and the link's token are
-- stored as keyed hashes (HMAC under AUTHD_SECRET); attempts bounds the
-- guesses at one code; used_at makes it single-use (a conditional write).

create table account_flows (
    id            text primary key,
    purpose       text not null check (purpose in ('signup', 'recovery', 'email_change')),
    email         text not null,
    subject       text,
    password_hash bytea,
    code_hash     bytea not null,
    link_hash     bytea not null,
    client_id     text not null default '',
    return_to     text not null default '',
    attempts      integer not null default 0,
    expires_at    timestamptz not null,
    used_at       timestamptz,
    created_at    timestamptz not null default now()
);

create index account_flows_expires_at_idx on account_flows (expires_at);
create index account_flows_subject_idx on account_flows (subject) where subject is not null;

-- Sign-up and recovery look users up by address.
create index users_email_lower_idx on users (lower(email));

---- create above / drop below ----

drop index users_email_lower_idx;
drop table account_flows;
