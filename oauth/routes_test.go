package oauth_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPublicListenerHasNoOperationsEndpoints: /metrics, /healthz, /readyz
// and pprof are served on the operations listener (package ops), never by
// the public handler.
func TestPublicListenerHasNoOperationsEndpoints(t *testing.T) {
	h := newHarness(t, harnessOpts{backend: "memory"})
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/debug/pprof/"} {
		rec := httptest.NewRecorder()
		h.app.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s on the public handler: %d, want 404", path, rec.Code)
		}
	}
}
