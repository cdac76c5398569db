package memory_test

import (
	"testing"

	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/storagetest"
)

func TestCleaner(t *testing.T) {
	storagetest.RunCleaner(t, func(t *testing.T) storagetest.CleanerStore { return memory.New() })
}
