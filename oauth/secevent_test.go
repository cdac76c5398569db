package oauth_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/authd/authd/oauth"
)

// eventLog is a server log the security event tests read.
type eventLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *eventLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// events returns the "security event" lines, decoded.
func (l *eventLog) events(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if !strings.Contains(line, `"security event"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// securityCount reads authd_security_events_total{event} from /metrics.
func securityCount(t *testing.T, h *harness, event string) int {
	t.Helper()
	resp, err := http.Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^authd_security_events_total\{event="` + event + `"\} (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no authd_security_events_total{event=%q} in /metrics", event)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// checkEvent asserts exactly one security event line, of kind event, for
// publicClient from loopback, with the grant id and sub where want says;
// that the metric counted it; and that no secret appears in the log.
func checkEvent(t *testing.T, h *harness, log *eventLog, event string, wantSub bool, secrets ...string) {
	t.Helper()
	evs := log.events(t)
	if len(evs) != 1 {
		t.Fatalf("%d security event lines, want 1:\n%s", len(evs), log)
	}
	e := evs[0]
	if e["level"] != "WARN" || e["event"] != event || e["client_id"] != publicClient || e["source"] != "127.0.0.1" {
		t.Fatalf("security event line: %v", e)
	}
	if event != "dpop_proof_replay" {
		if g, _ := e["grant_id"].(string); g == "" {
			t.Fatalf("no grant_id: %v", e)
		}
	}
	if sub, _ := e["sub"].(string); wantSub && sub == "" {
		t.Fatalf("no sub: %v", e)
	}
	if n := securityCount(t, h, event); n != 1 {
		t.Fatalf("authd_security_events_total{event=%q} = %d, want 1", event, n)
	}
	all := log.String()
	for _, s := range secrets {
		if s != "" && strings.Contains(all, s) {
			t.Fatalf("the log holds a secret (%.8s…):\n%s", s, all)
		}
	}
}

func eventHarness(t *testing.T, cfg func(*oauth.Config)) (*harness, *eventLog) {
	log := &eventLog{}
	h := newHarness(t, harnessOpts{backend: "memory", cfg: cfg, logger: slog.New(slog.NewJSONHandler(log, nil))})
	return h, log
}

// TestSecurityEventCodeReuse: a code presented again with another
// verifier is reuse: invalid_grant, the grant revoked, and one
// code_reuse event.
func TestSecurityEventCodeReuse(t *testing.T) {
	h, log := eventHarness(t, nil)
	code, verifier := h.code(t, publicClient)
	first := h.redeem(t, code, verifier)
	if first.status != 200 {
		t.Fatalf("exchange: %d %v", first.status, first.body)
	}
	other := "another-verifier-0123456789-0123456789-0123456789"
	wantError(t, h.exchange(t, publicClient, code, other, publicRedirect), 400, "invalid_grant")
	checkEvent(t, h, log, "code_reuse", true, code, verifier, other, first.str("access_token"), first.str("refresh_token"))
}

// TestSecurityEventRefreshTokenReuse: a rotated refresh token used again
// after its retry window: the family is revoked, one refresh_token_reuse.
func TestSecurityEventRefreshTokenReuse(t *testing.T) {
	h, log := eventHarness(t, func(c *oauth.Config) { c.DisableReplay = true })
	code, verifier := h.code(t, publicClient)
	first := h.redeem(t, code, verifier)
	rt := first.str("refresh_token")
	next := h.postForm(t, "/oauth2/token", refreshForm(rt), "", "")
	if next.status != 200 {
		t.Fatalf("refresh: %d %v", next.status, next.body)
	}
	wantError(t, h.postForm(t, "/oauth2/token", refreshForm(rt), "", ""), 400, "invalid_grant")
	checkEvent(t, h, log, "refresh_token_reuse", true, code, verifier, rt, next.str("refresh_token"), next.str("access_token"))
}

// TestSecurityEventRevokedGrantReplay: after RFC 7009 revocation, the
// exchange's retry and the refresh token each meet a revoked grant:
// revoked_grant_replay, without revoking more.
func TestSecurityEventRevokedGrantReplay(t *testing.T) {
	for _, what := range []string{"exchange retry", "refresh"} {
		t.Run(what, func(t *testing.T) {
			h, log := eventHarness(t, nil)
			code, verifier := h.code(t, publicClient)
			first := h.redeem(t, code, verifier)
			rt := first.str("refresh_token")
			if rev := h.postForm(t, "/oauth2/revoke", map[string][]string{"token": {rt}, "client_id": {publicClient}}, "", ""); rev.status != 200 {
				t.Fatalf("revoke: %d %v", rev.status, rev.body)
			}
			if what == "refresh" {
				wantError(t, h.postForm(t, "/oauth2/token", refreshForm(rt), "", ""), 400, "invalid_grant")
				checkEvent(t, h, log, "revoked_grant_replay", true, code, verifier, rt)
				return
			}
			wantError(t, h.exchange(t, publicClient, code, verifier, publicRedirect), 400, "invalid_grant")
			checkEvent(t, h, log, "revoked_grant_replay", true, code, verifier, rt)
		})
	}
}

// TestSecurityEventDPoPProofReplay: the same DPoP proof sent twice: the
// second is invalid_dpop_proof and one dpop_proof_replay.
func TestSecurityEventDPoPProofReplay(t *testing.T) {
	h, log := eventHarness(t, nil)
	key := newDPoPKey(t, "ES256")
	c := &dpopClient{h: h, key: key}
	code, verifier := h.code(t, publicClient)
	first := c.token(t, codeForm(code, verifier)) // learns the nonce
	if first.status != 200 {
		t.Fatalf("exchange: %d %v", first.status, first.body)
	}
	proof := key.proof(t, "POST", h.srv.URL+"/oauth2/token", c.nonce, "")
	form := refreshForm(first.str("refresh_token"))
	if res := h.dpopPost(t, form, proof); res.status != 200 {
		t.Fatalf("refresh with a fresh proof: %d %v", res.status, res.body)
	}
	wantError(t, h.dpopPost(t, form, proof), 400, "invalid_dpop_proof")
	checkEvent(t, h, log, "dpop_proof_replay", false, code, verifier, proof, first.str("refresh_token"))
}
