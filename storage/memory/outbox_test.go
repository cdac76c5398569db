package memory_test

import (
	"testing"

	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/storagetest"
)

type jobQueueStore struct {
	*memory.Store
	*memory.JobQueue
}

func TestJobQueueConformance(t *testing.T) {
	storagetest.RunJobStore(t, func(t *testing.T) storagetest.JobStore {
		s := memory.New()
		return jobQueueStore{Store: s, JobQueue: s.JobQueue()}
	})
}

func TestSelfServiceConformance(t *testing.T) {
	storagetest.RunSelfService(t, func(t *testing.T) storagetest.SelfServiceStore { return memory.New() })
}
