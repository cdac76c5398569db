-- The mail outbox (package mail; docs/architecture.md, "Mail: the outbox").
--
-- A message is a row written in the transaction of the state change that
-- needs it (a sign-up, a reset request, an email change), with a job (kind
-- "mail") that delivers it under the jobs lease. message_id is chosen at
-- insert and sent on every attempt, so a retry after an ambiguous failure
-- (the server took the message, the answer never came) is recognisable as
-- the same message. sealed holds the template's data (a code, a link)
-- sealed under AUTHD_SECRET, and is erased when the row finishes.

create table mail_outbox (
    id          bigint generated always as identity primary key,
    message_id  text not null unique,
    recipient   text not null,
    template    text not null,
    sealed      bytea,
    status      text not null default 'pending'
                check (status in ('pending', 'sent', 'given_up')),
    attempts    integer not null default 0,
    last_error  text not null default '',
    give_up_at  timestamptz not null,
    created_at  timestamptz not null default now(),
    finished_at timestamptz,
    check ((status = 'pending') = (finished_at is null)),
    check (status = 'pending' or sealed is null)
);

-- Retention: finished rows by age.
create index mail_outbox_finished_at_idx on mail_outbox (finished_at) where status <> 'pending';

---- create above / drop below ----

drop table mail_outbox;
