package adminapi_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"
)

// TestListCursorsTampered: every list endpoint answers a cursor it did not
// hand out (mangled, forged, another list's, with a NUL or invalid UTF-8,
// of another version) with 400 invalid_request, never a 500 and never a
// page, on both backends.
func TestListCursorsTampered(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{backend: backend})
			for _, name := range []string{"carol", "dave", "erin"} {
				wantStatus(t, "create "+name, h.admin(t, adminReq{method: "POST", path: "/admin/users", body: userJSON(name, "a good passphrase")}), http.StatusCreated, "")
			}
			for _, name := range []string{"one", "two", "three"} {
				wantStatus(t, "create client", h.admin(t, adminReq{method: "POST", path: "/admin/clients", body: metaJSON(name)}), http.StatusCreated, "")
			}
			next := func(path string) string {
				res := h.admin(t, adminReq{method: "GET", path: path + "?limit=1"})
				wantStatus(t, "first page of "+path, res, http.StatusOK, "")
				c := res.str("next_cursor")
				if c == "" {
					t.Fatalf("%s: no next_cursor after one of several", path)
				}
				return c
			}
			for range 2 {
				h.login(t, newBrowser(t), h.authURL(publicClient, publicRedirect))
			}
			for _, id := range []string{"corp-a", "corp-b", "corp-c"} {
				wantStatus(t, "create provider", h.admin(t, adminReq{method: "POST", path: "/admin/providers",
					body: `{"id":"` + id + `","kind":"oidc","issuer":"https://login.` + id + `.example","client_id":"authd","client_secret":"s3cret-value","display_name":"Corp"}`}), http.StatusCreated, "")
			}
			lists := []string{"/admin/clients", "/admin/users", "/admin/users/" + testUser + "/sessions", "/admin/providers"}
			cursors := map[string]string{}
			for _, l := range lists {
				cursors[l] = next(l)
			}
			b64 := base64.RawURLEncoding.EncodeToString
			for _, l := range lists {
				tampered := map[string]string{
					"not base64":      "%%%",
					"forged":          "YWJj",
					"NUL":             b64([]byte("\x02\x05users\x00")),
					"invalid UTF-8":   b64([]byte("\x02\x07clients\xff\xfe")),
					"old version":     b64([]byte("\x01alice")),
					"truncated":       cursors[l][:len(cursors[l])-2],
					"padded":          cursors[l] + "==",
					"very long":       string(make([]byte, 4096)),
					"NUL from client": "\x00",
				}
				for _, other := range lists {
					if other != l {
						tampered["cursor of "+other] = cursors[other]
					}
				}
				for name, c := range tampered {
					res := h.admin(t, adminReq{method: "GET", path: l + "?cursor=" + url.QueryEscape(c)})
					wantStatus(t, l+" with a "+name+" cursor", res, http.StatusBadRequest, "invalid_request")
				}
				// The real cursor still works.
				wantStatus(t, l+" second page", h.admin(t, adminReq{method: "GET", path: l + "?limit=1&cursor=" + url.QueryEscape(cursors[l])}), http.StatusOK, "")
			}
		})
	}
}
