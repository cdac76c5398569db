package exchangecache_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/exchangecache/exchangecachetest"
	"github.com/authd/authd/exchangecache/redistest"
)

// uniquePrefix returns a key prefix no other test uses, and deletes its keys
// when tb ends.
func uniquePrefix(tb testing.TB, client redis.UniversalClient) string {
	tb.Helper()
	prefix := "authd:xc:test:" + rand.Text() + ":"
	tb.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			_ = client.Del(ctx, iter.Val()).Err()
		}
	})
	return prefix
}

// newRedis returns a Redis cache on the shared test server with a unique
// prefix, and the raw client. The per-call timeout is generous because the
// suite runs many parallel cases under -race on a shared server; the
// production default is exercised by TestRedisSlowServerTimesOut.
func newRedis(tb testing.TB) (*exchangecache.Redis, *redis.Client, string) {
	tb.Helper()
	client := redistest.NewClient(tb, redistest.Addr(tb))
	prefix := uniquePrefix(tb, client)
	opts := exchangecache.RedisOptions{Prefix: prefix, Timeout: 2 * time.Second}
	return exchangecache.NewRedis(client, opts), client, prefix
}

func TestRedis(t *testing.T) {
	redistest.Addr(t) // skip or fail once, before the subtests
	exchangecachetest.Run(t, func(t *testing.T) exchangecache.Cache {
		c, _, _ := newRedis(t)
		return c
	})
}

// TestRedisClaimScript runs the conformance suite with the claim a Redis
// older than 7.0 gets (a script, on the same entries).
func TestRedisClaimScript(t *testing.T) {
	redistest.Addr(t)
	exchangecachetest.Run(t, func(t *testing.T) exchangecache.Cache {
		c, _, _ := newRedis(t)
		exchangecache.UseClaimScript(c)
		return c
	})
}

// TestRefusesNXGet: the error by which Claim recognises a Redis that
// refuses SET with NX and GET is Redis's "syntax error" reply (here for NX
// with XX, which every version refuses), and no other error.
func TestRefusesNXGet(t *testing.T) {
	ctx := t.Context()
	_, client, prefix := newRedis(t)
	err := client.Do(ctx, "set", prefix+"k", "v", "nx", "xx", "get").Err()
	if err == nil || !exchangecache.RefusesNXGet(err) {
		t.Fatalf("SET NX XX GET: %v; RefusesNXGet = false", err)
	}
	if err := client.HSet(ctx, prefix+"h", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	err = client.Do(ctx, "set", prefix+"h", "v", "nx", "get").Err()
	if err == nil || exchangecache.RefusesNXGet(err) {
		t.Fatalf("SET NX GET on a hash: %v; want WRONGTYPE, not a refusal", err)
	}
	if exchangecache.RefusesNXGet(context.DeadlineExceeded) {
		t.Fatal("RefusesNXGet(context.DeadlineExceeded) = true")
	}
}

// TestRedisEarlierLayout: an entry in the hash layout of earlier versions
// (a node of the previous version, mid-upgrade) is a cache error for every
// operation, never Claimed or Absent, so the exchange fails open to
// PostgreSQL; and Forget removes it, so a revocation on a new node leaves
// nothing an old node could replay.
func TestRedisEarlierLayout(t *testing.T) {
	ctx := t.Context()
	c, client, prefix := newRedis(t)
	rkey := prefix + "{old}"
	if err := client.HSet(ctx, rkey, "s", "c", "f", "fp", "d", "sealed").Err(); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Claim(ctx, "old", "fp", time.Second); err == nil {
		t.Fatalf("Claim on a hash entry = %v, want an error", res.Outcome)
	}
	if res, err := c.Lookup(ctx, "old", "fp"); err == nil {
		t.Fatalf("Lookup on a hash entry = %v, want an error", res.Outcome)
	}
	if err := c.Forget(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, rkey).Val(); n != 0 {
		t.Fatal("Forget left the hash entry")
	}
	// A corrupt string entry is an error too, and Complete and Release
	// leave it alone.
	for _, bad := range []string{"", "i", "c00", "i0x02fpOWNER", "c-002fp", "cffffshort", "x0002fp"} {
		if err := client.Set(ctx, rkey, bad, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if res, err := c.Claim(ctx, "old", "fp", time.Second); err == nil && res.Outcome != exchangecache.Mismatch {
			t.Errorf("Claim on %q = %v, want an error or Mismatch", bad, res.Outcome)
		}
		if err := c.Complete(ctx, "old", "OWNER", []byte("x"), time.Minute); !errors.Is(err, exchangecache.ErrNotOwner) {
			t.Errorf("Complete on %q = %v, want ErrNotOwner", bad, err)
		}
		if err := c.Release(ctx, "old", "OWNER"); !errors.Is(err, exchangecache.ErrNotOwner) {
			t.Errorf("Release on %q = %v, want ErrNotOwner", bad, err)
		}
		if got := client.Get(ctx, rkey).Val(); got != bad {
			t.Errorf("entry %q became %q", bad, got)
		}
	}
}

func TestRedisStoresNoPlaintext(t *testing.T) {
	ctx := t.Context()
	c, client, prefix := newRedis(t)
	const (
		token    = "ory_at_SECRETACCESSTOKENvalue1234567890"
		refresh  = "ory_rt_SECRETREFRESHTOKENvalue0987654321"
		verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
		key      = "code-signature-xyz"
	)
	secret := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"access_token":"` + token + `","refresh_token":"` + refresh + `","token_type":"bearer","expires_in":3600}`)
	sealed, err := exchangecache.Seal(secret, verifier, key, body)
	if err != nil {
		t.Fatal(err)
	}
	fp := exchangecache.Fingerprint("client-1", "https://app.example/cb", verifier)
	res, err := c.Claim(ctx, key, fp, time.Minute)
	if err != nil || res.Outcome != exchangecache.Claimed {
		t.Fatalf("Claim = %v, %v", res.Outcome, err)
	}
	if err := c.Complete(ctx, key, res.Owner, sealed, time.Minute); err != nil {
		t.Fatal(err)
	}

	raw, err := client.Get(ctx, prefix+"{"+key+"}").Result()
	if err != nil {
		t.Fatalf("no raw entry found (key layout changed?): %v", err)
	}
	for _, secret := range []string{token, refresh, verifier, "SECRET", "access_token"} {
		if strings.Contains(raw, secret) {
			t.Errorf("raw Redis entry contains %q", secret)
		}
	}

	// And the legitimate retry can still open it.
	res, err = c.Lookup(ctx, key, fp)
	if err != nil || res.Outcome != exchangecache.Completed {
		t.Fatalf("Lookup = %v, %v", res.Outcome, err)
	}
	got, err := exchangecache.Open(secret, verifier, key, res.Sealed)
	if err != nil || string(got) != string(body) {
		t.Fatalf("Open = %q, %v", got, err)
	}
}

func TestRedisKeyLayoutAndTTL(t *testing.T) {
	ctx := t.Context()
	c, client, prefix := newRedis(t)
	res, err := c.Claim(ctx, "sig", "fp", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rkey := prefix + "{sig}"
	if pttl := client.PTTL(ctx, rkey).Val(); pttl <= 9*time.Second || pttl > 10*time.Second {
		t.Fatalf("in-flight PTTL = %v, want about 10s", pttl)
	}
	if err := c.Complete(ctx, "sig", res.Owner, []byte("x"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl := client.PTTL(ctx, rkey).Val(); pttl <= 29*time.Second || pttl > 30*time.Second {
		t.Fatalf("completed PTTL = %v, want about 30s", pttl)
	}
	// The completed entry is 'c', the fingerprint's length and the
	// fingerprint, then the sealed response: the owner is gone.
	if raw := client.Get(ctx, rkey).Val(); raw != "c0002fpx" {
		t.Fatalf("completed entry = %q, want %q", raw, "c0002fpx")
	}
}

func TestNewRedisRejectsBracesInPrefix(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewRedis accepted a prefix with '{'")
		}
	}()
	exchangecache.NewRedis(redis.NewClient(&redis.Options{}), exchangecache.RedisOptions{Prefix: "a{b}:"})
}

// privateRedis starts a redis-server only this test uses.
func privateRedis(t *testing.T, timeout time.Duration) (*exchangecache.Redis, *redis.Client, func()) {
	t.Helper()
	addr, stop := redistest.Start(t)
	client := redistest.NewClient(t, addr)
	return exchangecache.NewRedis(client, exchangecache.RedisOptions{Timeout: timeout}), client, stop
}

func TestRedisDownReturnsErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, _, stop := privateRedis(t, 150*time.Millisecond)
	res, err := c.Claim(ctx, "k", "fp", time.Minute)
	if err != nil || res.Outcome != exchangecache.Claimed {
		t.Fatalf("Claim before kill = %v, %v", res.Outcome, err)
	}
	stop()

	start := time.Now()
	checks := map[string]error{}
	_, checks["Claim"] = c.Claim(ctx, "k2", "fp", time.Minute)
	_, checks["Lookup"] = c.Lookup(ctx, "k", "fp")
	_, checks["Wait"] = c.Wait(ctx, "k", "fp", time.Second)
	checks["Complete"] = c.Complete(ctx, "k", res.Owner, []byte("x"), time.Minute)
	checks["Release"] = c.Release(ctx, "k", res.Owner)
	checks["Forget"] = c.Forget(ctx, "k")
	for op, err := range checks {
		if err == nil {
			t.Errorf("%s with Redis down: nil error", op)
			continue
		}
		if errors.Is(err, exchangecache.ErrNotOwner) || errors.Is(err, exchangecache.ErrWaitTimeout) {
			t.Errorf("%s with Redis down = %v; must not look like an outcome", op, err)
		}
		if !strings.HasPrefix(err.Error(), "exchangecache: ") {
			t.Errorf("%s error %q lacks the package prefix", op, err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("six calls against a dead Redis took %v", d)
	}
}

func TestRedisSlowServerTimesOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, client, _ := privateRedis(t, 100*time.Millisecond)
	// A separate connection pauses all clients for 2 s.
	admin := redis.NewClient(&redis.Options{Addr: client.Options().Addr})
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 2000, "ALL").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	start := time.Now()
	_, err := c.Claim(ctx, "k", "fp", time.Minute)
	d := time.Since(start)
	if err == nil {
		t.Fatal("Claim against a paused Redis succeeded")
	}
	if d > 600*time.Millisecond {
		t.Fatalf("Claim against a paused Redis took %v, want about the 100ms timeout", d)
	}
}

func TestRedisSurvivesScriptFlush(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, client, _ := privateRedis(t, time.Second)
	if _, err := c.Claim(ctx, "a", "fp", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := c.Claim(ctx, "b", "fp", time.Minute)
	if err != nil || res.Outcome != exchangecache.Claimed {
		t.Fatalf("Claim after SCRIPT FLUSH = %v, %v", res.Outcome, err)
	}
	if err := c.Complete(ctx, "b", res.Owner, []byte("x"), time.Minute); err != nil {
		t.Fatalf("Complete after SCRIPT FLUSH: %v", err)
	}
}

func BenchmarkRedisClaimComplete(b *testing.B) {
	c, _, _ := newRedis(b)
	ctx := b.Context()
	sealed := make([]byte, 450)
	fp := exchangecache.Fingerprint("client", "https://app.example/cb", "verifier")
	var i int
	for b.Loop() {
		i++
		key := "bench-" + strconv.Itoa(i)
		res, err := c.Claim(ctx, key, fp, time.Second)
		if err != nil || res.Outcome != exchangecache.Claimed {
			b.Fatalf("Claim = %v, %v", res.Outcome, err)
		}
		if err := c.Complete(ctx, key, res.Owner, sealed, time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRedisWarnsOncePerInterval: with Redis down, however many calls fail,
// the cache logs one warning per WarnEvery.
func TestRedisWarnsOncePerInterval(t *testing.T) {
	addr, stop := redistest.Start(t)
	var buf syncBuffer
	r := exchangecache.NewRedis(redistest.NewClient(t, addr), exchangecache.RedisOptions{
		Prefix: "warn-test:", Logger: slog.New(slog.NewJSONHandler(&buf, nil)), WarnEvery: time.Minute})
	stop()
	ctx := context.Background()
	for range 10 {
		_, _ = r.Claim(ctx, "k", "fp", time.Second)
		_ = r.Ping(ctx)
	}
	if n := strings.Count(buf.String(), `"level":"WARN"`); n != 1 {
		t.Fatalf("%d warnings for 20 failed calls, want 1:\n%s", n, buf.String())
	}
	// After the interval, the next failure warns again.
	r2 := exchangecache.NewRedis(redistest.NewClient(t, addr), exchangecache.RedisOptions{
		Prefix: "warn-test:", Logger: slog.New(slog.NewJSONHandler(&buf, nil)), WarnEvery: time.Millisecond})
	_ = r2.Ping(ctx)
	time.Sleep(5 * time.Millisecond)
	_ = r2.Ping(ctx)
	if n := strings.Count(buf.String(), `"level":"WARN"`); n != 3 {
		t.Fatalf("%d warnings after the interval, want 3", n)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
