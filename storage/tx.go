package storage

import (
	"context"

	fositestorage "github.com/ory/fosite/storage"
)

// InTx runs f in one transaction of st: every call f makes with the
// context it is given runs in that transaction, committed if f returns nil
// and rolled back otherwise.
func InTx(ctx context.Context, st fositestorage.Transactional, f func(ctx context.Context) error) (err error) {
	tx, err := st.BeginTX(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = st.Rollback(tx)
		}
	}()
	if err = f(tx); err != nil {
		return err
	}
	return st.Commit(tx)
}
