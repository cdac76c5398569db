package main

import (
	"io"
	"log/slog"
	"sync"
	"time"
)

// newLogger returns the logger of a command: JSON (serve) or text (dev, the
// janitor) on w. Every duration is written as seconds under a key with the
// suffix _s ("janitor_interval_s":300, "latency_s":0.0012), never as
// nanoseconds: see durationSeconds.
func newLogger(w io.Writer, json bool, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationSeconds}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// newAccessLogger returns authd serve's request logger: JSON on w, like
// newLogger's, without the ReplaceAttr pass (its attributes carry no
// durations: latency_s is already seconds), which slog would otherwise run
// on every attribute of every request.
func newAccessLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// durationSeconds is a slog ReplaceAttr: a time.Duration attribute "k"
// becomes "k_s", its value in seconds (a float). slog's JSON handler
// would otherwise print nanoseconds, and its text handler "5m0s": one
// form, in both, that log queries can compare.
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	return slog.Float64(a.Key+"_s", a.Value.Duration().Seconds())
}

// discardLogger logs nothing (a CLI command without -v).
func discardLogger() *slog.Logger {
	return slog.New(slog.DiscardHandler)
}

// logSink is authd serve's stderr. A line written through Write goes out
// at once, after any buffered lines (the order holds); a line written
// through deferred() waits in a buffer and goes out with the next
// immediate line, once 32 KiB have accumulated, or within 100 ms. Only the
// access log (one line per HTTP request) is deferred: it saves a system
// call per request. A process killed with SIGKILL loses at most the last
// 100 ms of access lines; every warning and error is written at once.
type logSink struct {
	mu    sync.Mutex
	w     io.Writer
	buf   []byte
	timer *time.Timer
}

const (
	logSinkMax   = 32 << 10
	logSinkDelay = 100 * time.Millisecond
)

func newLogSink(w io.Writer) *logSink { return &logSink{w: w} }

// Write writes p at once, after the buffered lines.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
	return s.w.Write(p)
}

// Flush writes the buffered lines.
func (s *logSink) Flush() {
	s.mu.Lock()
	s.flushLocked()
	s.mu.Unlock()
}

func (s *logSink) flushLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if len(s.buf) > 0 {
		_, _ = s.w.Write(s.buf)
		s.buf = s.buf[:0]
	}
}

// deferred is the writer of the buffered lines.
func (s *logSink) deferred() io.Writer { return deferredLog{s} }

type deferredLog struct{ s *logSink }

func (d deferredLog) Write(p []byte) (int, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	switch {
	case len(s.buf) >= logSinkMax:
		s.flushLocked()
	case s.timer == nil:
		s.timer = time.AfterFunc(logSinkDelay, s.Flush)
	}
	return len(p), nil
}
