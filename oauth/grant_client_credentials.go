package oauth

import (
	"context"
	"net/url"
)

// clientCredentialsGrant is the client credentials grant (RFC 6749 §4.4),
// for confidential clients only (clientCredentialsHandler). It has no
// required parameter of its own and is never replayed: nothing is redeemed,
// so a retry simply gets a new token.
type clientCredentialsGrant struct{}

func (clientCredentialsGrant) check(context.Context, url.Values) error { return nil }

func (clientCredentialsGrant) identity(context.Context, string, url.Values) exchangeIdentity {
	return exchangeIdentity{}
}
