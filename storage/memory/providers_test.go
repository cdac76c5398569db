package memory_test

import (
	"testing"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/storagetest"
)

func TestProviders(t *testing.T) {
	storagetest.RunProviders(t, func(t *testing.T) storage.Store { return memory.New() })
}
