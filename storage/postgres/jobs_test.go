package postgres_test

import (
	"testing"

	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
	"github.com/authd/authd/storage/storagetest"
)

func TestJobStore(t *testing.T) {
	storagetest.RunJobStore(t, func(t *testing.T) storagetest.JobStore { return postgres.New(pgtest.New(t)) })
}

func TestCleaner(t *testing.T) {
	storagetest.RunCleaner(t, func(t *testing.T) storagetest.CleanerStore { return postgres.New(pgtest.New(t)) })
}
