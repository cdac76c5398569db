// Package docs holds authd's design documents. Its test keeps
// architecture.md's package map true: every package is named, with the
// authd packages it imports, and no row names a package that is gone.
package docs

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/authd/authd/"

func TestPackageMapMatchesCode(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := packageMap(t, string(doc))

	cmd := exec.Command("go", "list", "-f", `{{if .GoFiles}}{{.ImportPath}} {{join .Imports " "}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	actual := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module)
		var deps []string
		for _, imp := range fields[1:] {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				deps = append(deps, rest)
			}
		}
		slices.Sort(deps)
		actual[pkg] = deps
	}

	for pkg, deps := range actual {
		got, ok := documented[pkg]
		if !ok {
			t.Errorf("package %s (imports %v) is not in architecture.md's package map", pkg, deps)
			continue
		}
		if !slices.Equal(got, deps) {
			t.Errorf("package %s: architecture.md says it imports %v, the code imports %v", pkg, got, deps)
		}
	}
	for pkg := range documented {
		if _, ok := actual[pkg]; !ok {
			t.Errorf("architecture.md's package map names %s, which does not exist (or has no Go files)", pkg)
		}
	}
}

var cell = regexp.MustCompile("`([^`]+)`")

// packageMap reads the table between <!-- package-map --> and
// <!-- /package-map -->: | `pkg` | what it is | `dep`, `dep` (or —) |.
func packageMap(t *testing.T, doc string) map[string][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- package-map -->")
	if !ok {
		t.Fatal("architecture.md has no <!-- package-map --> marker")
	}
	table, _, ok := strings.Cut(rest, "<!-- /package-map -->")
	if !ok {
		t.Fatal("architecture.md has no <!-- /package-map --> marker")
	}
	m := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		cols := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cols) != 3 {
			continue
		}
		name := cell.FindStringSubmatch(cols[0])
		if name == nil {
			continue // header or separator
		}
		var deps []string
		for _, d := range cell.FindAllStringSubmatch(cols[2], -1) {
			deps = append(deps, d[1])
		}
		slices.Sort(deps)
		if _, dup := m[name[1]]; dup {
			t.Errorf("package map names %s twice", name[1])
		}
		m[name[1]] = deps
	}
	if len(m) == 0 {
		t.Fatal("architecture.md's package map is empty")
	}
	return m
}
