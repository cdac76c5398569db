-- DPoP (RFC 9449, issue 13): dpop_bound_access_tokens (§5.2), a client
-- that must present a DPoP proof on every token request. Existing clients
-- get false: DPoP optional, as before.

alter table clients
    add column dpop_bound_access_tokens boolean not null default false;

---- create above / drop below ----

alter table clients
    drop column dpop_bound_access_tokens;
