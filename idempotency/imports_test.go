package idempotency_test

import (
	"testing"

	"github.com/authd/authd/internal/importcheck"
)

// TestNoHTTP: the engine imports no net/http (it knows no status code);
// the admin API's adapter (package adminapi) maps its outcomes and errors.
func TestNoHTTP(t *testing.T) { importcheck.NoHTTP(t) }
