package postgres_test

import (
	"testing"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
	"github.com/authd/authd/storage/storagetest"
)

func TestProviders(t *testing.T) {
	storagetest.RunProviders(t, func(t *testing.T) storage.Store { return postgres.New(pgtest.New(t)) })
}
