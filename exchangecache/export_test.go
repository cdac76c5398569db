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

// UseClaimScript makes r claim with the script it uses on a Redis older than
// 7.0, as if Redis had refused SET with NX and GET; for tests only.
func UseClaimScript(r *Redis) { r.scriptClaim.Store(true) }

// RefusesNXGet is refusesNXGet, for tests.
var RefusesNXGet = refusesNXGet
