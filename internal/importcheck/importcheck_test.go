package importcheck

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestHTTPImports(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"service.go":      "package s\n\nimport (\n\t\"context\"\n\t\"net/http/httputil\"\n)\n",
		"router.go":       "package s\n\nimport \"github.com/gorilla/mux\"\n",
		"plain.go":        "package s\n\nimport \"net/url\"\n",
		"service_test.go": "package s\n\nimport \"net/http\"\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := httpImports(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"router.go imports github.com/gorilla/mux", "service.go imports net/http/httputil"}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("httpImports = %q, want %q", got, want)
	}
}
