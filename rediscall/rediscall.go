// Package rediscall runs one Redis command and waits for its reply no longer
// than the caller's context allows, on any go-redis client including the
// automatic pipeliner.
//
// It exists because the pipeliner runs a queued command on its own context
// and ignores the caller's deadline: its typed methods (Get, SetArgs,
// Script.Run) block until the batch's reply, which a Redis that stalls, a
// pool that waits for a connection or a dial that hangs can delay far past
// any per-call budget. [Do] submits the command and stops waiting at the
// caller's deadline (the command may still run; its reply is then dropped).
// On any other client the command runs on the caller's context, which
// go-redis honours with ContextTimeoutEnabled.
//
// It must never retry: a command authd sends to Redis is tried once, and
// its failure is the caller's to handle (fail open).
package rediscall

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Do needs the deferred face of the pipeliner (AsyncAutoPipeline), whose
// Submit returns at once; the blocking face refuses Submit
// (redis.ErrSubmitBlockingFace).

// Processor is what Do needs of a client: redis.UniversalClient and
// *redis.AutoPipeliner both are one.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// ErrNoProcess is Do's error for a client without a Process method.
var ErrNoProcess = errors.New("rediscall: the client cannot process a command")

// Do sends cmd on c and waits for its reply until ctx is done. It returns
// cmd's error, or ctx's when the wait was abandoned; cmd's value may be
// read only after a nil error or a Redis error (not a context error: the
// pipeliner may still be writing it).
func Do(ctx context.Context, c redis.Cmdable, cmd redis.Cmder) error {
	if ap, ok := c.(*redis.AutoPipeliner); ok {
		return ap.Submit(ctx, cmd).WaitContext(ctx)
	}
	p, ok := c.(Processor)
	if !ok {
		return ErrNoProcess
	}
	return p.Process(ctx, cmd)
}

// Script is a Lua script run by EVALSHA, and by EVAL when Redis does not
// have it cached (after a restart or SCRIPT FLUSH).
type Script struct {
	src, hash string
}

// NewScript returns the script src.
func NewScript(src string) *Script {
	h := sha1.Sum([]byte(src))
	return &Script{src: src, hash: hex.EncodeToString(h[:])}
}

// Run runs the script with keys and args through Do, within ctx.
func (s *Script) Run(ctx context.Context, c redis.Cmdable, keys []string, args ...any) *redis.Cmd {
	cmd := s.cmd(ctx, "evalsha", s.hash, keys, args)
	err := Do(ctx, c, cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = s.cmd(ctx, "eval", s.src, keys, args)
		err = Do(ctx, c, cmd)
	}
	if err != nil && ctx.Err() != nil {
		// The wait was abandoned: the command may still be written to by
		// the pipeliner, so the caller gets a command of its own.
		failed := redis.NewCmd(ctx)
		failed.SetErr(err)
		return failed
	}
	return cmd
}

func (s *Script) cmd(ctx context.Context, verb, body string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, verb, body, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	return redis.NewCmd(ctx, a...)
}
