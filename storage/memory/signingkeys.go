package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/authd/authd/storage"
)

var _ storage.SigningKeyStore = (*Store)(nil)

// ListSigningKeys returns every signing key, oldest generation first.
func (s *Store) ListSigningKeys(ctx context.Context) ([]storage.SigningKey, error) {
	var out []storage.SigningKey
	s.tx(func() {
		for _, k := range s.signingKeys {
			k.Sealed = slices.Clone(k.Sealed)
			out = append(out, k)
		}
	})
	return out, nil
}

// AddSigningKeys inserts one generation unless it or a later one exists.
func (s *Store) AddSigningKeys(ctx context.Context, keys []storage.SigningKey) (bool, error) {
	if len(keys) == 0 {
		return false, fmt.Errorf("memory: add signing keys: none")
	}
	added := false
	s.tx(func() {
		gen := keys[0].Generation
		if n := len(s.signingKeys); n > 0 && s.signingKeys[n-1].Generation >= gen {
			return
		}
		before := len(s.signingKeys)
		for _, k := range keys {
			k.Sealed = slices.Clone(k.Sealed)
			if k.CreatedAt.IsZero() {
				k.CreatedAt = storage.NormalizeTime(s.now())
			}
			s.signingKeys = append(s.signingKeys, k)
		}
		s.record(ctx, func() { s.signingKeys = s.signingKeys[:before] })
		added = true
	})
	return added, nil
}

// DeleteSigningKeys deletes the keys of generations before before.
func (s *Store) DeleteSigningKeys(ctx context.Context, before int64) (int, error) {
	n := 0
	s.tx(func() {
		old := slices.Clone(s.signingKeys)
		s.signingKeys = slices.DeleteFunc(s.signingKeys, func(k storage.SigningKey) bool { return k.Generation < before })
		n = len(old) - len(s.signingKeys)
		if n > 0 {
			s.record(ctx, func() { s.signingKeys = old })
		}
	})
	return n, nil
}
