package federation

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/authd/authd/jobs"
	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// RevokeKind is the job kind that revokes, at the provider, the refresh
// tokens of deleted users (Apple: App Store Review Guideline 5.1.1(v)).
const RevokeKind = "federation:revoke"

// RevokeEvery is how often the revocation job looks for work: a deleted
// user's token is first revoked within it, a failed revocation retried
// within three (back-off from 10 s, doubling, at most an hour).
const RevokeEvery = 10 * time.Second

// RevokeStore is what the revocation job needs of storage.
type RevokeStore interface {
	ClaimProviderRevocations(ctx context.Context, now time.Time, limit int) ([]*storage.ProviderToken, error)
	FinishProviderRevocation(ctx context.Context, issuer, sub string, retryAt *time.Time) error
}

const tokenSealPurpose = "authd provider refresh tokens v1"

func tokenAEAD(secret []byte) cipher.AEAD { return secrets.NewAEAD(secret, tokenSealPurpose) }

// SealToken seals a provider refresh token of (issuer, sub).
func SealToken(secret []byte, issuer, sub, token string) []byte {
	a := tokenAEAD(secret)
	nonce := make([]byte, a.NonceSize())
	_, _ = rand.Read(nonce)
	return a.Seal(nonce, nonce, []byte(token), []byte(issuer+"\x00"+sub))
}

func openToken(secret []byte, t *storage.ProviderToken) (string, error) {
	a := tokenAEAD(secret)
	if len(t.Sealed) < a.NonceSize() {
		return "", fmt.Errorf("federation: sealed token too short")
	}
	plain, err := a.Open(nil, t.Sealed[:a.NonceSize()], t.Sealed[a.NonceSize():], []byte(t.Issuer+"\x00"+t.Sub))
	return string(plain), err
}

// RevocationKind is the recurring leased job that revokes pending
// provider tokens: each batch in one transaction fenced by the job's
// lease (a worker that lost it commits nothing), each token deleted once
// the provider accepted its revocation (RFC 7009 §2.2: 200 also for a
// token already invalid), or given its next attempt. Nothing is lost: a
// token stays until revoked.
func RevocationKind(secret []byte, reg *Registry, store RevokeStore, log *slog.Logger) jobs.Kind {
	return revocationKind(secret, reg, store, log, time.Now)
}

func revocationKind(secret []byte, reg *Registry, store RevokeStore, log *slog.Logger, clock func() time.Time) jobs.Kind {
	if log == nil {
		log = slog.Default()
	}
	return jobs.Kind{Name: RevokeKind, Every: RevokeEvery, Handler: func(ctx context.Context, j *jobs.Job) error {
		return j.Tx(ctx, func(ctx context.Context) error {
			now := clock()
			ts, err := store.ClaimProviderRevocations(ctx, now, 20)
			if err != nil {
				return err
			}
			for _, t := range ts {
				if err := revoke(ctx, secret, reg, t); err != nil {
					next := now.Add(backoff(t.Attempts))
					log.Warn("federation: provider token revocation failed; retrying", "provider", t.ProviderID,
						"attempt", t.Attempts+1, "next", next, "error", err)
					reg.Count(t.ProviderID, "revoke", "error")
					if err := store.FinishProviderRevocation(ctx, t.Issuer, t.Sub, &next); err != nil {
						return err
					}
					continue
				}
				reg.Count(t.ProviderID, "revoke", "ok")
				log.Info("federation audit", "what", "federation.token_revoked", "provider", t.ProviderID, "subject", t.Subject)
				if err := store.FinishProviderRevocation(ctx, t.Issuer, t.Sub, nil); err != nil {
					return err
				}
			}
			return nil
		})
	}}
}

// backoff is the wait after attempt n+1 failed: 10 s, 20 s, 40 s, … 1 h.
func backoff(n int) time.Duration {
	d := 10 * time.Second
	for range min(n, 9) {
		d *= 2
	}
	return min(d, time.Hour)
}

// revoke asks the provider to revoke one refresh token (RFC 7009 §2.1;
// Apple: POST /auth/revoke with its client-secret JWT).
func revoke(ctx context.Context, secret []byte, reg *Registry, t *storage.ProviderToken) error {
	p, err := reg.Get(ctx, t.ProviderID)
	if err != nil {
		return fmt.Errorf("provider %s: %w", t.ProviderID, err)
	}
	meta, err := p.Metadata(ctx)
	if err != nil {
		return err
	}
	if meta.RevocationEndpoint == "" {
		return fmt.Errorf("provider %s has no revocation_endpoint", p.ID)
	}
	token, err := openToken(secret, t)
	if err != nil {
		return err
	}
	cs, err := p.ClientSecret(time.Now())
	if err != nil {
		return err
	}
	form := url.Values{"client_id": {p.ClientID}, "client_secret": {cs}, "token": {token}, "token_type_hint": {"refresh_token"}}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, meta.RevocationEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revocation endpoint answered %d", resp.StatusCode)
	}
	return nil
}
