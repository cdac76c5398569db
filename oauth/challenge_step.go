package oauth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/authsession"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/signin/pwd"
	"github.com/authd/authd/storage"
)

// challengeExchange answers a step of the challenge endpoint (the
// exchanger behind the replay cache; docs/architecture.md, "First-party
// apps"). PostgreSQL is the arbiter, as for a code exchange:
//
//  1. a step whose replay record exists answers from it (a retry whose
//     Redis entry is gone), before any work;
//  2. otherwise the step runs, and its answer — success or a failure the
//     user must see (a wrong password, a wrong code) — commits in one
//     transaction with the session's advance, the code and the replay
//     record;
//  3. a duplicate that ran concurrently (Redis down) loses at the
//     record's key or at the session's version, and is answered from the
//     winner's record.
func (s *Server) challengeExchange(ctx context.Context, req *tokenRequest) (*answer, error) {
	if a, err := s.challengeFromRecord(ctx, req); a != nil || err != nil {
		return a, err
	}
	a, err := s.challengeStep(ctx, req)
	if errors.Is(err, storage.ErrAlreadyExists) || errors.Is(err, errInvalidSession) {
		if ra, rerr := s.challengeFromRecord(ctx, req); ra != nil || rerr != nil {
			return ra, rerr
		}
	}
	if errors.Is(err, storage.ErrAlreadyExists) {
		err = errInvalidSession
	}
	return a, err
}

// challengeFromRecord answers a step from its replay record: (nil, nil)
// when there is none for this request.
func (s *Server) challengeFromRecord(ctx context.Context, req *tokenRequest) (*answer, error) {
	if s.challengeWindow() <= 0 {
		return nil, nil
	}
	rec, err := s.store.GetReplayRecord(ctx, req.id.key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	if subtle.ConstantTimeCompare([]byte(rec.Fingerprint), []byte(req.id.fingerprint)) != 1 {
		return nil, nil
	}
	if now := s.now(); !now.Before(rec.WindowEnd) {
		// The same input sent again after the window is a new attempt:
		// its answer takes the key of the ended record, which the
		// janitor may not have deleted yet.
		if err := s.store.DeleteEndedReplayRecord(ctx, req.id.key, now); err != nil {
			return nil, fosite.ErrServerError.WithWrap(err)
		}
		return nil, nil
	}
	if rec.Revoked {
		// The user was disabled, deleted or signed out since (the
		// revocation contract marks the subject's records).
		return nil, errInvalidSession
	}
	a, ok := openChallenge(s.challengeKeySeal(), req, rec.Sealed)
	if !ok {
		return nil, nil
	}
	a.path, a.windowEnd = pathRecord, rec.WindowEnd
	return a, nil
}

// challengeKeySeal is the sealing key of step answers: the replay cache's.
func (s *Server) challengeKeySeal() []byte { return deriveKey(s.cfg.Secret, "replay-cache") }

// stepState is a step in progress.
type stepState struct {
	req    *tokenRequest
	client *storage.Client
	as     *storage.AuthSession
	handle string
	params url.Values
	user   identity.User
	// failure is what the user must be told (a wrong password or code),
	// answered as insufficient_authorization and recorded.
	failure *signin.Failure
	// grantID is the request ID of the code this step issued ("" for
	// none): its replay record belongs to that grant.
	grantID string
}

// challengeStep runs one step.
func (s *Server) challengeStep(ctx context.Context, req *tokenRequest) (*answer, error) {
	st := &stepState{req: req, client: req.client.(*storage.Client)}
	if err := s.loadStep(ctx, st); err != nil {
		return nil, err
	}
	// The password before the transaction: the slow hash holds no
	// database connection. Its back-off is the login page's (signin/pwd).
	if req.step.kind == inputPassword {
		if err := s.passwordStep(ctx, st); err != nil {
			return nil, err
		}
	}
	tx, err := s.store.BeginDeferredTX(ctx)
	if err != nil {
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	defer func() { _ = s.store.Rollback(tx) }() // a no-op after the commit
	if st.handle == "" {
		if st.handle, err = s.authSessions.Start(tx, st.as); err != nil {
			return nil, fosite.ErrServerError.WithWrap(err)
		}
	}
	reply, err := s.stepReply(tx, st)
	if err != nil {
		return nil, err
	}
	if err := s.authSessions.Advance(tx, st.as); err != nil {
		if errors.Is(err, authsession.ErrInvalid) {
			return nil, errInvalidSession // another step won; challengeExchange looks for our record
		}
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	a := &answer{path: pathFresh, reply: reply}
	window := s.challengeWindow()
	if window <= 0 {
		if err := s.store.Commit(tx); err != nil {
			return nil, commitError(err)
		}
		s.trimAfter(ctx, st)
		return a, nil
	}
	if a.sealed, err = sealReply(s.challengeKeySeal(), req.id, reply); err != nil {
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	a.windowEnd = s.now().Add(window)
	// The final step's record belongs to the code's grant: revoking the
	// grant (or the user's sessions and tokens) revokes it, and its
	// replay is invalid_session. Each other step's record is a grant of
	// its own, so no step supersedes another: the same wrong password
	// typed again, after another, is still answered as the first time.
	grant := st.grantID
	if grant == "" {
		grant = fmt.Sprintf("as:%s:%d", st.as.ID, st.as.Version)
	}
	a.superseded, err = s.store.CommitWithReplayRecord(tx, &storage.ReplayRecord{
		Key: req.id.key, RequestID: grant, ClientID: st.client.ID, Subject: st.as.Subject,
		Fingerprint: req.id.fingerprint, Sealed: a.sealed, WindowEnd: a.windowEnd,
	})
	if err != nil {
		return nil, commitError(err)
	}
	s.trimAfter(ctx, st)
	return a, nil
}

// trimAfter trims the user's sessions after a step that opened one,
// outside its transaction (identity.OpenSession).
func (s *Server) trimAfter(ctx context.Context, st *stepState) {
	if st.as.Done && st.as.Subject != "" {
		s.people.TrimSessions(context.WithoutCancel(ctx), st.as.Subject)
	}
}

// commitError: a duplicate's record won (ErrAlreadyExists, answered from
// it), a session ended meanwhile (invalid_session), or a server error.
func commitError(err error) error {
	switch {
	case errors.Is(err, storage.ErrAlreadyExists):
		return err
	case errors.Is(err, storage.ErrNotFound):
		return errInvalidSession
	}
	return fosite.ErrServerError.WithWrap(err)
}

// loadStep reads the auth_session of a continuing step (bound to the
// client and the DPoP key, draft §9) and its user, or prepares a new one.
func (s *Server) loadStep(ctx context.Context, st *stepState) error {
	req, step := st.req, st.req.step
	if step.handle == "" {
		st.as = &storage.AuthSession{ClientID: st.client.ID, JKT: req.jkt, CodeChallenge: step.codeChallenge,
			Params: url.Values{"scope": {strings.Join(step.scope, " ")}}.Encode() + "&" + step.params.Encode()}
		st.params, _ = url.ParseQuery(st.as.Params)
		return nil
	}
	as, err := s.authSessions.Get(ctx, step.handle)
	if errors.Is(err, authsession.ErrInvalid) {
		return errInvalidSession
	}
	if err != nil {
		return fosite.ErrServerError.WithWrap(err)
	}
	if as.ClientID != st.client.ID || subtle.ConstantTimeCompare([]byte(as.JKT), []byte(req.jkt)) != 1 {
		return errInvalidSession
	}
	st.as, st.handle = as, step.handle
	st.params, _ = url.ParseQuery(as.Params)
	if as.Subject != "" {
		u, err := s.people.GetBySubject(ctx, as.Subject)
		if errors.Is(err, identity.ErrUserNotFound) || (err == nil && u.Disabled) {
			return errInvalidSession
		}
		if err != nil {
			return fosite.ErrServerError.WithWrap(err)
		}
		st.user = u
	}
	return nil
}

// passwordStep checks a username and password with the login page's
// password method: its back-off (per username, per address) is shared,
// and an unknown user, a wrong password and a disabled user are one
// answer.
func (s *Server) passwordStep(ctx context.Context, st *stepState) error {
	if st.as.Subject != "" {
		return fosite.ErrInvalidRequest.WithHint("The user of this auth_session has signed in; send the second factor.")
	}
	m := s.methods.byName[pwd.Name]
	if m == nil {
		return fosite.ErrInvalidRequest.WithHint("Password sign-in is not enabled.")
	}
	res, err := m.Verify(ctx, signin.Input{Fields: st.req.step.fields, RemoteIP: clientIP(st.req.r)})
	return s.stepResult(st, res, err)
}

// stepResult applies a method's or factor's answer: a Result advances the
// session; a *Failure is the answer to record (429 is answered, not
// recorded: the same request later may pass).
func (s *Server) stepResult(st *stepState, res signin.Result, err error) error {
	var f *signin.Failure
	switch {
	case err == nil:
	case errors.As(err, &f) && f.Status == http.StatusTooManyRequests:
		return errTooManyRequests(f.RetryAfter, f.Message)
	case errors.As(err, &f):
		st.failure = f
		return nil
	case errors.Is(err, signin.ErrUnavailable), errors.Is(err, storage.ErrUnavailable):
		return errUnavailable
	default:
		return fosite.ErrServerError.WithWrap(err)
	}
	now := storage.NormalizeTime(s.now())
	if st.as.Subject == "" {
		st.as.Subject, st.as.AMR, st.as.AuthTime, st.user = res.User.Subject, slices.Clone(res.AMR), now, res.User
		return nil
	}
	// A second factor (factor.go's raise: amr gains it and "mfa").
	for _, v := range append(slices.Clone(res.AMR), mfaAMR) {
		if !slices.Contains(st.as.AMR, v) {
			st.as.AMR = append(st.as.AMR, v)
		}
	}
	st.as.AuthTime = now
	return nil
}

// stepReply runs the step's input inside tx (a factor's use commits with
// the answer) and asks decide what comes next.
func (s *Server) stepReply(tx context.Context, st *stepState) (*challengeReply, error) {
	switch st.req.step.kind {
	case inputOTP:
		if err := s.factorStepNative(tx, st, "otp"); err != nil {
			return nil, err
		}
	case inputPasskeyOptions:
		return s.passkeyOptions(tx, st)
	case inputPasskeyAssertion:
		if err := s.passkeyStep(tx, st); err != nil {
			return nil, err
		}
	}
	return s.nextReply(tx, st)
}

// factorStepNative checks a second factor of the signed-in user, bounded
// by the flow's per-user and per-session budgets (factor.go; the session
// is the auth_session).
func (s *Server) factorStepNative(tx context.Context, st *stepState, name string) error {
	if st.as.Subject == "" {
		return fosite.ErrInvalidRequest.WithHint("Sign in first (username and password), then send the second factor.")
	}
	if amrLevel(st.as.AMR) >= 2 {
		return nil // proven already; nothing is used or charged
	}
	cur := signedIn{user: st.user, session: identity.Session{ID: "as:" + st.as.ID}}
	if d := s.factorBlocked(tx, cur); d > 0 {
		return errTooManyRequests(d, tooManyAttempts(d))
	}
	i := slices.IndexFunc(s.factors, func(f signin.Factor) bool { return f.Name() == name })
	if i < 0 {
		return fosite.ErrInvalidRequest.WithHint("This second factor is not enabled.")
	}
	res, err := s.factors[i].Verify(tx, st.user, signin.Input{Fields: st.req.step.fields, RemoteIP: clientIP(st.req.r)})
	var f *signin.Failure
	if errors.As(err, &f) && f.Status != http.StatusTooManyRequests {
		// A duplicate of this request that ran concurrently (no Redis)
		// may have used the code: it committed its answer before our
		// check could see the code used. Not a wrong code: answered from
		// its record, and not charged.
		if rec, rerr := s.store.GetReplayRecord(tx, st.req.id.key); rerr == nil && rec.Fingerprint == st.req.id.fingerprint {
			return storage.ErrAlreadyExists
		}
		s.chargeFactor(tx, cur)
	}
	return s.stepResult(st, res, err)
}

// nextReply is decide's answer for the step (next.go), rendered as the
// challenge endpoint answers: the sign-in and factor steps are
// insufficient_authorization naming what to send next; consent (asked
// only with prompt=consent: a first_party client skips it) and a factor
// to set up are redirect_to_web; the code is 200 (draft §5.2.1).
func (s *Server) nextReply(tx context.Context, st *stepState) (*challengeReply, error) {
	acr, _ := parseACR(st.params)
	in := stepInput{
		now: s.now(), maxAge: -1, promptConsent: slices.Contains(strings.Fields(st.params.Get("prompt")), "consent"),
		public: st.client.IsPublic(), skipConsent: true, silentSSO: s.cfg.SilentSSO,
		// The user acted on this request (typed the password, the code):
		// the interaction RFC 8252 §8.6 asks for.
		proven: true, interacted: true,
	}
	if st.as.Subject != "" {
		in.session = &stepSession{subject: st.as.Subject, authTime: st.as.AuthTime, factor: amrLevel(st.as.AMR) >= 2}
		in.factorRequired, _ = s.factorRequiredFor(tx, acr, st.client.RequireMFA, st.user, st.as.AMR, nil)
	}
	switch next := decide(in); next {
	case stepSignIn, stepReauth:
		return s.insufficient(st, "Sign in with a username and password or a passkey.", "methods", s.nativeMethods()), nil
	case stepFactor:
		has, err := s.nativeFactors(tx, st.user)
		if err != nil {
			return nil, fosite.ErrServerError.WithWrap(err)
		}
		if len(has) == 0 {
			// The user must set up a second factor: in the browser.
			return s.redirectToWeb(tx, st, "Set up a second factor in the browser to continue.")
		}
		return s.insufficient(st, "Send a second factor.", "factors", has), nil
	case stepConsent:
		return s.redirectToWeb(tx, st, "The user must consent in the browser.")
	case stepIssue:
		return s.issueChallengeCode(tx, st)
	default:
		return nil, fosite.ErrServerError.WithHintf("Unexpected step %s.", next)
	}
}

// challengeBody is the JSON of a step's answer: RFC 6749 §5.2 members and
// the draft's (§5.2.2 auth_session, request_uri), and authd's documented
// ones: methods (first-factor inputs the app may send: "password",
// "passkey"), factors (second-factor inputs: "otp", "passkey") and
// passkey_options (PublicKeyCredentialRequestOptions as JSON, after
// passkey=options) and, with redirect_to_web, request_uri, expires_in
// and state.
type challengeBody struct {
	AuthorizationCode string          `json:"authorization_code,omitempty"`
	Error             string          `json:"error,omitempty"`
	Description       string          `json:"error_description,omitempty"`
	AuthSession       string          `json:"auth_session,omitempty"`
	Methods           []string        `json:"methods,omitempty"`
	Factors           []string        `json:"factors,omitempty"`
	PasskeyOptions    json.RawMessage `json:"passkey_options,omitempty"`
	RequestURI        string          `json:"request_uri,omitempty"`
	ExpiresIn         int64           `json:"expires_in,omitempty"`
	// State is the state of a redirect_to_web's pushed request: the
	// first request's, or one authd chose.
	State string `json:"state,omitempty"`
}

func replyOf(status int, b challengeBody) *challengeReply {
	body, _ := json.Marshal(b) // no value of challengeBody fails to marshal
	return &challengeReply{status: status, body: append(body, '\n')}
}

// insufficient is §5.2.2's insufficient_authorization (403) with the
// auth_session; a failure of this step is its description.
func (s *Server) insufficient(st *stepState, desc, member string, names []string) *challengeReply {
	if st.failure != nil {
		desc = st.failure.Message
	}
	b := challengeBody{Error: "insufficient_authorization", Description: errorDescription(desc), AuthSession: st.handle}
	if member == "methods" {
		b.Methods = names
	} else {
		b.Factors = names
	}
	return replyOf(http.StatusForbidden, b)
}

// nativeMethods are the first-factor inputs the endpoint takes.
func (s *Server) nativeMethods() []string {
	var out []string
	for _, n := range []string{pwd.Name, passkeyName} {
		if s.methods.byName[n] != nil {
			out = append(out, n)
		}
	}
	return out
}

// nativeFactors are the second-factor inputs u has set up.
func (s *Server) nativeFactors(ctx context.Context, u identity.User) ([]string, error) {
	var out []string
	for _, f := range s.factors {
		if f.Name() != "otp" && f.Name() != passkeyName {
			continue
		}
		ok, err := f.Has(ctx, u)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, f.Name())
		}
	}
	return out, nil
}

// issueChallengeCode mints the code through the authorization endpoint's
// path (prepareCode, code.go): a session row for the user (no cookie: the
// app holds the tokens), so signing out, disabling or deleting the user
// ends it and back-channel logout knows it; the code bound to the PKCE
// challenge, without redirect_uri (draft §6: the token request sends
// none), and to the DPoP key when the session has one (RFC 9449 §10).
func (s *Server) issueChallengeCode(tx context.Context, st *stepState) (*challengeReply, error) {
	bs, err := s.people.OpenSession(tx, st.as.Subject, st.as.AMR, st.as.AuthTime)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, errInvalidSession // disabled or deleted meanwhile
		}
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	ar := fosite.NewAuthorizeRequest()
	ar.Client = st.req.client
	ar.ResponseTypes = fosite.Arguments{"code"}
	ar.RequestedScope = fosite.Arguments(strings.Fields(st.params.Get("scope")))
	ar.RedirectURI = &url.URL{}
	ar.RequestedAt = s.now().UTC()
	ar.Form = url.Values{"code_challenge": {st.as.CodeChallenge}, "code_challenge_method": {"S256"}}
	for _, k := range []string{"nonce", "acr_values"} {
		if v := st.params.Get(k); v != "" {
			ar.Form.Set(k, v)
		}
	}
	if st.as.JKT != "" {
		ar.Form.Set("dpop_jkt", st.as.JKT)
	}
	resp, err := s.prepareCode(tx, ar, signedIn{session: bs, user: st.user})
	if errors.Is(err, errSessionEnded) {
		return nil, errInvalidSession
	}
	if err != nil {
		return nil, err
	}
	st.as.Done, st.grantID = true, ar.GetID()
	return replyOf(http.StatusOK, challengeBody{AuthorizationCode: resp.GetCode()}), nil
}
