package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeRound(t *testing.T, dir string, rates map[string]float64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for mode, rate := range rates {
		b, _ := json.Marshal(result{Mode: mode, Concurrency: 16, Rate: rate})
		if err := os.WriteFile(filepath.Join(dir, mode+"-c16.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompareMedianRatio: the table shows each side's median over the
// rounds and HEAD/BASE of the medians; a mode only one side ran is left out.
func TestCompareMedianRatio(t *testing.T) {
	d := t.TempDir()
	writeRound(t, filepath.Join(d, "b1"), map[string]float64{"exchange": 1000, "sso": 500})
	writeRound(t, filepath.Join(d, "b2"), map[string]float64{"exchange": 1200, "sso": 520})
	writeRound(t, filepath.Join(d, "b3"), map[string]float64{"exchange": 1100, "sso": 480})
	writeRound(t, filepath.Join(d, "h1"), map[string]float64{"exchange": 990, "sso": 600, "passkey": 50})
	writeRound(t, filepath.Join(d, "h2"), map[string]float64{"exchange": 1210, "sso": 400})
	writeRound(t, filepath.Join(d, "h3"), map[string]float64{"exchange": 1000, "sso": 550})
	var out bytes.Buffer
	join := func(names ...string) string {
		for i, n := range names {
			names[i] = filepath.Join(d, n)
		}
		return strings.Join(names, ",")
	}
	err := run(context.Background(), []string{"compare", "-base", join("b1", "b2", "b3"), "-head", join("h1", "h2", "h3")}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"| sso | 16 | 500, 520, 480 | 500 | 600, 400, 550 | 550 | 1.10 |",
		"| exchange | 16 | 1000, 1200, 1100 | 1100 | 990, 1210, 1000 | 1000 | 0.91 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing row %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "passkey") {
		t.Errorf("a mode measured on one side only is compared:\n%s", got)
	}
}
