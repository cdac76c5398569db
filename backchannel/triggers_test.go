package backchannel_test

import (
	"encoding/json"
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

// TestAccountPageWithdraw (the account page trigger): withdrawing an app's
// access on /account "signs the app out" — it is told for every session of
// the user it had — while the sessions and the other apps stay.
func TestAccountPageWithdraw(t *testing.T) {
	h := newHarness(t)
	rcv := map[string]*receiver{}
	for _, app := range []string{"rp-a", "rp-b"} {
		rcv[app] = h.receiver(app, nil)
		h.addApp(app, rcv[app].srv.URL+"/bc")
	}
	b1, b2 := newBrowser(), newBrowser()
	for _, b := range []*http.Client{b1, b2} {
		h.signIn(b, "rp-a")
		h.signIn(b, "rp-b")
	}
	if err := h.store.GrantConsent(t.Context(), h.sub, "rp-a", []string{"openid"}); err != nil {
		t.Fatal(err)
	}
	resp, err := b1.Get(h.srv.URL + "/account")
	p := readPage(t, resp, err)
	p = h.submit(b1, p, url.Values{"client_id": {"rp-a"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "withdrawn") {
		t.Fatalf("withdraw: %d %s", p.status, p.body)
	}
	d := h.deliverer("w", prometheus.NewRegistry(), backchannel.Config{})
	if _, err := d.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.waitSettled(5 * time.Second)
	if got := rcv["rp-a"].receipts(); len(got) != 2 || got[0].sid == got[1].sid {
		t.Errorf("rp-a received %d logout tokens, want one per session (2)", len(got))
	}
	if got := rcv["rp-b"].receipts(); len(got) != 0 {
		t.Errorf("rp-b received %d logout tokens, want none", len(got))
	}
}

// TestDiscoveryAndRegistration: discovery says back-channel logout is
// supported, with sid; the admin API refuses a bad backchannel_logout_uri
// with RFC 7591's invalid_client_metadata and stores a good one.
func TestDiscoveryAndRegistration(t *testing.T) {
	h := newHarness(t)
	resp, err := http.Get(h.srv.URL + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil || m["backchannel_logout_supported"] != true || m["backchannel_logout_session_supported"] != true {
		t.Fatalf("discovery: %v backchannel_logout_supported=%v backchannel_logout_session_supported=%v", err,
			m["backchannel_logout_supported"], m["backchannel_logout_session_supported"])
	}
	register := func(uri string) (int, map[string]any) {
		body := `{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"none","backchannel_logout_uri":"` + uri + `"}`
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/admin/clients", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, bad := range []string{"http://localhost:9000/bc", "https://rp.example/bc#x", "rp.example/bc"} {
		if status, out := register(bad); status != http.StatusBadRequest || out["error"] != "invalid_client_metadata" {
			t.Errorf("register %q: %d %v, want 400 invalid_client_metadata", bad, status, out)
		}
	}
	if status, out := register("https://rp.example/bc"); status != http.StatusCreated || out["backchannel_logout_uri"] != "https://rp.example/bc" {
		t.Errorf("register a good URI: %d %v", status, out)
	}
}
