package exchangecache

import "time"

// SetMemoryClock replaces m's expiry clock; for tests only.
func SetMemoryClock(m *Memory, now func() time.Time) { m.now = now }

// MemoryLen returns the number of entries m holds, expired or not.
func MemoryLen(m *Memory) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
