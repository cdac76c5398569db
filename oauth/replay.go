package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
)

const (
	// replayInflightTTL bounds how long a claim survives a crashed node;
	// longer than any sane exchange.
	replayInflightTTL = 10 * time.Second
	// failOpenLogEvery rate-limits the "cache unavailable" warning.
	failOpenLogEvery = 10 * time.Second
	// replayClaimRounds bounds claim → wait → released → claim loops.
	replayClaimRounds = 3
)

// replayer puts the exchange replay cache in front of fosite's token
// endpoint (design.md, "Token exchange with the replay cache"). It is an
// accelerator, never the arbiter: any cache error means the request goes
// straight to fosite with today's spec behaviour (fail open).
type replayer struct {
	s         *Server
	cache     exchangecache.Cache
	sealKey   []byte
	lastWarn  atomic.Int64
	window    time.Duration
	waitLimit time.Duration
}

func newReplayer(s *Server, c exchangecache.Cache) *replayer {
	return &replayer{
		s:         s,
		cache:     c,
		sealKey:   deriveKey(s.cfg.Secret, "replay-cache"),
		window:    s.cfg.ReplayWindow,
		waitLimit: s.cfg.ReplayWaitTimeout,
	}
}

// exchangeIdentity is what identifies "the same request" for one grant.
type exchangeIdentity struct {
	key         string // signature of the code or refresh token, prefixed by kind
	fingerprint string // exchangecache.Fingerprint(client_id, redirect_uri|scope, presented)
	presented   string // code_verifier or refresh token: the sealing key's input
}

// identify derives the cache key and fingerprint from the request. ok is
// false when the request lacks the code or refresh token; fosite then
// answers it.
func (p *replayer) identify(ctx context.Context, r *http.Request, grant string) (exchangeIdentity, bool) {
	form := r.PostForm
	clientID := clientIDOf(r)
	switch grant {
	case "authorization_code":
		code := form.Get("code")
		if code == "" {
			return exchangeIdentity{}, false
		}
		v := form.Get("code_verifier")
		sig := p.s.provider.strategy.AuthorizeCodeSignature(ctx, code)
		return exchangeIdentity{
			key:         "c:" + sig,
			fingerprint: exchangecache.Fingerprint(clientID, form.Get("redirect_uri"), v),
			presented:   v,
		}, true
	case "refresh_token":
		rt := form.Get("refresh_token")
		if rt == "" {
			return exchangeIdentity{}, false
		}
		sig := p.s.provider.strategy.RefreshTokenSignature(ctx, rt)
		return exchangeIdentity{
			key: "r:" + sig,
			// The requested scope takes redirect_uri's slot: a refresh that
			// narrows scope differently is a different request.
			fingerprint: exchangecache.Fingerprint(clientID, "scope="+form.Get("scope"), rt),
			presented:   rt,
		}, true
	}
	return exchangeIdentity{}, false
}

// serve answers an authorization_code or refresh_token request:
//  1. Claim; claimed → run fosite, then Complete with the sealed response
//     (or Release on failure so a retry gets a clean shot);
//  2. completed, same fingerprint → authenticate the client, replay;
//  3. in flight, same fingerprint → wait (bounded), then 2 or 1;
//  4. other fingerprint → code reuse: fosite answers invalid_grant and revokes
//     (RFC 6749 §4.1.2); the cache entry is dropped.
func (p *replayer) serve(w http.ResponseWriter, r *http.Request, grant, label string, start time.Time) {
	s := p.s
	ctx := r.Context()
	id, ok := p.identify(ctx, r, grant)
	if !ok {
		resp, _, err := s.exchange(ctx, r)
		s.finishToken(w, r, label, "fresh", start, resp, err)
		return
	}
	for round := 0; round < replayClaimRounds; round++ {
		res, err := p.cache.Claim(ctx, id.key, id.fingerprint, replayInflightTTL)
		if err != nil {
			p.failOpen(err)
			break
		}
		if res.Outcome == exchangecache.Claimed {
			p.runClaimed(w, r, id, res.Owner, label, start)
			return
		}
		if res.Outcome == exchangecache.InFlight {
			s.metrics.replay.WithLabelValues("wait").Inc()
			res, err = p.cache.Wait(ctx, id.key, id.fingerprint, p.waitLimit)
			if errors.Is(err, exchangecache.ErrWaitTimeout) || (err != nil && ctx.Err() != nil) {
				// The first attempt is still running. Racing it could only
				// end in reuse and revocation — the failure authd exists to
				// prevent — so ask the client to retry (RFC 9110 §15.6.4).
				p.busy(w, r, label)
				return
			}
			if err != nil {
				p.failOpen(err)
				break
			}
		}
		switch res.Outcome {
		case exchangecache.Completed:
			p.replay(w, r, id, res.Sealed, label, start)
			return
		case exchangecache.Mismatch:
			p.mismatch(w, r, id, label, start)
			return
		case exchangecache.Absent:
			continue // the first attempt released its claim, or it expired: claim again
		}
		break
	}
	// The cache could not help: today's spec behaviour.
	resp, _, err := s.exchange(ctx, r)
	s.finishToken(w, r, label, "fresh", start, resp, err)
}

// runClaimed runs the exchange as the owner of the claim.
func (p *replayer) runClaimed(w http.ResponseWriter, r *http.Request, id exchangeIdentity, owner, label string, start time.Time) {
	s := p.s
	resp, _, err := s.exchange(r.Context(), r)
	// The cache write must not be abandoned because the client hung up:
	// that is exactly when the retry is coming.
	cctx := context.WithoutCancel(r.Context())
	if err != nil {
		if rerr := p.cache.Release(cctx, id.key, owner); rerr != nil && !errors.Is(rerr, exchangecache.ErrNotOwner) {
			p.failOpen(rerr)
		}
		s.finishToken(w, r, label, "fresh", start, nil, err)
		return
	}
	if err := p.store(cctx, id, owner, resp); err != nil {
		s.metrics.replay.WithLabelValues("store_failed").Inc()
		if !errors.Is(err, exchangecache.ErrNotOwner) {
			p.failOpen(err)
			_ = p.cache.Release(cctx, id.key, owner)
		}
	}
	s.finishToken(w, r, label, "fresh", start, resp, nil)
}

// store seals resp under a key derived from the system secret and the
// presented code_verifier (or refresh token), and completes the claim for the
// replay window. A dump of the cache holds no usable token.
func (p *replayer) store(ctx context.Context, id exchangeIdentity, owner string, resp *tokenResponse) error {
	plain, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	sealed, err := exchangecache.Seal(p.sealKey, id.presented, id.key, plain)
	if err != nil {
		return err
	}
	return p.cache.Complete(ctx, id.key, owner, sealed, p.window)
}

// replay answers a duplicate with the original response. The client is
// authenticated as usual first: a confidential client must present its
// credentials again.
func (p *replayer) replay(w http.ResponseWriter, r *http.Request, id exchangeIdentity, sealed []byte, label string, start time.Time) {
	s := p.s
	ctx := r.Context()
	client, err := s.provider.AuthenticateClient(ctx, r, r.PostForm)
	if err != nil {
		s.finishToken(w, r, label, "replay", start, nil, err)
		return
	}
	if client.GetID() != clientIDOf(r) {
		s.finishToken(w, r, label, "replay", start, nil, fosite.ErrInvalidGrant)
		return
	}
	plain, err := exchangecache.Open(p.sealKey, id.presented, id.key, sealed)
	var resp tokenResponse
	if err == nil {
		err = json.Unmarshal(plain, &resp)
	}
	if err != nil || resp.Body == nil {
		// Cannot happen with a matching fingerprint; treat as reuse.
		p.mismatch(w, r, id, label, start)
		return
	}
	// Never replay tokens that were revoked since (logout, RFC 7009
	// revocation, reuse): the app must learn it is signed out.
	if !p.stillActive(ctx, resp) {
		if ferr := p.cache.Forget(context.WithoutCancel(ctx), id.key); ferr != nil {
			p.failOpen(ferr)
		}
		s.finishToken(w, r, label, "replay", start, nil,
			fosite.ErrInvalidGrant.WithHint("The tokens issued for this request have been revoked."))
		return
	}
	// expires_in counts the remaining lifetime (RFC 6749 §5.1).
	resp.Body["expires_in"] = int64(math.Max(0, time.Until(resp.ExpiresAt).Seconds()))
	s.metrics.replay.WithLabelValues("hit").Inc()
	s.finishToken(w, r, label, "replay", start, &resp, nil)
}

// mismatch handles the same code or refresh token presented with another
// client, redirect_uri or verifier: code reuse. fosite answers (invalid_grant,
// and tokens issued from the code revoked, RFC 6749 §4.1.2); once it has
// refused, the cache entry is dropped so no later replay returns tokens that
// were just revoked.
func (p *replayer) mismatch(w http.ResponseWriter, r *http.Request, id exchangeIdentity, label string, start time.Time) {
	s := p.s
	s.metrics.replay.WithLabelValues("mismatch").Inc()
	resp, st, err := s.exchange(r.Context(), r)
	// Drop the entry only if fosite took the reuse path and revoked the
	// grant: a mismatching request while the first is still in flight (a
	// wrong verifier, say) must not spoil the owner's claim.
	if err != nil && st.revoked {
		if ferr := p.cache.Forget(context.WithoutCancel(r.Context()), id.key); ferr != nil {
			p.failOpen(ferr)
		}
	}
	s.finishToken(w, r, label, "fresh", start, resp, err)
}

// failOpen records that the cache could not answer; the request proceeds
// without it. The warning is logged at most once per failOpenLogEvery.
func (p *replayer) failOpen(err error) {
	p.s.metrics.replay.WithLabelValues("fail_open").Inc()
	now := time.Now().UnixNano()
	last := p.lastWarn.Load()
	if now-last >= int64(failOpenLogEvery) && p.lastWarn.CompareAndSwap(last, now) {
		p.s.log.Warn("replay cache unavailable; token exchanges fall back to spec behaviour (duplicates get invalid_grant)", "error", err)
	}
}

// clientIDOf returns the client_id the request presents: HTTP Basic, whose
// client_id is form-urlencoded (RFC 6749 §2.3.1), or the form.
func clientIDOf(r *http.Request) string {
	if id, _, ok := r.BasicAuth(); ok {
		if dec, err := url.QueryUnescape(id); err == nil {
			return dec
		}
		return id
	}
	return r.PostForm.Get("client_id")
}

// stillActive reports whether the cached response's access token is still
// active in the store (one lookup by signature).
func (p *replayer) stillActive(ctx context.Context, resp tokenResponse) bool {
	at, _ := resp.Body["access_token"].(string)
	if at == "" {
		return false
	}
	ok, err := p.s.store.AccessTokenActive(ctx, p.s.provider.strategy.AccessTokenSignature(ctx, at))
	return err == nil && ok
}

// busy answers a duplicate whose first attempt is still running after the
// bounded wait: 503 with Retry-After, so the client retries the same
// request and then gets the original response.
func (p *replayer) busy(w http.ResponseWriter, r *http.Request, label string) {
	p.s.metrics.tokenRequests.WithLabelValues(label, "busy").Inc()
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{
		"error":             "temporarily_unavailable",
		"error_description": "The first exchange of this code is still in progress; retry the same request.",
	})
}
