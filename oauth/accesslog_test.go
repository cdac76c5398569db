package oauth_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestAccessLogLine: one JSON line per request with exactly the request
// id, method, route, status and latency in seconds; never the code, the
// code_verifier, the tokens or the query string.
func TestAccessLogLine(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	h := newHarness(t, harnessOpts{backend: "memory", accessLog: slog.New(slog.NewJSONHandler(&out, nil))})
	code, v := h.code(t, publicClient)
	res := h.redeem(t, code, v)
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if m["route"] == "/oauth2/token" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no line for the token request in %q", out.String())
	}
	for _, k := range []string{"time", "level", "msg", "request_id", "method", "route", "status", "latency_s"} {
		if _, ok := line[k]; !ok {
			t.Errorf("the line lacks %q: %v", k, line)
		}
	}
	if len(line) != 8 || line["msg"] != "request" || line["level"] != "INFO" || line["method"] != "POST" || line["status"] != float64(200) {
		t.Errorf("line = %v", line)
	}
	if _, ok := line["latency_s"].(float64); !ok {
		t.Errorf("latency_s = %v, want a number of seconds", line["latency_s"])
	}
	if _, ok := line["source"]; ok {
		t.Error("the access log names a source")
	}
	for _, secret := range []string{code, v, res.str("access_token"), res.str("refresh_token")} {
		if strings.Contains(out.String(), secret) {
			t.Fatal("the access log holds a code, verifier or token")
		}
	}
}
