package fed

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestUnavailablePageSaysWhenToRetry: the 503 pages (provider unreachable,
// database away) carry Retry-After; the others do not.
func TestUnavailablePageSaysWhenToRetry(t *testing.T) {
	m := New(Options{})
	rec := httptest.NewRecorder()
	m.page(rec, http.StatusServiceUnavailable, "The provider cannot be reached right now.")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("503 page: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	rec = httptest.NewRecorder()
	m.page(rec, http.StatusBadRequest, "This sign-in link is not valid.")
	if rec.Header().Get("Retry-After") != "" {
		t.Errorf("400 page with Retry-After %q", rec.Header().Get("Retry-After"))
	}
}
