package adminapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMethodNotAllowedEchoBounded: a 405's error_description names the
// method, but at most 1 KiB of it and in RFC 6749 §5.2's charset, as the
// public listener's 405 does.
func TestMethodNotAllowedEchoBounded(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	for _, path := range []string{"/admin/clients", "/admin/users", "/admin/providers"} {
		res := h.admin(t, adminReq{method: strings.Repeat("X", 3000), path: path})
		d := res.str("error_description")
		if res.status != http.StatusMethodNotAllowed || res.header.Get("Allow") == "" || d == "" || len(d) > 1024 {
			t.Errorf("%s: %d, Allow %q, description of %d bytes", path, res.status, res.header.Get("Allow"), len(d))
		}
	}
}
