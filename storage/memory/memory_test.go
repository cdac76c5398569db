package memory_test

import (
	"testing"

	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/storagetest"
)

func TestStore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storagetest.Store { return memory.New() })
}

func TestPasskeyStore(t *testing.T) {
	storagetest.RunPasskeys(t, func(t *testing.T) storagetest.PasskeyStore { return memory.New() })
}
