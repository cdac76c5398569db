package accounts_test

import (
	"testing"

	"github.com/authd/authd/internal/importcheck"
)

// TestNoHTTP: the service imports no net/http (it knows no status code);
// its pages (package accountweb) map its errors.
func TestNoHTTP(t *testing.T) { importcheck.NoHTTP(t) }
