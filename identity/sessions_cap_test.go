package identity_test

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authd/authd/identity"
)

// TestSessionCap: a user has at most MaxSessions sessions; a new sign-in
// ends the oldest beyond it, also when sign-ins race; and the sessions
// list pages through what is left, newest first, with tampered cursors
// refused.
func TestSessionCap(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			store := newStore(t, backend)
			clock := time.Now().UTC().Truncate(time.Microsecond)
			var mu sync.Mutex
			now := func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Millisecond); return clock }
			var logged bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logged}, &slog.HandlerOptions{Level: slog.LevelWarn}))
			svc := identity.New(store, identity.Options{Passwords: cheap, Now: now, MaxSessions: 3, Logger: logger})
			u := bcryptUser(t, store, "capped", "pw")
			var refs []string
			for range 5 {
				ref, _, err := svc.StartSession(t.Context(), u.Subject, []string{"pwd"})
				if err != nil {
					t.Fatal(err)
				}
				refs = append(refs, ref)
			}
			for i, ref := range refs {
				_, err := svc.ResumeSession(t.Context(), ref)
				if alive := err == nil; alive != (i >= 2) {
					t.Errorf("session %d alive=%v; want only the newest 3", i, alive)
				}
			}
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, _, err := svc.StartSession(t.Context(), u.Subject, []string{"pwd"}); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			all, err := svc.SessionsPage(t.Context(), "capped", 200, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(all.Sessions) != 3 {
				t.Fatalf("after 16 racing sign-ins: %d sessions, want 3", len(all.Sessions))
			}
			// Every racing trim succeeded: they queue on the rows in one
			// order instead of deadlocking (a failed trim is only logged).
			if strings.Contains(logged.String(), "trim sessions") {
				t.Fatalf("a trim failed: %s", logged.String())
			}
			// Pages of one: the same three, newest first, then no cursor.
			var seen []string
			cursor := ""
			for range 5 {
				p, err := svc.SessionsPage(t.Context(), "capped", 1, cursor)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range p.Sessions {
					seen = append(seen, s.ID)
				}
				if cursor = p.NextCursor; cursor == "" {
					break
				}
			}
			if len(seen) != 3 || seen[0] != all.Sessions[0].ID || seen[2] != all.Sessions[2].ID {
				t.Fatalf("paged %v, want %v", seen, all.Sessions)
			}
			other := bcryptUser(t, store, "other", "pw")
			if _, _, err := svc.StartSession(t.Context(), other.Subject, nil); err != nil {
				t.Fatal(err)
			}
			p, _ := svc.SessionsPage(t.Context(), "capped", 1, "")
			if _, err := svc.SessionsPage(t.Context(), "other", 1, p.NextCursor); err != identity.ErrInvalidCursor {
				t.Fatalf("another user's cursor: %v, want ErrInvalidCursor", err)
			}
		})
	}
}

// lockedWriter serializes writes of concurrent loggers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
