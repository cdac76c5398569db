package federation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/storage"
)

// The kinds of provider.
const (
	KindOIDC   = "oidc"
	KindApple  = "apple"
	KindGoogle = "google"
)

// The issuers of Apple and Google, the defaults of their kinds.
const (
	AppleIssuer  = "https://appleid.apple.com"
	GoogleIssuer = "https://accounts.google.com"
)

// Input is a provider as the operator sends it (JSON on stdin, the admin
// API's body). Secrets are write-only: an update that omits them keeps the
// stored ones.
type Input struct {
	ID                  string   `json:"id"`
	Kind                string   `json:"kind"`
	Issuer              string   `json:"issuer,omitempty"`
	ClientID            string   `json:"client_id"`
	ClientSecret        string   `json:"client_secret,omitempty"`
	TeamID              string   `json:"team_id,omitempty"`
	KeyID               string   `json:"key_id,omitempty"`
	PrivateKey          string   `json:"private_key,omitempty"`
	Scopes              []string `json:"scopes,omitempty"`
	DisplayName         string   `json:"display_name,omitempty"`
	NativeAudiences     []string `json:"native_audiences,omitempty"`
	LinkByVerifiedEmail bool     `json:"link_by_verified_email"`
}

// Info is a provider as authd shows it: never a secret, only whether one
// is set, and the redirect_uri to register at the provider.
type Info struct {
	ID                  string    `json:"id"`
	Kind                string    `json:"kind"`
	Issuer              string    `json:"issuer"`
	ClientID            string    `json:"client_id"`
	HasClientSecret     bool      `json:"has_client_secret"`
	TeamID              string    `json:"team_id,omitempty"`
	KeyID               string    `json:"key_id,omitempty"`
	HasPrivateKey       bool      `json:"has_private_key,omitempty"`
	Scopes              []string  `json:"scopes"`
	DisplayName         string    `json:"display_name"`
	NativeAudiences     []string  `json:"native_audiences"`
	LinkByVerifiedEmail bool      `json:"link_by_verified_email"`
	RedirectURI         string    `json:"redirect_uri"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
}

// DecodeInput decodes one JSON object of known members.
func DecodeInput(body []byte) (*Input, error) {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	var in Input
	if err := dec.Decode(&in); err != nil {
		return nil, invalid("The body must be one JSON object of provider fields: %s.", jsonProblem(err))
	}
	if dec.More() {
		return nil, invalid("The body must be one JSON object.")
	}
	return &in, nil
}

func jsonProblem(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120]
	}
	return strings.TrimPrefix(s, "json: ")
}

func invalid(format string, args ...any) error {
	return &clientadmin.Error{Code: clientadmin.ErrInvalidRequest.Code, Description: fmt.Sprintf(format, args...)}
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// maxList bounds scopes and native_audiences.
const maxList = 32

// normalize applies the kind's defaults and checks in. existing is the
// stored provider on an update (its secrets are kept when in omits them).
func (in *Input) normalize(existing *storage.Provider) error {
	if !idPattern.MatchString(in.ID) {
		return invalid("id must be 1 to 63 characters of a-z, 0-9, _ and -, starting with a letter or digit.")
	}
	switch in.Kind {
	case KindApple:
		if in.Issuer == "" {
			in.Issuer = AppleIssuer
		}
		if in.DisplayName == "" {
			in.DisplayName = "Apple" // "Sign in with Apple" (Apple's HIG)
		}
		if in.Scopes == nil {
			in.Scopes = []string{"name", "email"}
		}
		if in.ClientSecret != "" {
			return invalid("An apple provider has no client_secret: give team_id, key_id and private_key; authd makes the client secret.")
		}
	case KindGoogle:
		if in.Issuer == "" {
			in.Issuer = GoogleIssuer
		}
		if in.DisplayName == "" {
			in.DisplayName = "Google"
		}
	case KindOIDC:
	default:
		return invalid("kind must be oidc, apple or google.")
	}
	if in.Scopes == nil {
		in.Scopes = []string{"openid", "email", "profile"}
	}
	if !slices.Contains(in.Scopes, "openid") {
		in.Scopes = append([]string{"openid"}, in.Scopes...)
	}
	if err := checkIssuer(in.Issuer); err != nil {
		return err
	}
	if in.ClientID == "" || len(in.ClientID) > 255 {
		return invalid("client_id is required (at most 255 characters).")
	}
	if in.DisplayName == "" || len(in.DisplayName) > 64 || strings.ContainsAny(in.DisplayName, "<>\"&\x00") {
		return invalid("display_name is required: at most 64 characters, no < > \" &.")
	}
	for _, list := range [][]string{in.Scopes, in.NativeAudiences} {
		if len(list) > maxList {
			return invalid("scopes and native_audiences hold at most %d values.", maxList)
		}
		for _, v := range list {
			if v == "" || len(v) > 255 || strings.ContainsAny(v, " \t\r\n\x00") {
				return invalid("scopes and native_audiences values must be 1 to 255 characters without spaces.")
			}
		}
	}
	if in.Kind == KindApple {
		if in.TeamID == "" || in.KeyID == "" {
			return invalid("An apple provider needs team_id and key_id.")
		}
		if in.PrivateKey == "" && (existing == nil || existing.Kind != KindApple || len(existing.Sealed) == 0) {
			return invalid("An apple provider needs private_key (the PKCS #8 PEM of the key Apple issued).")
		}
		if in.PrivateKey != "" {
			if _, err := ParseAppleKey([]byte(in.PrivateKey)); err != nil {
				return invalid("private_key must be a PKCS #8 PEM P-256 key.")
			}
		}
	} else if in.TeamID != "" || in.KeyID != "" || in.PrivateKey != "" {
		return invalid("team_id, key_id and private_key belong to apple providers only.")
	}
	if len(in.ClientSecret) > 1024 || len(in.PrivateKey) > 8192 {
		return invalid("client_secret or private_key is too long.")
	}
	return nil
}

// checkIssuer: an https URL without query or fragment (OpenID Connect
// Discovery 1.0 §2), or http on loopback (tests, development).
func checkIssuer(iss string) error {
	u, err := url.Parse(iss)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || len(iss) > 255 {
		return invalid("issuer must be an https URL without query or fragment.")
	}
	switch u.Scheme {
	case "https":
	case "http":
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return invalid("issuer must be https (http only on loopback).")
		}
	default:
		return invalid("issuer must be an https URL.")
	}
	return nil
}

// ParseAppleKey parses Apple's PKCS #8 PEM P-256 private key.
func ParseAppleKey(pemBytes []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("federation: private key: not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("federation: private key: %w", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("federation: private key: not a P-256 key")
	}
	return ec, nil
}

// RedirectURI is the callback URL to register at the provider.
func RedirectURI(issuer, id string) string {
	return strings.TrimRight(issuer, "/") + "/signin/fed/" + url.PathEscape(id) + "/callback"
}

func (a *Admin) info(p *storage.Provider) *Info {
	i := &Info{
		ID: p.ID, Kind: p.Kind, Issuer: p.Issuer, ClientID: p.ClientID,
		TeamID: p.TeamID, KeyID: p.KeyID,
		Scopes: nonNil(p.Scopes), DisplayName: p.DisplayName, NativeAudiences: nonNil(p.NativeAudiences),
		LinkByVerifiedEmail: p.LinkByVerifiedEmail, RedirectURI: RedirectURI(a.issuer, p.ID),
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
	if len(p.Sealed) > 0 {
		if p.Kind == KindApple {
			i.HasPrivateKey = true
		} else {
			i.HasClientSecret = true
		}
	}
	return i
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
