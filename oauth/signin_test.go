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

	"golang.org/x/oauth2"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/signin"
)

// magicMethod is a second sign-in method, written here as a method of
// another package would be: it knows the signin seam and the identity
// service, not the flow. It proves who you are with a magic word, on the
// login page (Verify) or on a route of its own (Routes: the way an
// upstream provider's callback comes back).
type magicMethod struct {
	people *identity.Service
}

const magicWord = "open sesame"

var magicForm = template.Must(template.New("magic").Parse(`<form method="post" action="{{.Action}}" class="magic">
<input type="hidden" name="csrf_token" value="{{.CSRFToken}}">
<input type="hidden" name="step" value="login">
<input type="hidden" name="method" value="magic">
<input name="user" value="{{.Username}}"><input name="word"{{if .Invalid}} aria-invalid="true"{{end}}>
<button type="submit">Say the word</button>
</form>
`))

func (m *magicMethod) Name() string { return "magic" }

func (m *magicMethod) Render(_ context.Context, p signin.Page) template.HTML {
	var b bytes.Buffer
	_ = magicForm.Execute(&b, p)
	return template.HTML(b.String())
}

func (m *magicMethod) Verify(ctx context.Context, in signin.Input) (signin.Result, error) {
	return m.check(ctx, in.Fields.Get("user"), in.Fields.Get("word"))
}

func (m *magicMethod) check(ctx context.Context, user, word string) (signin.Result, error) {
	if word != magicWord {
		return signin.Result{}, &signin.Failure{Status: http.StatusUnauthorized, Message: "That is not the word.", Username: user, Invalid: true}
	}
	u, err := m.people.Get(ctx, user)
	if err != nil {
		return signin.Result{}, &signin.Failure{Status: http.StatusUnauthorized, Message: "That is not the word.", Username: user, Invalid: true}
	}
	return signin.Result{User: u, AMR: []string{"user", "kba"}}, nil
}

// Routes: GET /signin/magic/callback?return_to=…&user=…&word=…
func (m *magicMethod) Routes(f signin.Flow) []signin.Route {
	return []signin.Route{{Method: http.MethodGet, Path: "callback", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		res, err := m.check(r.Context(), q.Get("user"), q.Get("word"))
		if err != nil {
			f.Fail(w, r, q.Get("return_to"), err.(*signin.Failure))
			return
		}
		f.Complete(w, r, q.Get("return_to"), res)
	})}}
}

func magicHarness(t *testing.T) (*harness, *identity.Service) {
	var people *identity.Service
	h := newHarness(t, harnessOpts{backend: "memory", methods: func(p *identity.Service, pw signin.Method) []signin.Method {
		people = p
		return []signin.Method{pw, &magicMethod{people: p}}
	}})
	return h, people
}

// TestSecondMethod: a method added by registration alone (no edit of the
// flow) appears on the login page after the password form, signs in, is
// recorded in the session's amr, and its own route hands a result back to
// the flow, which continues the authorization request it names and only
// that endpoint (no open redirect).
func TestSecondMethod(t *testing.T) {
	t.Parallel()
	h, people := magicHarness(t)
	conf := h.oauthConfig(publicClient)
	authURL := conf.AuthCodeURL("state-0123", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))

	t.Run("login page lists both, in order", func(t *testing.T) {
		p := get(t, newBrowser(t), authURL)
		pw, magic := strings.Index(p.body, `name="password"`), strings.Index(p.body, `value="magic"`)
		if p.status != http.StatusOK || pw < 0 || magic < 0 || pw > magic {
			t.Fatalf("login page %d: password form at %d, magic at %d: %s", p.status, pw, magic, p.body)
		}
	})

	t.Run("login POST with method=magic", func(t *testing.T) {
		b := newBrowser(t)
		p := get(t, b, authURL)
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "method": {"magic"}, "user": {testUser}, "word": {"abracadabra"}})
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "That is not the word.") ||
			!strings.Contains(p.body, `name="word" aria-invalid="true"`) || strings.Contains(p.body, `aria-invalid="true" autofocus`) {
			t.Fatalf("wrong word: %d %s", p.status, p.body)
		}
		p = submit(t, b, h.srv.URL, p, url.Values{"step": {"login"}, "method": {"magic"}, "user": {testUser}, "word": {magicWord}})
		if p.loc == nil || p.loc.Query().Get("code") == "" {
			t.Fatalf("right word: want a code, got %d %s", p.status, p.body)
		}
		sessions, err := people.Sessions(context.Background(), testUser)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(sessions, func(s identity.Session) bool { return slices.Equal(s.AMR, []string{"user", "kba"}) }) {
			t.Fatalf("no session records the method's amr: %+v", sessions)
		}
	})

	t.Run("unknown method", func(t *testing.T) {
		b := newBrowser(t)
		p := submit(t, b, h.srv.URL, get(t, b, authURL), url.Values{"step": {"login"}, "method": {"carrier-pigeon"}})
		if p.status != http.StatusBadRequest || p.loc != nil || !strings.Contains(p.body, `name="password"`) {
			t.Fatalf("unknown method: %d %s", p.status, p.body)
		}
	})

	u, _ := url.Parse(authURL)
	returnTo := u.RequestURI()
	callback := func(returnTo, word string) string {
		return h.srv.URL + "/signin/magic/callback?" + url.Values{"return_to": {returnTo}, "user": {testUser}, "word": {word}}.Encode()
	}

	t.Run("own route completes the request", func(t *testing.T) {
		p := get(t, newBrowser(t), callback(returnTo, magicWord))
		if p.loc == nil || p.loc.Query().Get("code") == "" || p.loc.Query().Get("state") != "state-0123" {
			t.Fatalf("callback: want the app's redirect with a code, got %d %v %s", p.status, p.loc, p.body)
		}
		if got := p.loc.Scheme + ":" + p.loc.Opaque + p.loc.Path; !strings.HasPrefix(publicRedirect, strings.TrimSuffix(got, "/")) {
			t.Fatalf("callback redirected to %s", p.loc)
		}
	})

	t.Run("own route fails to the login page", func(t *testing.T) {
		p := get(t, newBrowser(t), callback(returnTo, "abracadabra"))
		if p.status != http.StatusUnauthorized || p.loc != nil || !strings.Contains(p.body, "That is not the word.") ||
			!strings.Contains(p.body, `name="password"`) {
			t.Fatalf("failed callback: %d %v %s", p.status, p.loc, p.body)
		}
	})

	t.Run("own route has its own metrics label", func(t *testing.T) {
		m := get(t, newBrowser(t), h.srv.URL+"/metrics")
		if !strings.Contains(m.body, `route="/signin/magic/callback"`) {
			t.Fatalf("no request metric labelled with the method's route")
		}
	})

	for _, bad := range []string{
		"https://evil.example" + returnTo,
		"//evil.example" + returnTo,
		"/\\evil.example" + returnTo,
		"/account",
		"/oauth2/authorize/../../account?" + u.RawQuery,
		returnTo + "#frag",
		"javascript:alert(1)",
		"",
	} {
		t.Run("refuses return_to "+bad, func(t *testing.T) {
			p := get(t, newBrowser(t), callback(bad, magicWord))
			if p.status != http.StatusBadRequest || p.loc != nil {
				t.Fatalf("return_to %q: %d %v %s", bad, p.status, p.loc, p.body)
			}
		})
	}
}
