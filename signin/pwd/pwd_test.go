package pwd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
)

// people is a fake Authenticator: alice's password is "right"; "down"
// is a database outage.
type people struct{ calls int }

func (p *people) Authenticate(_ context.Context, username, password string) (identity.User, error) {
	p.calls++
	switch {
	case username == "down":
		return identity.User{}, fmt.Errorf("lookup: %w", storage.ErrUnavailable)
	case username == "alice" && password == "right":
		return identity.User{Subject: "sub-alice", Username: "alice"}, nil
	}
	return identity.User{}, identity.ErrInvalidCredentials
}

func input(user, password string) signin.Input {
	return signin.Input{Fields: url.Values{"username": {user}, "password": {password}}, RemoteIP: "192.0.2.1"}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p := &people{}
	m := New(p, Options{Limits: Limits{FreeFailures: 2, Backoff: time.Second}, Now: func() time.Time { return now }})
	ctx := context.Background()

	res, err := m.Verify(ctx, input("alice", "right"))
	if err != nil || res.User.Subject != "sub-alice" || len(res.AMR) != 1 || res.AMR[0] != "pwd" {
		t.Fatalf("right password: %+v %v", res, err)
	}
	// Unknown user and wrong password: one answer, charged to the
	// username as PrepareUsername folds it.
	for _, name := range []string{"Alice", "alice"} {
		_, err := m.Verify(ctx, input(name, "wrong"))
		var f *signin.Failure
		if !errors.As(err, &f) || f.Status != http.StatusUnauthorized || !f.Invalid || f.Message != "Wrong username or password." || f.Username != name {
			t.Fatalf("wrong password for %s: %v %+v", name, err, f)
		}
	}
	// The third failure's back-off: refused before the hash, 429.
	if _, err := m.Verify(ctx, input("alice", "wrong")); err == nil {
		t.Fatal("third wrong password accepted")
	}
	calls := p.calls
	_, err = m.Verify(ctx, input("ALICE", "right"))
	var f *signin.Failure
	if !errors.As(err, &f) || f.Status != http.StatusTooManyRequests || f.RetryAfter <= 0 || f.Invalid ||
		!strings.HasPrefix(f.Message, "Too many failed sign-in attempts. Try again in ") || p.calls != calls {
		t.Fatalf("during the back-off: %v %+v (hashes %d→%d)", err, f, calls, p.calls)
	}
	now = now.Add(time.Minute)
	if _, err := m.Verify(ctx, input("alice", "right")); err != nil {
		t.Fatalf("after the back-off: %v", err)
	}
	// An outage is not a wrong password and is charged to nobody.
	for range 5 {
		if _, err := m.Verify(ctx, input("down", "x")); !errors.Is(err, signin.ErrUnavailable) || !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("outage: %v", err)
		}
	}
}

func TestRender(t *testing.T) {
	m := New(&people{}, Options{})
	h := string(m.Render(context.Background(), signin.Page{Action: "/oauth2/authorize?a=1&b=2", CSRFToken: "tok", Username: `<bob>`}))
	for _, want := range []string{`action="/oauth2/authorize?a=1&amp;b=2"`, `name="csrf_token" value="tok"`, `name="step" value="login"`,
		`name="method" value="password"`, `value="&lt;bob&gt;" autofocus>`} {
		if !strings.Contains(h, want) {
			t.Errorf("form lacks %s:\n%s", want, h)
		}
	}
	if strings.Contains(h, "aria-") {
		t.Errorf("a page without a message has no aria attributes:\n%s", h)
	}
	h = string(m.Render(context.Background(), signin.Page{ErrorID: "login-error", Invalid: true}))
	if strings.Count(h, `aria-describedby="login-error"`) != 2 || !strings.Contains(h, `required aria-describedby="login-error" aria-invalid="true" autofocus>`) {
		t.Errorf("after a wrong password the password field is invalid and focused:\n%s", h)
	}
}
