-- People, not just tokens (issue 11): stable subjects, profile fields,
-- disabled users, server-side browser sessions and remembered consents.
--
-- Every user gets a random, opaque subject (128 bits, hex, as
-- storage.NewSubject makes them) that becomes the primary key; the
-- username is a unique, changeable login name. Before this migration a
-- token's subject was the username: codes and tokens issued to an existing
-- user are rewritten to carry the new subject (the subject column and
-- "subject" in the session JSON; "username" is kept), so they keep
-- working, introspect with the new sub and are revoked with the user.
--
-- Usernames are compared after PRECIS UsernameCaseMapped (RFC 8265 §3.3)
-- from now on. SQL has no PRECIS; lower() is its case-folding step for the
-- ASCII names that exist today, applied where it collides with no other
-- user. A name that stays unprepared (a collision, or one PRECIS refuses)
-- is still stored, cannot sign in until renamed (authd users rename).

alter table users add column subject text;
update users set subject = replace(gen_random_uuid()::text, '-', '');
alter table users alter column subject set not null;
alter table users drop constraint users_pkey;
alter table users add primary key (subject);
alter table users add constraint users_username_key unique (username);
alter table users alter column username type text collate "C";
alter table users add column email text not null default '';
alter table users add column email_verified boolean not null default false;
alter table users add column name text not null default '';
alter table users add column disabled boolean not null default false;
alter table users add column updated_at timestamptz not null default now();

update authorize_codes t set subject = u.subject,
    session = jsonb_set(t.session, '{subject}', to_jsonb(u.subject))
    from users u where t.subject = u.username;
update access_tokens t set subject = u.subject,
    session = jsonb_set(t.session, '{subject}', to_jsonb(u.subject))
    from users u where t.subject = u.username;
update refresh_tokens t set subject = u.subject,
    session = jsonb_set(t.session, '{subject}', to_jsonb(u.subject))
    from users u where t.subject = u.username;
update pkce_sessions t set subject = u.subject,
    session = jsonb_set(t.session, '{subject}', to_jsonb(u.subject))
    from users u where t.subject = u.username;

-- After the tokens carry subjects, so the rewrite above matched the old names.
update users u set username = lower(u.username)
    where u.username <> lower(u.username)
      and not exists (select 1 from users o
                      where lower(o.username) = lower(u.username) and o.subject <> u.subject);

create index authorize_codes_subject_idx on authorize_codes (subject);
create index access_tokens_subject_idx on access_tokens (subject);
create index refresh_tokens_subject_idx on refresh_tokens (subject);

-- Browser sessions. id is the SHA-256 of the cookie's random reference:
-- a database dump yields no usable cookie.
create table sessions (
    id              text primary key,
    subject         text not null references users (subject) on delete cascade,
    auth_time       timestamptz not null,
    amr             text[] not null default '{}',
    idle_expires_at timestamptz not null,
    expires_at      timestamptz not null,
    created_at      timestamptz not null default now(),
    last_seen_at    timestamptz not null default now()
);
create index sessions_subject_idx on sessions (subject);
create index sessions_expires_at_idx on sessions (least(idle_expires_at, expires_at));

-- Remembered consents: subject let client_id have scopes.
create table consents (
    subject    text not null references users (subject) on delete cascade,
    client_id  text collate "C" not null references clients (id) on delete cascade,
    scopes     text[] not null default '{}',
    granted_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (subject, client_id)
);

---- create above / drop below ----

drop table consents;
drop table sessions;
drop index refresh_tokens_subject_idx;
drop index access_tokens_subject_idx;
drop index authorize_codes_subject_idx;
update authorize_codes t set subject = u.username,
    session = jsonb_set(t.session, '{subject}', to_jsonb(u.username))
    from users u where t.subject = u.subject;
update access_tokens t set subject = u.username,
    session = jsonb_set(t.session, '{subject}', to_jsonb(u.username))
    from users u where t.subject = u.subject;
update refresh_tokens t set subject = u.username,
    session = jsonb_set(t.session, '{subject}', to_jsonb(u.username))
    from users u where t.subject = u.subject;
update pkce_sessions t set subject = u.username,
    session = jsonb_set(t.session, '{subject}', to_jsonb(u.username))
    from users u where t.subject = u.subject;
alter table users drop column updated_at;
alter table users drop column disabled;
alter table users drop column name;
alter table users drop column email_verified;
alter table users drop column email;
alter table users drop constraint users_pkey;
alter table users drop constraint users_username_key;
alter table users add primary key (username);
alter table users drop column subject;
