package adminapi_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
	"github.com/authd/authd/passkey"
	"github.com/authd/authd/passkey/passkeytest"
	"github.com/authd/authd/storage"
)

// enrolPasskey adds a passkey for subject through the passkey service
// (over the harness's store) with a software authenticator, as the
// account page would.
func enrolPasskey(t *testing.T, h *harness, issuer, subject string) {
	t.Helper()
	rp, err := passkey.Configure(passkey.Settings{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := passkey.New(rp, struct {
		storage.PasskeyStore
		storage.Store
	}{h.store.(storage.PasskeyStore), h.store}, passkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := svc.BeginEnrol(t.Context(), subject, "s")
	if err != nil {
		t.Fatal(err)
	}
	_, answer, err := (&passkeytest.Authenticator{Origin: issuer}).Create(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.FinishEnrol(t.Context(), subject, "s", "", answer); err != nil {
		t.Fatal(err)
	}
}

func TestUserPasskeys(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var issuer string
			h := newHarness(t, harnessOpts{backend: backend, cfg: func(c *oauth.Config) {
				c.Issuer = strings.Replace(c.Issuer, "127.0.0.1", "localhost", 1) // passkeys need a domain name
				issuer = c.Issuer
			}})
			alice, err := h.store.GetUser(t.Context(), testUser)
			if err != nil {
				t.Fatal(err)
			}
			enrolPasskey(t, h, issuer, alice.Subject)

			list := h.admin(t, adminReq{method: "GET", path: "/admin/users/Alice/passkeys"})
			wantStatus(t, "list", list, 200, "")
			ps, _ := list.body["passkeys"].([]any)
			if len(ps) != 1 {
				t.Fatalf("list: %s", list.raw)
			}
			id, _ := ps[0].(map[string]any)["id"].(string)
			if id == "" || strings.ContainsAny(id, "+/=") {
				t.Fatalf("credential id %q is not base64url", id)
			}

			// The password goes ("password": null), under a key: a retry gets
			// the same answer; the user keeps the passkey as a way in.
			rm := adminReq{method: "POST", path: "/admin/users/alice/password", body: `{"password": null}`, key: "rm-pw-1"}
			first := h.admin(t, rm)
			wantStatus(t, "remove password", first, 200, "")
			again := h.admin(t, rm)
			if again.status != 200 || !bytes.Equal(again.raw, first.raw) {
				t.Fatalf("replayed removal: %s vs %s", again.raw, first.raw)
			}
			if _, err := identity.New(h.store, identity.Options{Passwords: testPasswords}).Authenticate(t.Context(), testUser, testPassword); err == nil {
				t.Fatal("the removed password still signs in")
			}
			// Its last way in cannot go.
			wantStatus(t, "remove last passkey", h.admin(t, adminReq{method: "DELETE", path: "/admin/users/alice/passkeys/" + id, key: "rm-pk-0"}), 409, "last_sign_in_method")

			// With a second passkey the first can go; a retry is the same 204.
			enrolPasskey(t, h, issuer, alice.Subject)
			del := adminReq{method: "DELETE", path: "/admin/users/alice/passkeys/" + id, key: "rm-pk-1"}
			wantStatus(t, "remove passkey", h.admin(t, del), 204, "")
			wantStatus(t, "retried removal", h.admin(t, del), 204, "")
			wantStatus(t, "removal without a key, again", h.admin(t, adminReq{method: "DELETE", path: "/admin/users/alice/passkeys/" + id}), 404, "not_found")
			wantStatus(t, "other user's", h.admin(t, adminReq{method: "GET", path: "/admin/users/nobody/passkeys"}), 404, "not_found")

			// A user created without a password.
			created := h.admin(t, adminReq{method: "POST", path: "/admin/users", body: `{"username": "bob", "password": null}`, key: "bob-1"})
			wantStatus(t, "create without a password", created, 201, "")
			bobList := h.admin(t, adminReq{method: "GET", path: "/admin/users/bob/passkeys"})
			if ps, _ := bobList.body["passkeys"].([]any); bobList.status != 200 || len(ps) != 0 {
				t.Fatalf("bob's passkeys: %s", bobList.raw)
			}
			wantStatus(t, "no password and no passkey: nothing to remove", h.admin(t, adminReq{method: "POST", path: "/admin/users/bob/password", body: `{"password": null}`}), 409, "last_sign_in_method")
		})
	}
}

func TestUserPasskeysOff(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"}) // an IP-address issuer: passkeys off
	wantStatus(t, "list", h.admin(t, adminReq{method: "GET", path: "/admin/users/alice/passkeys"}), 404, "not_found")
	wantStatus(t, "null password", h.admin(t, adminReq{method: "POST", path: "/admin/users/alice/password", body: `{"password": null}`}), 400, "invalid_request")
}
