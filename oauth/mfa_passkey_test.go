package oauth_test

import (
	"bytes"
	"context"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/signin"
)

// Passkeys and the second factor, through the seam the passkey package
// plugs into (it is not on this branch's main yet): a sign-in method whose
// result has amr "hwk" and "user" (a passkey with user verification)
// counts as two factors and is phishing resistant (acr phr); a factor with
// the same amr after a password raises the session likewise. The fakes
// below stand in for passkeyweb's method and factor.

var fakeKeyForm = template.Must(template.New("key").Parse(`<form method="post" action="{{.Action}}">
<input type="hidden" name="csrf_token" value="{{.CSRFToken}}">
<input type="hidden" name="step" value="{{if .Username}}factor{{else}}login{{end}}">
<input type="hidden" name="method" value="fakekey"><input type="hidden" name="factor" value="fakekey">
<button type="submit">Use a passkey</button>
</form>
`))

type fakeKey struct{ people *identity.Service }

func (k *fakeKey) Name() string { return "fakekey" }

func (k *fakeKey) Render(_ context.Context, p signin.Page) template.HTML {
	var b bytes.Buffer
	_ = fakeKeyForm.Execute(&b, signin.Page{Action: p.Action, CSRFToken: p.CSRFToken})
	return template.HTML(b.String())
}

// Verify is the method: the "user" field names who the authenticator
// proved (the software authenticator of the passkey issue would sign a
// challenge here).
func (k *fakeKey) Verify(ctx context.Context, in signin.Input) (signin.Result, error) {
	u, err := k.people.Get(ctx, cmpOr(in.Fields.Get("user"), testUser))
	if err != nil {
		return signin.Result{}, &signin.Failure{Status: http.StatusUnauthorized, Message: "No passkey."}
	}
	return signin.Result{User: u, AMR: []string{"hwk", "user"}}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fakeKeyFactor is the factor: the user has a passkey.
type fakeKeyFactor struct{ fakeKey }

func (k *fakeKeyFactor) Has(context.Context, identity.User) (bool, error) { return true, nil }

func (k *fakeKeyFactor) Render(ctx context.Context, p signin.Page) template.HTML {
	var b bytes.Buffer
	_ = fakeKeyForm.Execute(&b, p)
	return template.HTML(b.String())
}

func (k *fakeKeyFactor) Verify(_ context.Context, u identity.User, _ signin.Input) (signin.Result, error) {
	return signin.Result{User: u, AMR: []string{"hwk", "user"}}, nil
}

func passkeyHarness(t *testing.T) (*harness, *testClock) {
	clk := &testClock{}
	var people *identity.Service
	h := newHarness(t, harnessOpts{backend: "memory", now: clk.now,
		methods: func(p *identity.Service, pw signin.Method) []signin.Method {
			people = p
			return []signin.Method{pw, &fakeKey{people: p}}
		},
		factors: func(otp signin.Factor) []signin.Factor {
			return []signin.Factor{otp, &fakeKeyFactor{fakeKey{people: people}}}
		}})
	return h, clk
}

func TestMFAPasskey(t *testing.T) {
	h, clk := passkeyHarness(t)

	t.Run("UV passkey sign-in counts as two factors", func(t *testing.T) {
		b := newBrowser(t)
		p, verifier := h.startAuth(t, b)
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "method": {"fakekey"}, "user": {testUser}})
		if p.loc == nil && strings.Contains(p.body, `value="continue"`) {
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}})
		}
		c := idClaims(t, h.finish(t, p, verifier))
		if c["acr"] != "phr" || !slices.Contains(amrOf(c), "hwk") {
			t.Fatalf("passkey sign-in: acr %v amr %v", c["acr"], c["amr"])
		}
	})
	t.Run("passkey as the factor after a password", func(t *testing.T) {
		b := newBrowser(t)
		p, verifier := h.passwordThenFactor(t, b)
		// The user has a passkey and no authenticator app: the page
		// offers the passkey only.
		if !strings.Contains(p.body, `value="fakekey"`) || strings.Contains(p.body, `name="otp"`) || strings.Contains(p.body, `name="password"`) {
			t.Fatalf("second-factor page: %d %s", p.status, p.body)
		}
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"factor"}, "factor": {"fakekey"}})
		if p.loc == nil && strings.Contains(p.body, `value="continue"`) {
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}})
		}
		c := idClaims(t, h.finish(t, p, verifier))
		amr := amrOf(c)
		if c["acr"] != "phr" || !slices.Contains(amr, "pwd") || !slices.Contains(amr, "hwk") || !slices.Contains(amr, "mfa") {
			t.Fatalf("password + passkey: acr %v amr %v", c["acr"], amr)
		}
	})
	t.Run("acr_values picks the requested value the session meets", func(t *testing.T) {
		b := newBrowser(t)
		p, verifier := h.startAuth(t, b)
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "method": {"fakekey"}, "user": {testUser}})
		if p.loc == nil {
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}})
		}
		h.finish(t, p, verifier)
		clk.advance(time.Second)
		p, verifier = h.startAuth(t, b, oauth2.SetAuthURLParam("acr_values", "urn:authd:acr:2fa"))
		if p.loc == nil {
			p = submit(t, b, h.srv.URL, p, url.Values{"step": {"continue"}})
		}
		if c := idClaims(t, h.finish(t, p, verifier)); c["acr"] != "urn:authd:acr:2fa" {
			t.Fatalf("acr %v, want the requested two-factor value", c["acr"])
		}
	})
}
