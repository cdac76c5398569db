package main

import (
	"encoding/json"
	"flag"
	"time"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/oauth"
)

// peopleConfig holds the browser-session and consent settings.
type peopleConfig struct {
	SessionTTL        time.Duration
	SessionIdleTTL    time.Duration
	SilentSSO         string
	ScopeDescriptions string // JSON object: scope → words
	// PasswordHashConcurrency bounds concurrent password hashing (0: half
	// the cores, at least 1).
	PasswordHashConcurrency int
	// MaxSessions caps a user's browser sessions (the oldest end first).
	MaxSessions int
}

func (p *peopleConfig) flags(fs *flag.FlagSet) {
	fs.DurationVar(&p.SessionTTL, "session-ttl", identity.DefaultSessionTTL, "absolute lifetime of a browser sign-in session (AUTHD_SESSION_TTL)")
	fs.DurationVar(&p.SessionIdleTTL, "session-idle-ttl", identity.DefaultSessionIdleTTL, "a browser session unused for this long ends (AUTHD_SESSION_IDLE_TTL)")
	fs.StringVar(&p.SilentSSO, "silent-sso", oauth.SilentSSOAssured, `"assured": an existing session gives a code without a click only to a confidential client or an https redirect (RFC 8252 §8.6); "never": always ask with one tap (AUTHD_SILENT_SSO)`)
	fs.IntVar(&p.PasswordHashConcurrency, "password-hash-concurrency", 0, "password hashes (argon2id, 7 MiB each) computed at once; more sign-ins queue; 0 is half the cores, at least 1 (AUTHD_PASSWORD_HASH_CONCURRENCY)")
	fs.IntVar(&p.MaxSessions, "max-sessions", identity.DefaultMaxSessions, "browser sessions a user may have at once; a new sign-in ends the oldest beyond it (AUTHD_MAX_SESSIONS)")
	fs.StringVar(&p.ScopeDescriptions, "scope-descriptions", "", `consent page words for your scopes, a JSON object such as {"orders.read":"See your orders"} (AUTHD_SCOPE_DESCRIPTIONS)`)
}

// validate checks the settings; errors name the variable.
func (p *peopleConfig) validate() error {
	var errs problems
	if p.SessionTTL < time.Minute {
		errs.addf("AUTHD_SESSION_TTL: must be at least 1m (got %s)", p.SessionTTL)
	}
	if p.SessionIdleTTL < time.Minute || p.SessionIdleTTL > p.SessionTTL {
		errs.addf("AUTHD_SESSION_IDLE_TTL: must be between 1m and AUTHD_SESSION_TTL (%s), got %s", p.SessionTTL, p.SessionIdleTTL)
	}
	if p.SilentSSO != oauth.SilentSSOAssured && p.SilentSSO != oauth.SilentSSONever {
		errs.addf("AUTHD_SILENT_SSO: %q is not %q or %q", p.SilentSSO, oauth.SilentSSOAssured, oauth.SilentSSONever)
	}
	if p.MaxSessions < 1 || p.MaxSessions > 10000 {
		errs.addf("AUTHD_MAX_SESSIONS: must be between 1 and 10000, got %d", p.MaxSessions)
	}
	if p.PasswordHashConcurrency < 0 {
		errs.addf("AUTHD_PASSWORD_HASH_CONCURRENCY: must be 0 (half the cores) or more, got %d", p.PasswordHashConcurrency)
	}
	if _, err := p.scopeWords(); err != nil {
		errs.addf("AUTHD_SCOPE_DESCRIPTIONS: not a JSON object of strings: %v", err)
	}
	return errs.err()
}

func (p *peopleConfig) scopeWords() (map[string]string, error) {
	if p.ScopeDescriptions == "" {
		return nil, nil
	}
	var m map[string]string
	err := json.Unmarshal([]byte(p.ScopeDescriptions), &m)
	return m, err
}

// apply copies the settings into the server's configuration.
func (p *peopleConfig) apply(oc *oauth.Config) {
	oc.SessionTTL, oc.SessionIdleTTL, oc.SilentSSO = p.SessionTTL, p.SessionIdleTTL, p.SilentSSO
	oc.ScopeDescriptions, _ = p.scopeWords()
}
