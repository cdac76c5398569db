package limits

import "github.com/redis/go-redis/v9"

// The scripts read the server's clock (TIME), so every replica measures
// from one clock; Redis ≥ 5 replicates a script's effects, not the script,
// so TIME is allowed.

// gcraScript is GCRA over one key holding the theoretical arrival time
// (TAT, ms). ARGV: interval ms, burst, mode (0 peek, 1 take if it fits,
// 2 charge regardless, 3 give one back). Returns {within budget 0/1, wait ms}.
var gcraScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local mode = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new = tat + interval
local allowAt = new - burst * interval
local within = allowAt <= now
local wait = 0
if not within then wait = allowAt - now end
if mode == 3 then
  local back = tat - interval
  if back < now then back = now end
  redis.call('SET', KEYS[1], back, 'PX', back - now + 1000)
  return {1, 0}
end
if mode == 0 then
  if tat - (burst - 1) * interval > now then return {0, tat - (burst - 1) * interval - now} end
  return {1, 0}
end
if within or mode == 2 then
  redis.call('SET', KEYS[1], new, 'PX', new - now + 1000)
end
if within then return {1, 0} end
return {0, wait}
`)

// failScript counts one more consecutive failure in a hash {n, until} and
// sets the wait it imposes. ARGV: free, first ms, max ms. Returns {wait ms}.
var failScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local free = tonumber(ARGV[1])
local first = tonumber(ARGV[2])
local maxwait = tonumber(ARGV[3])
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
local wait = 0
local over = n - free
if over >= 0 then
  if over > 30 then over = 30 end
  wait = first * (2 ^ over)
  if wait > maxwait then wait = maxwait end
  redis.call('HSET', KEYS[1], 'until', now + wait)
end
redis.call('PEXPIRE', KEYS[1], maxwait + wait + 60000)
return {wait}
`)

// blockedScript returns {ms until the key's failures allow a try}.
var blockedScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local u = tonumber(redis.call('HGET', KEYS[1], 'until') or 0)
if u > now then return {u - now} end
return {0}
`)
