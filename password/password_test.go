package password_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/password"
)

// cheap are parameters fast enough for tests.
var cheap = password.Params{Memory: 64, Time: 1, Threads: 1}

func TestHashVerify(t *testing.T) {
	ctx := t.Context()
	h := password.New(password.Options{})
	hash, err := h.Hash(ctx, []byte("correct horse"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(hash), "$argon2id$v=19$m=7168,t=5,p=1$") {
		t.Fatalf("hash %q: want the PHC form with OWASP's parameters", hash)
	}
	// 16-byte salt, 32-byte key: 22 and 43 characters of unpadded base64.
	f := strings.Split(string(hash), "$")
	if len(f) != 6 || len(f[4]) != 22 || len(f[5]) != 43 {
		t.Fatalf("hash %q: want salt 22 and key 43 characters", hash)
	}
	if err := h.Verify(ctx, hash, []byte("correct horse")); err != nil {
		t.Errorf("Verify right password: %v", err)
	}
	if err := h.Verify(ctx, hash, []byte("correct horsf")); !errors.Is(err, password.ErrMismatch) {
		t.Errorf("Verify wrong password: %v, want ErrMismatch", err)
	}
	again, _ := h.Hash(ctx, []byte("correct horse"))
	if string(again) == string(hash) {
		t.Error("two hashes of one password are equal: no fresh salt")
	}
	if h.NeedsRehash(hash) {
		t.Error("NeedsRehash of a current hash")
	}
}

// TestKnownVector: a hash made elsewhere (the reference argon2 CLI,
// echo -n password | argon2 somesalt -id -t 2 -m 16 -p 1) verifies.
func TestKnownVector(t *testing.T) {
	const ref = "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
	h := password.New(password.Options{Params: cheap})
	if err := h.Verify(t.Context(), []byte(ref), []byte("password")); err != nil {
		t.Errorf("reference vector: %v", err)
	}
	if err := h.Verify(t.Context(), []byte(ref), []byte("passwore")); !errors.Is(err, password.ErrMismatch) {
		t.Errorf("reference vector, wrong password: %v", err)
	}
	if !h.NeedsRehash([]byte(ref)) {
		t.Error("NeedsRehash of m=65536 with other current params = false")
	}
}

func TestBcrypt(t *testing.T) {
	ctx := t.Context()
	h := password.New(password.Options{Params: cheap})
	b, err := bcrypt.GenerateFromPassword([]byte("correct horse"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	long72 := strings.Repeat("x", 72)
	b72, _ := bcrypt.GenerateFromPassword([]byte(long72), bcrypt.MinCost)
	for _, prefix := range []string{"$2a$", "$2b$", "$2y$"} {
		hash := []byte(prefix + string(b[4:]))
		if err := h.Verify(ctx, hash, []byte("correct horse")); err != nil {
			t.Errorf("%s right password: %v", prefix, err)
		}
		if err := h.Verify(ctx, hash, []byte("correct horsf")); !errors.Is(err, password.ErrMismatch) {
			t.Errorf("%s wrong password: %v, want ErrMismatch", prefix, err)
		}
		if !h.NeedsRehash(hash) {
			t.Errorf("NeedsRehash(%s…) = false", prefix)
		}
	}
	if err := h.Verify(ctx, b72, []byte(long72)); err != nil {
		t.Errorf("72-byte password: %v", err)
	}
	// bcrypt would accept these (it ignores bytes past 72); they are not
	// the password, and a rehash would lock the user out of the real one.
	if err := h.Verify(ctx, b72, []byte(long72+"extra")); !errors.Is(err, password.ErrMismatch) {
		t.Errorf("longer than 72 bytes: %v, want ErrMismatch", err)
	}
	costly, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	costly = []byte(strings.Replace(string(costly), "$04$", "$31$", 1))
	if err := h.Verify(ctx, costly, []byte("x")); !errors.Is(err, password.ErrMalformed) {
		t.Errorf("bcrypt cost 31: %v, want ErrMalformed (never computed)", err)
	}
}

func TestMalformed(t *testing.T) {
	h := password.New(password.Options{Params: cheap})
	good, _ := h.Hash(t.Context(), []byte("pw"))
	f := strings.Split(string(good), "$") // "", argon2id, v=19, params, salt, key
	salt, key := f[4], f[5]
	for _, s := range []string{
		"",
		"plain text",
		"$argon2id$",
		"$argon2i$v=19$m=64,t=1,p=1$" + salt + "$" + key,
		"$argon2d$v=19$m=64,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=16$m=64,t=1,p=1$" + salt + "$" + key,
		"$argon2id$m=64,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$t=1,m=64,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=1,k=2$" + salt + "$" + key,
		"$argon2id$v=19$m=-64,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=+64,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=0x40,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=0,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=0$" + salt + "$" + key,
		"$argon2id$v=19$m=7,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=99999999999999999999,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=4294967295,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=65537,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=11,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=5$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=256$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=1$" + salt,
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + key + "$",
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "==$" + key,
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + key + "=",
		"$argon2id$v=19$m=64,t=1,p=1$!!!!$" + key,
		"$argon2id$v=19$m=64,t=1,p=1$c2FsdA$" + key,        // 4-byte salt
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$c2hvcnQ", // 5-byte key
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + strings.Repeat("A", 90),
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + key[:len(key)-1] + "B", // non-canonical trailing bits
		"$2a$",
		"$2a$10$short",
		"$2x$04$abcdefghijklmnopqrstuuabcdefghijklmnopqrstuvwxyz01234",
		"$1$md5crypt$hash",
	} {
		if err := h.Verify(t.Context(), []byte(s), []byte("pw")); !errors.Is(err, password.ErrMalformed) {
			t.Errorf("Verify(%q) = %v, want ErrMalformed", s, err)
		}
		if h.NeedsRehash([]byte(s)) && !strings.HasPrefix(s, "$2a$") {
			t.Errorf("NeedsRehash(%q) = true for a malformed hash", s)
		}
	}
}

func TestNeedsRehash(t *testing.T) {
	ctx := t.Context()
	h := password.New(password.Options{Params: cheap})
	other := password.New(password.Options{Params: password.Params{Memory: 128, Time: 1, Threads: 1}})
	mine, _ := h.Hash(ctx, []byte("pw"))
	theirs, _ := other.Hash(ctx, []byte("pw"))
	if h.NeedsRehash(mine) || !h.NeedsRehash(theirs) || !other.NeedsRehash(mine) {
		t.Error("NeedsRehash must be true exactly for other parameters")
	}
	// Other parameters still verify.
	if err := h.Verify(ctx, theirs, []byte("pw")); err != nil {
		t.Errorf("Verify with other params: %v", err)
	}
	if !h.NeedsRehash([]byte("$2b$10$abcdefghijklmnopqrstuuabcdefghijklmnopqrstuvwxyz01234")) {
		t.Error("NeedsRehash(bcrypt) = false")
	}
}

func TestDecoy(t *testing.T) {
	h := password.New(password.Options{Params: cheap})
	d := h.Decoy()
	if h.NeedsRehash(d) {
		t.Error("the decoy has other parameters than new hashes")
	}
	for _, pw := range []string{"", "pw", "correct horse"} {
		if err := h.Verify(t.Context(), d, []byte(pw)); !errors.Is(err, password.ErrMismatch) {
			t.Errorf("Verify(decoy, %q) = %v, want ErrMismatch", pw, err)
		}
	}
	if !strings.HasPrefix(string(password.New(password.Options{}).Decoy()), "$argon2id$v=19$m=7168,t=5,p=1$") {
		t.Error("the default decoy does not have the default parameters")
	}
}

func TestNewRefusesUnboundedParams(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New with m above MaxParams did not panic")
		}
	}()
	password.New(password.Options{Params: password.Params{Memory: 1 << 20, Time: 1, Threads: 1}})
}

// TestBound: many concurrent calls never compute more than Concurrency at
// once, and all finish.
func TestBound(t *testing.T) {
	const bound, n = 2, 24
	h := password.New(password.Options{Params: password.Params{Memory: 1024, Time: 1, Threads: 1}, Concurrency: bound})
	if h.Concurrency() != bound {
		t.Fatalf("Concurrency() = %d", h.Concurrency())
	}
	hash, _ := h.Hash(t.Context(), []byte("pw"))
	var maxSeen atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // sample while the calls run
		defer close(sampled)
		for {
			if v := int64(h.InFlight()); v > maxSeen.Load() {
				maxSeen.Store(v)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	var wg sync.WaitGroup
	var queued atomic.Bool
	for i := range n {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = h.Hash(t.Context(), []byte("pw"))
			} else {
				err = h.Verify(t.Context(), hash, []byte("pw"))
			}
			if err != nil {
				t.Error(err)
			}
			if h.Waiting() > 0 {
				queued.Store(true)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	if got := maxSeen.Load(); got > bound || got < 1 {
		t.Errorf("max in flight = %d, want 1..%d", got, bound)
	}
	if !queued.Load() {
		t.Log("no call ever saw another queued (fast machine); the bound held regardless")
	}
	if h.InFlight() != 0 || h.Waiting() != 0 {
		t.Errorf("after all: in flight %d, waiting %d", h.InFlight(), h.Waiting())
	}
}

// TestCancelWhileQueued: a caller queued behind a full Hasher returns
// ctx.Err() when its context ends, without computing.
func TestCancelWhileQueued(t *testing.T) {
	h := password.New(password.Options{Params: cheap, Concurrency: 1})
	hash, _ := h.Hash(t.Context(), []byte("pw"))
	// Hold the one slot of slow with slow work (about 0.1 s).
	slow := password.New(password.Options{Params: password.Params{Memory: 16 * 1024, Time: 4, Threads: 1}, Concurrency: 1})
	slowHash, _ := slow.Hash(t.Context(), []byte("pw"))
	holding := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(holding)
		done <- slow.Verify(context.Background(), slowHash, []byte("pw"))
	}()
	<-holding
	for slow.InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- slow.Verify(ctx, slowHash, []byte("pw")) }()
	for slow.Waiting() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("queued Verify after cancel = %v, want context.Canceled", err)
		}
	case <-done:
		t.Fatal("the slot holder finished before the queued caller noticed its cancellation")
	}
	if slow.Waiting() != 0 {
		t.Errorf("waiting = %d after the cancelled caller left", slow.Waiting())
	}
	if err := <-done; err != nil {
		t.Errorf("slot holder: %v", err)
	}
	// An already-ended context starts no work at all.
	if _, err := h.Hash(ctx, []byte("pw")); !errors.Is(err, context.Canceled) {
		t.Errorf("Hash with an ended context = %v", err)
	}
	if err := h.Verify(ctx, hash, []byte("pw")); !errors.Is(err, context.Canceled) {
		t.Errorf("Verify with an ended context = %v", err)
	}
}

// BenchmarkHash is the cost of one new hash with DefaultParams (a
// verification costs the same).
func BenchmarkHash(b *testing.B) {
	h := password.New(password.Options{Concurrency: 1})
	ctx := context.Background()
	pw := []byte("correct horse battery staple")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Hash(ctx, pw); err != nil {
			b.Fatal(err)
		}
	}
}
