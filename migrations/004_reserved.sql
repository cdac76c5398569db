-- Placeholder: number 004 is reserved for the replay-record table of
-- issue 10 (being built on another branch). tern requires consecutive
-- numbers, so this branch carries an empty 004; at merge time it is
-- replaced by the real 004 file, before either is shipped.
select 1;

---- create above / drop below ----

select 1;
