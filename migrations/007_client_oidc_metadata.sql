-- OpenID Connect client metadata (issue 12 item 8):
-- post_logout_redirect_uris (RP-Initiated Logout 1.0 §3.1), matched
-- exactly; id_token_signed_response_alg (Dynamic Client Registration 1.0
-- §2), '' meaning RS256. Existing clients get neither: no logout redirect,
-- RS256 ID tokens.

alter table clients
    add column post_logout_redirect_uris text[] not null default '{}',
    add column id_token_signed_response_alg text not null default ''
        check (id_token_signed_response_alg in ('', 'RS256', 'ES256'));

---- create above / drop below ----

alter table clients
    drop column post_logout_redirect_uris,
    drop column id_token_signed_response_alg;
