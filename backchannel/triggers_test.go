package backchannel_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authd/authd/backchannel"
	"github.com/authd/authd/storage"
)

// TestTriggers (issue 29: disable, delete, password change and admin
// sign-out each produce the deliveries; the sign-out page and
// RP-initiated logout too): the user is signed in to two apps in two
// browsers; each way of ending the sessions queues one delivery per
// (browser session, app), in the transaction that ends them, and each
// app's receiver gets them.
func TestTriggers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sessions int // browser sessions the trigger ends
		end      func(h *harness, b *http.Client, idToken string)
	}{
		{"AdminSignOut", 2, func(h *harness, _ *http.Client, _ string) { h.admin("POST", "/sign-out", "") }},
		{"Disable", 2, func(h *harness, _ *http.Client, _ string) { h.admin("POST", "/disable", "") }},
		{"Delete", 2, func(h *harness, _ *http.Client, _ string) { h.admin("DELETE", "", "") }},
		{"PasswordChange", 2, func(h *harness, _ *http.Client, _ string) {
			h.admin("POST", "/password", `{"password":"a new password for alice"}`)
		}},
		{"SignOutPage", 1, func(h *harness, b *http.Client, _ string) { h.signOut(b) }},
		{"RPInitiatedLogout", 1, func(h *harness, b *http.Client, idToken string) {
			// OpenID Connect RP-Initiated Logout 1.0 §2, with the
			// initiating app's ID token as hint: it is told too.
			resp, err := b.Get(h.srv.URL + "/oauth2/logout?" + url.Values{"id_token_hint": {idToken}}.Encode())
			p := readPage(t, resp, err)
			if p.status != http.StatusOK || !strings.Contains(strings.ToLower(p.body), "signed out") {
				t.Fatalf("end_session: %d %s", p.status, p.body)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			rcv := map[string]*receiver{}
			for _, app := range []string{"rp-a", "rp-b"} {
				rcv[app] = h.receiver(app, nil)
				h.addApp(app, rcv[app].srv.URL+"/bc")
			}
			h.addApp("rp-none", "") // no backchannel_logout_uri: never told
			b1, b2 := newBrowser(), newBrowser()
			idToken := h.signIn(b1, "rp-a")
			h.signIn(b1, "rp-b")
			h.signIn(b1, "rp-none")
			h.signIn(b2, "rp-a")
			h.signIn(b2, "rp-b")

			tc.end(h, b1, idToken)
			ds, err := h.store.ListLogoutDeliveries(t.Context(), storage.LogoutFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 2*tc.sessions {
				t.Fatalf("%d deliveries queued, want %d", len(ds), 2*tc.sessions)
			}
			d := h.deliverer("w", prometheus.NewRegistry(), backchannel.Config{})
			if _, err := d.RunDue(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.waitSettled(5 * time.Second)
			for app, rc := range rcv {
				got := rc.receipts()
				sids := map[string]bool{}
				for _, r := range got {
					sids[r.sid] = true
				}
				if len(got) != tc.sessions || len(sids) != tc.sessions || len(rc.rejected()) > 0 {
					t.Errorf("%s received %d tokens for %d sids (rejected %v), want one per ended session (%d)",
						app, len(got), len(sids), rc.rejected(), tc.sessions)
				}
			}
		})
	}
}

// admin calls the admin API on the user alice.
func (h *harness) admin(method, path, body string) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.srv.URL+"/admin/users/"+testUser+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		h.t.Fatal(fmt.Sprintf("admin %s %s: %d %s", method, path, resp.StatusCode, raw))
	}
}
