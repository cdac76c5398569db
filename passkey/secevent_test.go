package passkey_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authd/authd/passkey"
	"github.com/authd/authd/passkey/passkeytest"
	"github.com/authd/authd/secevent"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/memory"
)

// TestCloneSecurityEvent: with Options.Security, a sign count that went
// backwards is one security event line (sign_count_regression, the user
// and the credential, nothing of the assertion) and one count.
func TestCloneSecurityEvent(t *testing.T) {
	rp, err := passkey.Configure(passkey.Settings{Issuer: origin})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	count := secevent.NewCounter()
	store := memory.New()
	f := &fixture{store: store, log: &log, now: time.Now()}
	f.svc, err = passkey.New(rp, store, passkey.Options{Logger: logger, Now: func() time.Time { return f.now },
		Security: secevent.New(logger, count)})
	if err != nil {
		t.Fatal(err)
	}
	f.user = &storage.User{Username: "alice", PasswordHash: []byte("x")}
	if err := store.CreateUser(t.Context(), f.user); err != nil {
		t.Fatal(err)
	}
	a := &passkeytest.Authenticator{Origin: origin}
	c := f.enrol(t, a)
	if _, err := f.svc.FinishLogin(t.Context(), "csrf-1", must(f.login(t.Context(), a, c))); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	c.Count = 0
	answer := must(f.login(t.Context(), a, c))
	if _, err := f.svc.FinishLogin(t.Context(), "csrf-1", answer); !errors.Is(err, passkey.ErrCloned) {
		t.Fatalf("regressed count: %v", err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if m["level"] == "WARN" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 || lines[0]["msg"] != "security event" || lines[0]["event"] != "sign_count_regression" ||
		lines[0]["sub"] != f.user.Subject || lines[0]["credential_id"] == nil {
		t.Fatalf("warn lines: %v", lines)
	}
	if strings.Contains(log.String(), string(answer)) {
		t.Fatal("the assertion is in the log")
	}
	if n := testutil.ToFloat64(count.WithLabelValues("sign_count_regression")); n != 1 {
		t.Fatalf("sign_count_regression = %v", n)
	}
}
