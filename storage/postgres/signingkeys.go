package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

var _ storage.SigningKeyStore = (*Store)(nil)

// ListSigningKeys returns every signing key, oldest generation first.
func (s *Store) ListSigningKeys(ctx context.Context) ([]storage.SigningKey, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT kid, alg, generation, sealed, created_at
		FROM signing_keys ORDER BY generation, alg`)
	if err != nil {
		return nil, translate("list signing keys", err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.SigningKey, error) {
		var k storage.SigningKey
		err := row.Scan(&k.ID, &k.Alg, &k.Generation, &k.Sealed, &k.CreatedAt)
		k.CreatedAt = storage.NormalizeTime(k.CreatedAt)
		return k, err
	})
	if err != nil {
		return nil, translate("list signing keys", err)
	}
	return keys, nil
}

// AddSigningKeys inserts one generation unless it or a later one exists.
// The NOT EXISTS covers a generation added before this statement began;
// ON CONFLICT (alg, generation) a concurrent one: the loser waits on the
// winner's index entry and then inserts nothing.
func (s *Store) AddSigningKeys(ctx context.Context, keys []storage.SigningKey) (bool, error) {
	if len(keys) == 0 {
		return false, fmt.Errorf("postgres: add signing keys: none")
	}
	gen := keys[0].Generation
	var (
		kids, algs []string
		sealed     [][]byte
	)
	for _, k := range keys {
		if k.Generation != gen {
			return false, fmt.Errorf("postgres: add signing keys: mixed generations")
		}
		kids, algs, sealed = append(kids, k.ID), append(algs, k.Alg), append(sealed, k.Sealed)
	}
	tag, err := s.q(ctx).Exec(ctx, `INSERT INTO signing_keys (kid, alg, generation, sealed)
		SELECT k.kid, k.alg, $4, k.sealed FROM unnest($1::text[], $2::text[], $3::bytea[]) AS k(kid, alg, sealed)
		WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE generation >= $4)
		ON CONFLICT (alg, generation) DO NOTHING`, kids, algs, sealed, gen)
	if err != nil {
		return false, translate("add signing keys", err)
	}
	return tag.RowsAffected() == int64(len(keys)), nil
}

// DeleteSigningKeys deletes the keys of generations before before.
func (s *Store) DeleteSigningKeys(ctx context.Context, before int64) (int, error) {
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM signing_keys WHERE generation < $1`, before)
	if err != nil {
		return 0, translate("delete signing keys", err)
	}
	return int(tag.RowsAffected()), nil
}
