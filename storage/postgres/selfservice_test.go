package postgres_test

import (
	"testing"

	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
	"github.com/authd/authd/storage/storagetest"
)

func TestSelfServiceConformance(t *testing.T) {
	storagetest.RunSelfService(t, func(t *testing.T) storagetest.SelfServiceStore { return postgres.New(pgtest.New(t)) })
}
