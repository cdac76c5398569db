// Package accountweb is the pages of self-service accounts (package
// accounts): sign-up and its verification, password recovery, email
// change and account deletion. It is an adapter: it depends on the
// accounts service and on two functions of the sign-in flow that
// cmd/authd hands it (the browser's session, and signing a person in), so
// a sign-up ends in the authorization request it started from.
//
// Every page is web/templates' selfservice.html, served with the same
// headers as the sign-in pages (a CSP without inline script or style, no
// framing, no referrer, no-store), and every form carries a CSRF token
// (double-submit cookie, the token an HMAC of it) and is refused when
// posted from another origin. An answer never tells whether an account
// exists: sign-up and recovery redirect to the same "enter the code" page
// for any address.
package accountweb
