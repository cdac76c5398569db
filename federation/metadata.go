package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Metadata is the part of a provider's discovery document authd uses
// (OpenID Connect Discovery 1.0 §3).
type Metadata struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	JWKSURI               string `json:"jwks_uri"`
	RevocationEndpoint    string `json:"revocation_endpoint"`
}

// fetchMetadata reads issuer's discovery document and checks that it
// names the same issuer (Discovery §4.3).
func fetchMetadata(ctx context.Context, client *http.Client, issuer string) (*Metadata, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("federation: discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("federation: discovery: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<10))
	if err != nil {
		return nil, fmt.Errorf("federation: discovery: %w", err)
	}
	var m Metadata
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("federation: discovery: %w", err)
	}
	if m.Issuer != issuer {
		return nil, fmt.Errorf("federation: discovery: issuer %q does not match %q (Discovery Section 4.3)", m.Issuer, issuer)
	}
	if m.JWKSURI == "" {
		return nil, fmt.Errorf("federation: discovery: no jwks_uri")
	}
	return &m, nil
}
