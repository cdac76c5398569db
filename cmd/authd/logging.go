package main

import (
	"io"
	"log/slog"
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
