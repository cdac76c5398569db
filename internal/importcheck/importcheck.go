// Package importcheck is the test of a service's rule that it knows no
// HTTP: a service returns typed errors and its adapter (the admin API, the
// pages) maps them to statuses. Only tests import it.
package importcheck

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// NoHTTP fails t for each import of net/http (or a package below it) or of
// gorilla/mux by the package in the current directory (where go test runs
// a package's tests); its tests may import them.
func NoHTTP(t testing.TB) {
	t.Helper()
	found, err := httpImports(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// httpImports lists the HTTP imports of dir's non-test Go files, each as
// "FILE imports PATH".
func httpImports(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var found []string
	for _, path := range files {
		f := filepath.Base(path)
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, imp := range pf.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "net/http") || p == "github.com/gorilla/mux" {
				found = append(found, fmt.Sprintf("%s imports %s", f, p))
			}
		}
	}
	return found, nil
}
