package accounts_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoHTTP: the service imports no net/http (it knows no status code);
// its pages (package accountweb) map its errors.
func TestNoHTTP(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pf.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "net/http") || p == "github.com/gorilla/mux" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
