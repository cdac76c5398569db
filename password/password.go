// Package password hashes and verifies user passwords.
//
// New hashes are argon2id (RFC 9106, golang.org/x/crypto/argon2) with
// parameters of the OWASP Password Storage Cheat Sheet (DefaultParams:
// 7 MiB, 5 passes, 1 lane), a 16-byte salt from crypto/rand and a 32-byte
// key, encoded as a PHC string:
//
//	$argon2id$v=19$m=7168,t=5,p=1$<salt>$<key>
//
// with salt and key in unpadded standard base64. Verify also accepts
// argon2id strings with other parameters (within MaxParams, so a stored
// hash cannot make the server spend unbounded memory or time) and bcrypt
// hashes ($2a$, $2b$, $2y$, cost at most MaxBcryptCost), the format authd
// used before; NeedsRehash says which stored hashes to replace after the
// next successful sign-in.
//
// Every Hash and Verify of a Hasher holds one of its slots (Options.
// Concurrency) while it computes: a burst of sign-ins queues for a slot
// instead of taking every core from the token endpoint, and a caller whose
// context ends while it queues stops waiting (ctx.Err()).
//
// Passwords are bytes as the caller prepared them (identity applies PRECIS
// OpaqueString); this package does not normalise or limit them, except
// that a bcrypt hash never matches a password longer than 72 bytes
// (MaxBcryptLen), which bcrypt would silently truncate.
package password

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// Params are argon2id cost parameters.
type Params struct {
	// Memory is the memory size m in KiB (at least 8 × Threads).
	Memory uint32
	// Time is the number of passes t over the memory (at least 1).
	Time uint32
	// Threads is the degree of parallelism p, the number of lanes (at
	// least 1). argon2 computes lanes on as many goroutines.
	Threads uint8
}

// String is the PHC parameter segment, "m=7168,t=5,p=1".
func (p Params) String() string {
	return fmt.Sprintf("m=%d,t=%d,p=%d", p.Memory, p.Time, p.Threads)
}

// DefaultParams are one of OWASP's argon2id configurations (Password
// Storage Cheat Sheet): m = 7168 KiB (7 MiB), t = 5, p = 1. OWASP lists it
// with m = 19 MiB, t = 2 and three others as "an equal level of defense",
// trading memory for passes. authd used 19 MiB, t = 2 until the burst
// benchmarks showed what the larger array costs on a small machine: about
// the same time alone (20–33 ms per hash here for either, from run to
// run), but under load the 19 MiB array streams through the caches the
// token endpoint and PostgreSQL share: a burst of 200 sign-ins took 18–27 s
// against 9–10 s at 7 MiB, with fewer exchanges served meanwhile
// (docs/benchmarks.md). Hashes with the earlier parameters still verify,
// and are replaced at the next successful sign-in (NeedsRehash).
var DefaultParams = Params{Memory: 7168, Time: 5, Threads: 1}

// MaxParams bound, each on its own, the argon2id parameters Verify and New
// accept: 64 MiB, 10 passes, 4 lanes (RFC 9106 §4's second recommended
// option, 64 MiB, t = 3, p = 4, is within them). A stored hash beyond them
// is ErrMalformed, not work.
var MaxParams = Params{Memory: 64 * 1024, Time: 10, Threads: 4}

// Lengths, in bytes.
const (
	// SaltLen is the salt length of new hashes; Verify accepts 8 to 64.
	SaltLen = 16
	// KeyLen is the key (tag) length of new hashes; Verify accepts 16
	// to 64.
	KeyLen = 32
	// MaxBcryptLen is the longest password a bcrypt hash can match:
	// bcrypt ignores the bytes after the 72nd.
	MaxBcryptLen = 72
	// MaxBcryptCost is the highest bcrypt cost Verify computes (2^14
	// rounds, about 1 s); authd made its bcrypt hashes at cost 10.
	MaxBcryptCost = 14
)

const (
	minSalt, maxSalt = 8, 64
	minKey, maxKey   = 16, 64
	argonPrefix      = "$argon2id$"
)

var b64 = base64.RawStdEncoding.Strict()

// Errors of Verify (and of Hash for ErrMalformed parameters). A caller
// waiting for a slot whose context ends gets ctx.Err() instead.
var (
	// ErrMismatch: the hash is well formed and the password is not its
	// password.
	ErrMismatch = errors.New("password: hash and password do not match")
	// ErrMalformed: the hash is neither a PHC argon2id string within
	// MaxParams nor a bcrypt hash with a cost up to MaxBcryptCost.
	ErrMalformed = errors.New("password: malformed or unsupported hash")
)

// Options configure a Hasher; zero values take the documented defaults.
type Options struct {
	// Params are the argon2id parameters of new hashes (default
	// DefaultParams). Lower values are for tests only. Each must be at
	// most MaxParams.
	Params Params
	// Concurrency is how many Hash and Verify calls compute at once; the
	// rest wait in arrival order. Default DefaultConcurrency().
	Concurrency int
}

// DefaultConcurrency is max(1, GOMAXPROCS/2): hashing may take half the
// cores and never all of them, so the token endpoint (and the rest of the
// server) keeps the other half during a burst of sign-ins.
func DefaultConcurrency() int {
	return max(1, runtime.GOMAXPROCS(0)/2)
}

// Hasher hashes and verifies passwords with a bound on concurrent work. It
// is safe for concurrent use.
type Hasher struct {
	params   Params
	sem      chan struct{}
	inFlight atomic.Int64
	waiting  atomic.Int64
	decoy    []byte
}

// New returns a Hasher. It panics if opts.Params are nonzero and not
// within MaxParams (a programming error, not input).
func New(opts Options) *Hasher {
	if opts.Params == (Params{}) {
		opts.Params = DefaultParams
	}
	if err := opts.Params.check(); err != nil {
		panic(fmt.Sprintf("password.New: Params %s: %v", opts.Params, err))
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency()
	}
	h := &Hasher{params: opts.Params, sem: make(chan struct{}, opts.Concurrency)}
	// The decoy's key is random, not derived from any password: Verify
	// against it costs exactly a real verification and never matches.
	h.decoy = encode(h.params, randomBytes(SaltLen), randomBytes(KeyLen))
	return h
}

var defaultHasher = sync.OnceValue(func() *Hasher { return New(Options{}) })

// Default returns the process's shared Hasher (DefaultParams,
// DefaultConcurrency), so that every user of it shares one bound.
func Default() *Hasher { return defaultHasher() }

// Params returns the parameters of new hashes.
func (h *Hasher) Params() Params { return h.params }

// Concurrency returns the number of slots.
func (h *Hasher) Concurrency() int { return cap(h.sem) }

// InFlight returns how many calls hold a slot now.
func (h *Hasher) InFlight() int { return int(h.inFlight.Load()) }

// Waiting returns how many calls are queued for a slot now.
func (h *Hasher) Waiting() int { return int(h.waiting.Load()) }

// acquire takes a slot, or returns ctx.Err() if ctx ends first (or has
// already ended: no work is started for a caller that has gone).
func (h *Hasher) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case h.sem <- struct{}{}:
	default:
		h.waiting.Add(1)
		defer h.waiting.Add(-1)
		select {
		case h.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.inFlight.Add(1)
	return nil
}

func (h *Hasher) release() {
	h.inFlight.Add(-1)
	<-h.sem
}

// Hash returns the PHC argon2id string of password with the Hasher's
// parameters and a fresh 16-byte salt. It waits for a slot; its only error
// is ctx.Err() while waiting.
func (h *Hasher) Hash(ctx context.Context, password []byte) ([]byte, error) {
	salt := randomBytes(SaltLen)
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.release()
	key := argon2.IDKey(password, salt, h.params.Time, h.params.Memory, h.params.Threads, KeyLen)
	return encode(h.params, salt, key), nil
}

// Verify checks password against hash (argon2id PHC string or bcrypt). It
// returns nil on a match, ErrMismatch, ErrMalformed (wrapped, with the
// reason; it never panics on any input), or ctx.Err() if ctx ends while it
// waits for a slot. The comparison of keys is constant-time.
func (h *Hasher) Verify(ctx context.Context, hash, password []byte) error {
	switch {
	case bytes.HasPrefix(hash, []byte(argonPrefix)):
		p, salt, key, err := decode(hash)
		if err != nil {
			return err
		}
		if err := h.acquire(ctx); err != nil {
			return err
		}
		defer h.release()
		got := argon2.IDKey(password, salt, p.Time, p.Memory, p.Threads, uint32(len(key)))
		if subtle.ConstantTimeCompare(got, key) != 1 {
			return ErrMismatch
		}
		return nil
	case isBcrypt(hash):
		cost, err := bcrypt.Cost(hash)
		if err != nil {
			return fmt.Errorf("%w: bcrypt: %v", ErrMalformed, err)
		}
		if cost > MaxBcryptCost {
			return fmt.Errorf("%w: bcrypt cost %d is above %d", ErrMalformed, cost, MaxBcryptCost)
		}
		if err := h.acquire(ctx); err != nil {
			return err
		}
		defer h.release()
		tooLong := len(password) > MaxBcryptLen
		if tooLong {
			password = password[:MaxBcryptLen] // the same work, then refused
		}
		err = bcrypt.CompareHashAndPassword(hash, password) // constant-time compare inside
		switch {
		case errors.Is(err, bcrypt.ErrMismatchedHashAndPassword), err == nil && tooLong:
			return ErrMismatch
		case err != nil:
			return fmt.Errorf("%w: bcrypt: %v", ErrMalformed, err)
		}
		return nil
	}
	return fmt.Errorf("%w: neither $argon2id$ nor bcrypt", ErrMalformed)
}

// NeedsRehash reports whether hash should be replaced by Hash of the same
// password: it is bcrypt, or argon2id with parameters, salt length or key
// length other than the Hasher's. A malformed hash needs no rehash (it
// cannot verify).
func (h *Hasher) NeedsRehash(hash []byte) bool {
	if isBcrypt(hash) {
		return true
	}
	p, salt, key, err := decode(hash)
	if err != nil {
		return false
	}
	return p != h.params || len(salt) != SaltLen || len(key) != KeyLen
}

// Decoy returns a well-formed hash with the Hasher's parameters that no
// password matches (its key is random, not derived from a password). A
// caller with no stored hash (an unknown user) verifies against it, so
// that it spends the same time as for a known user.
func (h *Hasher) Decoy() []byte { return bytes.Clone(h.decoy) }

func isBcrypt(hash []byte) bool {
	return len(hash) >= 4 && hash[0] == '$' && hash[1] == '2' && hash[3] == '$' &&
		(hash[2] == 'a' || hash[2] == 'b' || hash[2] == 'y')
}

func (p Params) check() error {
	switch {
	case p.Time < 1 || p.Threads < 1 || p.Memory < 8*uint32(p.Threads):
		return errors.New("need t ≥ 1, p ≥ 1, m ≥ 8p")
	case p.Memory > MaxParams.Memory || p.Time > MaxParams.Time || p.Threads > MaxParams.Threads:
		return fmt.Errorf("above the bound %s", MaxParams)
	}
	return nil
}

func encode(p Params, salt, key []byte) []byte {
	return fmt.Appendf(nil, "%sv=%d$%s$%s$%s", argonPrefix, argon2.Version, p, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// decode parses "$argon2id$v=19$m=…,t=…,p=…$salt$key" strictly: exactly
// these fields in this order, decimal numbers, canonical base64.
func decode(hash []byte) (Params, []byte, []byte, error) {
	bad := func(why string) (Params, []byte, []byte, error) {
		return Params{}, nil, nil, fmt.Errorf("%w: argon2id: %s", ErrMalformed, why)
	}
	rest, ok := strings.CutPrefix(string(hash), argonPrefix)
	if !ok {
		return bad("no $argon2id$ prefix")
	}
	f := strings.Split(rest, "$")
	if len(f) != 4 {
		return bad("want v=, parameters, salt and key")
	}
	if f[0] != "v="+strconv.Itoa(argon2.Version) {
		return bad("version is not v=19")
	}
	kv := strings.Split(f[1], ",")
	if len(kv) != 3 {
		return bad("want parameters m=…,t=…,p=…")
	}
	var n [3]uint64
	for i, name := range []string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(kv[i], name+"=")
		if !ok || v == "" || len(v) > 10 || strings.Trim(v, "0123456789") != "" {
			return bad("want parameters m=…,t=…,p=… in decimal")
		}
		n[i], _ = strconv.ParseUint(v, 10, 64) // at most 10 digits: fits
	}
	if n[0] > uint64(MaxParams.Memory) || n[1] > uint64(MaxParams.Time) || n[2] > uint64(MaxParams.Threads) {
		return bad("parameters above the bound " + MaxParams.String())
	}
	p := Params{Memory: uint32(n[0]), Time: uint32(n[1]), Threads: uint8(n[2])}
	if err := p.check(); err != nil {
		return bad(err.Error())
	}
	salt, err := b64.DecodeString(f[2])
	if err != nil || len(salt) < minSalt || len(salt) > maxSalt {
		return bad("salt is not 8 to 64 bytes of unpadded base64")
	}
	key, err := b64.DecodeString(f[3])
	if err != nil || len(key) < minKey || len(key) > maxKey {
		return bad("key is not 16 to 64 bytes of unpadded base64")
	}
	return p, salt, key, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24).
	return b
}
