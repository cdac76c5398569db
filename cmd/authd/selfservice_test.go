package main

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/authd/authd/storage"
)

// TestSelfServiceThroughThePages: sign up → mail with code → verify →
// signed in and the app gets a code; recovery ends old sessions and
// tokens; email change shows in the profile and the ID token; deletion
// makes tokens inactive, frees the username and confirms by mail. All
// through authd serve's pages, with a real SMTP server on loopback.
func TestSelfServiceThroughThePages(t *testing.T) {
	s := newSelfService(t)
	const addr, pw = "newcomer@example.test", "first passphrase"

	// Sign up from the app's login page; the form is posted twice at once
	// (a double click) and once more (a retry after a timeout).
	ann := newBrowser(t, s.authd.base)
	login, verifier := s.authorize(ann, "state-signup-1")
	if login.status != http.StatusOK || !strings.Contains(login.body, "Create account") || !strings.Contains(login.body, "Forgot password?") {
		t.Fatalf("login page: %d %s", login.status, login.body)
	}
	form := ann.get(ann.link(login, "Create account"))
	if !strings.Contains(form.body, "Example App") {
		t.Fatalf("the sign-up page does not name the app: %s", form.body)
	}
	fields := url.Values{"email": {addr}, "password": {pw}}
	posted := time.Now()
	var wg sync.WaitGroup
	answers := make([]page, 3)
	for i := range 2 {
		wg.Go(func() { answers[i] = ann.submit(form, fields) })
	}
	wg.Wait()
	answers[2] = ann.submit(form, fields)
	for _, a := range answers {
		if a.status != http.StatusSeeOther || a.location != answers[0].location {
			t.Fatalf("the repeated form answered %d %s, the first %s", a.status, a.location, answers[0].location)
		}
	}
	codePage := ann.get(answers[0].location)
	m := s.smtp.WaitDelivered(t, addr, "Your code:", 15*time.Second)
	// The first attempt is made within a few seconds of the commit (the
	// mail worker polls every second).
	if d := time.Since(posted); d > 5*time.Second {
		t.Errorf("the code arrived %v after the sign-up", d)
	} else {
		t.Logf("the code arrived %v after the sign-up was posted", d.Round(time.Millisecond))
	}
	if !strings.Contains(m.Body, "Example App") || !strings.Contains(m.Body, addr) {
		t.Fatalf("the mail does not name the app and the address: %s", m.Body)
	}
	// The code signs the person in and the authorization request goes on:
	// the app (first-party, https redirect) gets its code at once.
	tok := s.exchange(ann.submit(codePage, url.Values{"code": {m.Code()}}), verifier)
	// The code form posted again (a double click): the account is ready,
	// and the page says where to go on, signed in.
	if again := ann.submit(codePage, url.Values{"code": {m.Code()}}); again.status != http.StatusOK || !strings.Contains(again.body, "Your account is ready") {
		t.Fatalf("the code posted again: %d %s", again.status, again.body)
	} else if p := ann.get(ann.link(again, "Continue")); p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, ssRedirect) {
		t.Fatalf("continue after a repeated code: %d %s", p.status, p.location)
	}
	if c := claims(t, tok); c["email"] != addr || c["email_verified"] != true {
		t.Fatalf("ID token claims after sign-up: %v", c)
	}
	time.Sleep(time.Second) // a second message would have arrived by now
	if n := countTo(s.smtp, addr); n != 1 {
		t.Fatalf("%d messages for one sign-up posted three times, want 1", n)
	}

	// Forgot password, from another browser: the old session and tokens die.
	bob := newBrowser(t, s.authd.base)
	login, _ = s.authorize(bob, "state-recover-1")
	rec := bob.get(bob.link(login, "Forgot password?"))
	p := bob.submit(rec, url.Values{"email": {addr}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("recovery: %d %s", p.status, p.body)
	}
	codePage = bob.get(p.location)
	m = s.smtp.WaitDelivered(t, addr, "new password", 15*time.Second)
	changed := bob.submit(codePage, url.Values{"code": {m.Code()}, "password": {"second passphrase"}})
	if changed.status != http.StatusOK || !strings.Contains(changed.body, "Your password was changed") {
		t.Fatalf("new password: %d %s", changed.status, changed.body)
	}
	s.smtp.WaitDelivered(t, addr, "password was changed", 15*time.Second)
	if s.active(tok.AccessToken) {
		t.Fatal("the access token survived the new password")
	}
	if _, err := s.conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Fatal("the refresh token survived the new password")
	}
	if again, _ := s.authorize(ann, "state-old-session"); again.status != http.StatusOK || !strings.Contains(again.body, "Sign in") {
		t.Fatalf("the old session survived the new password: %d %s", again.status, again.location)
	}

	// Sign in with the new password; change the address from the account page.
	cy := newBrowser(t, s.authd.base)
	login, verifier = s.authorize(cy, "state-email-1")
	tok = s.exchange(cy.submit(login, url.Values{"username": {addr}, "password": {"second passphrase"}}), verifier)
	acct := cy.get("/account")
	email := cy.get(cy.link(acct, "Change email address"))
	const newAddr = "moved@example.test"
	p = cy.submit(email, url.Values{"email": {newAddr}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("email change: %d %s", p.status, p.body)
	}
	codePage = cy.get(p.location)
	m = s.smtp.WaitDelivered(t, newAddr, "confirm", 15*time.Second)
	if p = cy.submit(codePage, url.Values{"code": {m.Code()}}); p.status != http.StatusOK || !strings.Contains(p.body, newAddr) {
		t.Fatalf("confirm: %d %s", p.status, p.body)
	}
	s.smtp.WaitDelivered(t, addr, "address was changed", 15*time.Second)
	login, verifier = s.authorize(cy, "state-email-2")
	tok = s.exchange(login, verifier) // signed in: the code comes without a page
	if c := claims(t, tok); c["email"] != newAddr {
		t.Fatalf("ID token email after the change: %v", c["email"])
	}
	if ui := userinfo(t, s.authd.base, tok.AccessToken); ui["email"] != newAddr {
		t.Fatalf("UserInfo email after the change: %v", ui)
	}

	// Delete the account (signed in a moment ago: no password asked).
	del := cy.get(cy.link(cy.get("/account"), "Delete account"))
	if strings.Contains(del.body, `name="password"`) {
		t.Fatal("a fresh sign-in was asked for its password")
	}
	if p = cy.submit(del, nil); p.status != http.StatusOK || !strings.Contains(p.body, "Your account was deleted") {
		t.Fatalf("delete: %d %s", p.status, p.body)
	}
	if s.active(tok.AccessToken) {
		t.Fatal("a token survived the deletion")
	}
	s.smtp.WaitDelivered(t, newAddr, "deleted", 15*time.Second)
	req, _ := http.NewRequest(http.MethodGet, s.authd.base+"/admin/users/"+url.PathEscape(newAddr), nil)
	req.Header.Set("Authorization", "Bearer adm")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the user after deletion: %v %v", resp.StatusCode, err)
	}
	// The name is free: a new sign-up under it verifies.
	dan := newBrowser(t, s.authd.base)
	login, _ = s.authorize(dan, "state-again")
	codePage = s.signUp(dan, login, newAddr, "third passphrase")
	m = s.smtp.WaitDelivered(t, newAddr, "Your code:", 15*time.Second)
	if p = dan.submit(codePage, url.Values{"code": {m.Code()}}); p.status != http.StatusSeeOther {
		t.Fatalf("sign-up under a freed name: %d %s", p.status, p.body)
	}
}

// TestSelfServiceEnumeration: for sign-up and recovery, a known and an
// unknown address get the same page (once the flow ID and the address
// typed are taken out).
func TestSelfServiceEnumeration(t *testing.T) {
	s := newSelfService(t)
	if err := s.store.CreateUser(t.Context(), &storage.User{Username: "known@example.test", Email: "known@example.test",
		PasswordHash: []byte("x"), CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	norm := func(p page, addr string) string {
		// The flow ID, the address typed and the browser's CSRF token
		// are the only differences allowed.
		body := csrfRe.ReplaceAllString(strings.ReplaceAll(p.body, addr, "ADDRESS"), "CSRF")
		return flowRe.ReplaceAllString(body, "FLOW")
	}
	for _, c := range []struct{ link, field string }{{"Create account", "email"}, {"Forgot password?", "email"}} {
		var pages []string
		var statuses []int
		for _, addr := range []string{"known@example.test", "unknown@example.test"} {
			b := newBrowser(t, s.authd.base)
			login, _ := s.authorize(b, "state-enum-1")
			form := b.get(b.link(login, c.link))
			p := b.submit(form, url.Values{"email": {addr}, "password": {"some passphrase"}})
			if p.status != http.StatusSeeOther {
				t.Fatalf("%s %s: %d %s", c.link, addr, p.status, p.body)
			}
			statuses = append(statuses, p.status)
			next := b.get(p.location)
			pages = append(pages, norm(next, addr))
		}
		if pages[0] != pages[1] || statuses[0] != statuses[1] {
			t.Fatalf("%s: the pages differ for a known and an unknown address:\n%s\n----\n%s", c.link, pages[0], pages[1])
		}
	}
	// The owner of the known address got a note, never a code.
	note := s.smtp.WaitDelivered(t, "known@example.test", "Someone tried", 15*time.Second)
	if note.Code() != "" {
		t.Fatal("the note carries a code")
	}
}

// TestSignupOff: with AUTHD_SIGNUP=off there is no sign-up; recovery stays.
func TestSignupOff(t *testing.T) {
	s := newSelfService(t, "AUTHD_SIGNUP=off")
	b := newBrowser(t, s.authd.base)
	login, _ := s.authorize(b, "state-off-1")
	if strings.Contains(login.body, "Create account") || !strings.Contains(login.body, "Forgot password?") {
		t.Fatalf("login page with sign-up off: %s", login.body)
	}
	if p := b.get("/signup"); p.status != http.StatusNotFound {
		t.Fatalf("GET /signup with sign-up off: %d", p.status)
	}
	if p := b.get("/recover"); p.status != http.StatusOK {
		t.Fatalf("GET /recover: %d", p.status)
	}
	// Email change and deletion are there for signed-in users (401 here:
	// this browser is not signed in), not 404.
	for _, path := range []string{"/account/email", "/account/delete"} {
		if p := b.get(path); p.status != http.StatusUnauthorized {
			t.Fatalf("GET %s with sign-up off: %d", path, p.status)
		}
	}
}

// TestMailSentAfterProcessKilledBeforeSend: an authd process commits a
// sign-up (and its message) and is killed with SIGKILL when its mail
// worker is about to send; another process claims the message once the
// lease expires and delivers it, once.
func TestMailSentAfterProcessKilledBeforeSend(t *testing.T) {
	s := newSelfService(t, "AUTHD_JOB_LEASE=2s")
	// s.authd stays up: the doomed process is another one on the same
	// database; s.authd's worker must not win the claim, so it is stopped
	// first.
	_ = s.authd.cmd.Process.Kill()
	<-s.authd.done
	s.authd.done <- nil
	a := startAuthd(t, s.bin, freeAddr(t), s.env, []string{"AUTHD_FAULT=kill-before-mail-send"})
	b := newBrowser(t, a.base)
	s.conf.Endpoint.AuthURL = a.base + "/oauth2/authorize"
	login, _ := s.authorize(b, "state-kill-1")
	s.signUp(b, login, "crash@example.test", "crash passphrase")
	a.waitKilled(t, 20*time.Second, "process A was not killed before the send")
	if n := len(s.smtp.Received()); n != 0 {
		t.Fatalf("%d messages before the takeover", n)
	}
	startAuthd(t, s.bin, freeAddr(t), s.env, nil)
	m := s.smtp.WaitDelivered(t, "crash@example.test", "Your code:", 20*time.Second)
	time.Sleep(time.Second)
	if n := countTo(s.smtp, "crash@example.test"); n != 1 || m.Code() == "" {
		t.Fatalf("%d messages after the takeover, want 1 with a code", n)
	}
}

// TestDevPrintsMail: "authd dev" with AUTHD_SIGNUP=on keeps its outbox in
// memory and prints each message to its log instead of sending it; the
// code read from the log completes the sign-up and the demo app gets a
// code.
func TestDevPrintsMail(t *testing.T) {
	stdout, stderr := startCommand(t, []string{"dev", "-addr", "127.0.0.1:0"}, map[string]string{"AUTHD_SIGNUP": "on"}, regexp.MustCompile(`Ctrl-C`))
	authURL := authURLRe.FindStringSubmatch(stdout.String())[1]
	u, _ := url.Parse(authURL)
	b := newBrowser(t, u.Scheme+"://"+u.Host)
	login := b.get(authURL)
	form := b.get(b.link(login, "Create account"))
	p := b.submit(form, url.Values{"email": {"dev@example.test"}, "password": {"dev passphrase"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("sign-up: %d %s", p.status, p.body)
	}
	codePage := b.get(p.location)
	codeRe := regexp.MustCompile(`Your code is (\d{6})`)
	var code string
	for deadline := time.Now().Add(15 * time.Second); code == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := codeRe.FindStringSubmatch(stderr.String()); m != nil {
			code = m[1]
		}
	}
	if code == "" {
		t.Fatalf("no mail in dev's log:\n%s", stderr.String())
	}
	p = b.submit(codePage, url.Values{"code": {code}})
	// The demo client is public with a loopback redirect: the one-tap
	// page (RFC 8252 §8.6) or the consent page comes before its code.
	for i := 0; i < 3 && p.status == http.StatusOK; i++ {
		p = b.submit(p, url.Values{"decision": {"allow"}})
	}
	if p.status != http.StatusSeeOther || !strings.Contains(p.location, "/demo/callback?code=") {
		t.Fatalf("after the code: %d %s %s", p.status, p.location, p.body)
	}
}
