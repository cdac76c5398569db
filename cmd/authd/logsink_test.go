package main

import (
	"strings"
	"testing"
	"time"
)

// TestLogSink: deferred lines wait, an immediate line goes out at once and
// after them (order kept), the timer flushes within its delay, a large
// backlog flushes by itself, and Flush empties the buffer.
func TestLogSink(t *testing.T) {
	var out syncBuffer // main_test.go: safe for the sink's timer goroutine
	s := newLogSink(&out)
	d := s.deferred()
	_, _ = d.Write([]byte("a\n"))
	_, _ = d.Write([]byte("b\n"))
	if got := out.String(); got != "" {
		t.Fatalf("deferred lines written at once: %q", got)
	}
	_, _ = s.Write([]byte("warn\n"))
	if got := out.String(); got != "a\nb\nwarn\n" {
		t.Fatalf("after an immediate line: %q, want the deferred ones first", got)
	}
	_, _ = d.Write([]byte("c\n"))
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasSuffix(out.String(), "c\n") {
		if time.Now().After(deadline) {
			t.Fatalf("deferred line not flushed by the timer: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	line := strings.Repeat("x", 1023) + "\n"
	for range logSinkMax / len(line) {
		_, _ = d.Write([]byte(line))
	}
	if n := len(out.String()); n < logSinkMax {
		t.Fatalf("a full buffer was not written: %d bytes out", n)
	}
	_, _ = d.Write([]byte("last\n"))
	s.Flush()
	if !strings.HasSuffix(out.String(), "last\n") {
		t.Fatal("Flush left a line behind")
	}
}
