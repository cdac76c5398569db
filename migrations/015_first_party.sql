-- OAuth 2.0 for First-Party Applications (draft-ietf-oauth-first-party-apps,
-- issue 28): the first_party client metadata and the auth_session of the
-- Authorization Challenge Endpoint.
--
-- Only a client registered first_party may use the endpoint (§4, §10.1).

alter table clients add column first_party boolean not null default false;

-- An auth_session (§5.2.2, §9): one native sign-in in progress. id is the
-- SHA-256 of the handle the app holds (32 random bytes): the handle itself
-- is never stored. It is bound to the client, to the DPoP key of its first
-- request (jkt, '' when none) and to the PKCE code_challenge; params holds
-- the authorization request's other parameters (scope, nonce, acr_values,
-- prompt, redirect_uri) as a form. subject, amr and auth_time are what the
-- user has proven so far. Each step advances it with one conditional
-- write (version moves by one; done ends it); expires_at bounds it
-- (AUTHD_AUTH_SESSION_TTL) and the janitor deletes it after.
create table auth_sessions (
    id             text collate "C" primary key,
    client_id      text not null references clients (id) on delete cascade,
    jkt            text not null default '',
    code_challenge text not null,
    params         text not null default '',
    subject        text not null default '',
    amr            text[] not null default '{}',
    auth_time      timestamptz,
    version        integer not null default 0,
    done           boolean not null default false,
    expires_at     timestamptz not null,
    created_at     timestamptz not null
);
create index auth_sessions_expires_at_idx on auth_sessions (expires_at);

---- create above / drop below ----

drop table auth_sessions;
alter table clients drop column first_party;
