// Package migrations holds authd's PostgreSQL schema as numbered, embedded
// SQL files in tern format (NNN_description.sql, "---- create above / drop
// below ----" separating the up and down parts).
//
// Files are applied in order, one transaction per file, by
// storage/postgres.Migrate (and so by `authd migrate`). A shipped file is
// never edited: every schema change is a new file.
package migrations

import "embed"

// FS holds every migration file (*.sql) in this directory.
//
//go:embed *.sql
var FS embed.FS
