package identity_test

import (
	"testing"

	"github.com/authd/authd/internal/importcheck"
)

// TestNoHTTP: the service imports no net/http (it knows no status code);
// the admin API's adapter (package adminapi) maps its errors.
func TestNoHTTP(t *testing.T) { importcheck.NoHTTP(t) }
