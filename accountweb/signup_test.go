package accountweb

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

var hiddenRe = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// Sixteen identical submits of one sign-up form at once (a double click,
// a retry after a timeout, from one source) get the same redirect to the
// same code page: none is refused by the limits (5 messages an address),
// one flow and one message are written.
func TestSignupConcurrentRepeatsAnswerAlike(t *testing.T) {
	pool := pgtest.New(t)
	h := newHandlerOn(t, postgres.New(pool), nil)
	get := httptest.NewRecorder()
	h.ServeHTTP(get, httptest.NewRequest(http.MethodGet, PathSignup, nil))
	form := url.Values{"email": {"many@example.test"}, "password": {"a long passphrase"}}
	for _, m := range hiddenRe.FindAllStringSubmatch(get.Body.String(), -1) {
		form.Set(m[1], m[2])
	}
	if form.Get("form_token") == "" || form.Get("csrf_token") == "" {
		t.Fatalf("no form token on the page: %s", get.Body)
	}
	cookies := get.Result().Cookies()
	recs := make([]*httptest.ResponseRecorder, 16)
	var wg sync.WaitGroup
	for i := range recs {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodPost, PathSignup, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for _, c := range cookies {
				req.AddCookie(c)
			}
			recs[i] = httptest.NewRecorder()
			h.ServeHTTP(recs[i], req)
		})
	}
	wg.Wait()
	for i, rec := range recs {
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != recs[0].Header().Get("Location") ||
			!strings.HasPrefix(rec.Header().Get("Location"), PathSignupVerify+"?flow=") {
			t.Fatalf("submit %d: %d %q (the first %d %q) %s", i, rec.Code, rec.Header().Get("Location"),
				recs[0].Code, recs[0].Header().Get("Location"), rec.Body)
		}
	}
	var flows, mails int
	if err := pool.QueryRow(t.Context(), `select (select count(*) from account_flows), (select count(*) from mail_outbox)`).Scan(&flows, &mails); err != nil {
		t.Fatal(err)
	}
	if flows != 1 || mails != 1 {
		t.Fatalf("%d flows and %d messages for one form, want 1 and 1", flows, mails)
	}
}
