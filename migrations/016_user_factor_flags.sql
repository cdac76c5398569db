-- The user's second factors, on the users row.
--
-- Every authorization request with a session reads the session, its user
-- and the user's factors (storage.SessionStore.GetSessionUserConsent: does
-- the decision need a second factor?). Reading the factors as three
-- probes of totp_factors, passkeys and mfa_required_users made that read
-- the largest PostgreSQL cost of a signed-in authorization
-- (docs/benchmarks.md, "issue 23"). These columns hold the same facts on
-- the row the read already joins:
--
--   totp_confirmed   a confirmed TOTP factor exists (totp_factors)
--   passkeys_active  how many of the user's passkeys are not disabled
--   mfa_required     the operator requires a second factor
--
-- They are written by the triggers below, in the statement that changes
-- the factor, so they can never disagree with the tables, whichever code
-- path (or cascade) writes them. The tables stay the source of truth.
-- totp_factors and mfa_required_users have one row per user, so the
-- flag follows that row (writers of one row queue on its lock, and so
-- write the flag in the same order). passkeys has many: the count moves
-- by ±1, which concurrent writers cannot lose (an UPDATE re-reads a row
-- changed while it waited). The WHEN clauses keep the triggers off the
-- hot writes (a passkey's counter, a TOTP step).

alter table users
    add column totp_confirmed boolean not null default false,
    add column passkeys_active integer not null default 0,
    add column mfa_required boolean not null default false;

update users u set
    totp_confirmed = exists (select 1 from totp_factors t where t.subject = u.subject and t.confirmed_at is not null),
    passkeys_active = (select count(*) from passkeys p where p.subject = u.subject and p.disabled_at is null),
    mfa_required = exists (select 1 from mfa_required_users m where m.subject = u.subject);

create function users_totp_confirmed() returns trigger language plpgsql as $$
begin
    if tg_op in ('UPDATE', 'DELETE') then
        update users set totp_confirmed = false where subject = old.subject;
    end if;
    if tg_op in ('INSERT', 'UPDATE') then
        update users set totp_confirmed = new.confirmed_at is not null where subject = new.subject;
    end if;
    return null;
end $$;

create trigger totp_factors_confirmed_insert
    after insert on totp_factors
    for each row when (new.confirmed_at is not null)
    execute function users_totp_confirmed();
create trigger totp_factors_confirmed_update
    after update of confirmed_at, subject on totp_factors
    for each row when ((old.confirmed_at is null) is distinct from (new.confirmed_at is null) or old.subject <> new.subject)
    execute function users_totp_confirmed();
create trigger totp_factors_confirmed_delete
    after delete on totp_factors
    for each row when (old.confirmed_at is not null)
    execute function users_totp_confirmed();

create function users_passkeys_active() returns trigger language plpgsql as $$
begin
    if tg_op in ('UPDATE', 'DELETE') and old.disabled_at is null then
        update users set passkeys_active = passkeys_active - 1 where subject = old.subject;
    end if;
    if tg_op in ('INSERT', 'UPDATE') and new.disabled_at is null then
        update users set passkeys_active = passkeys_active + 1 where subject = new.subject;
    end if;
    return null;
end $$;

create trigger passkeys_active_insert
    after insert on passkeys
    for each row when (new.disabled_at is null)
    execute function users_passkeys_active();
create trigger passkeys_active_update
    after update of disabled_at, subject on passkeys
    for each row when ((old.disabled_at is null) is distinct from (new.disabled_at is null) or old.subject <> new.subject)
    execute function users_passkeys_active();
create trigger passkeys_active_delete
    after delete on passkeys
    for each row when (old.disabled_at is null)
    execute function users_passkeys_active();

create function users_mfa_required() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        update users set mfa_required = false where subject = old.subject;
    else
        update users set mfa_required = true where subject = new.subject;
    end if;
    return null;
end $$;

create trigger mfa_required_users_flag
    after insert or delete on mfa_required_users
    for each row
    execute function users_mfa_required();

---- create above / drop below ----

drop trigger mfa_required_users_flag on mfa_required_users;
drop function users_mfa_required();
drop trigger passkeys_active_delete on passkeys;
drop trigger passkeys_active_update on passkeys;
drop trigger passkeys_active_insert on passkeys;
drop function users_passkeys_active();
drop trigger totp_factors_confirmed_delete on totp_factors;
drop trigger totp_factors_confirmed_update on totp_factors;
drop trigger totp_factors_confirmed_insert on totp_factors;
drop function users_totp_confirmed();
alter table users
    drop column mfa_required,
    drop column passkeys_active,
    drop column totp_confirmed;
