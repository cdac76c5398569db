// Package secevent records security events: what an operator must see to
// tell an attack, or a broken app, from noise. Each event is one
// structured log line at warn level and one count in
// authd_security_events_total{event}.
//
// An Event carries only identifiers (client_id, sub, grant id, source
// address): there is no field for a token, a code, a verifier or a
// password, so none can be logged by mistake. It must never gain one.
package secevent

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind names an event; it is the metric's event label and the log line's
// event attribute.
type Kind string

// The events (README, "Security events").
const (
	// CodeReuse: an authorization code presented again that is not a
	// retry of its first exchange (another verifier, client or
	// redirect_uri, or after the replay window); the tokens issued from
	// it are revoked (RFC 6749 §4.1.2).
	CodeReuse Kind = "code_reuse"
	// RefreshTokenReuse: a rotated refresh token presented again outside
	// its retry; its family is revoked (RFC 9700 §4.14.2).
	RefreshTokenReuse Kind = "refresh_token_reuse"
	// RevokedGrantReplay: a code or refresh token of a grant that was
	// revoked (RFC 7009, reuse detection, sign-out) presented again.
	RevokedGrantReplay Kind = "revoked_grant_replay"
	// DPoPProofReplay: a DPoP proof whose jti was already used (RFC 9449
	// §11.1).
	DPoPProofReplay Kind = "dpop_proof_replay"
	// SignCountRegression: a passkey assertion whose signature counter did
	// not increase (WebAuthn §6.1.1): a cloned authenticator, perhaps.
	SignCountRegression Kind = "sign_count_regression"
)

// Kinds lists every event, in the README's order.
var Kinds = []Kind{CodeReuse, RefreshTokenReuse, RevokedGrantReplay, DPoPProofReplay, SignCountRegression}

// Event is one security event. Empty fields are left out of the log line.
type Event struct {
	Kind     Kind
	ClientID string // the client's client_id
	Subject  string // the user's sub, where known
	GrantID  string // the grant's request id (what revocation ends)
	Source   string // the request's peer address
	// Credential is the public id of the credential concerned (a passkey's
	// credential id, base64url), where there is one.
	Credential string
}

// Recorder writes events. The zero value and a nil *Recorder record
// nothing (tests that do not look).
type Recorder struct {
	log   *slog.Logger
	count *prometheus.CounterVec
}

// NewCounter returns authd_security_events_total, with every Kind at zero
// (so an alert on a rise sees the series before the first event).
// Register it once on the server's registry.
func NewCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "authd_security_events_total",
		Help: "Security events by event: code_reuse, refresh_token_reuse, revoked_grant_replay, dpop_proof_replay, sign_count_regression. Each is also one warn log line (\"security event\").",
	}, []string{"event"})
	for _, k := range Kinds {
		c.WithLabelValues(string(k))
	}
	return c
}

// New returns a Recorder writing to log and count (NewCounter).
func New(log *slog.Logger, count *prometheus.CounterVec) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{log: log, count: count}
}

// Record logs e at warn level ("security event") and counts it.
func (r *Recorder) Record(ctx context.Context, e Event) {
	if r == nil || r.log == nil {
		return
	}
	if r.count != nil {
		r.count.WithLabelValues(string(e.Kind)).Inc()
	}
	attrs := []slog.Attr{slog.String("event", string(e.Kind))}
	for _, f := range []struct{ k, v string }{{"client_id", e.ClientID}, {"sub", e.Subject}, {"grant_id", e.GrantID}, {"source", e.Source}, {"credential_id", e.Credential}} {
		if f.v != "" {
			attrs = append(attrs, slog.String(f.k, f.v))
		}
	}
	r.log.LogAttrs(ctx, slog.LevelWarn, "security event", attrs...)
}
