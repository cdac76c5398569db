package passkey

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Settings are the operator's passkey settings (AUTHD_WEBAUTHN_RP_ID,
// AUTHD_APPLE_APP_IDS, AUTHD_ANDROID_APPS), as given.
type Settings struct {
	// Issuer is authd's issuer URL; its host is the RP ID by default.
	Issuer string
	// RPID, when set, is the issuer's host or a parent domain of it
	// (WebAuthn L3 §5.1.2: an RP ID is a registrable domain suffix of the
	// origin's effective domain).
	RPID string
	// AppleAppIDs are TEAMID.bundle.id values, comma-separated.
	AppleAppIDs string
	// AndroidApps is a JSON array of {"package_name",
	// "sha256_cert_fingerprints"}.
	AndroidApps string
}

// AndroidApp is an Android app that may use the site's passkeys.
type AndroidApp struct {
	PackageName  string   `json:"package_name"`
	Fingerprints []string `json:"sha256_cert_fingerprints"`
}

// RelyingParty is the checked configuration.
type RelyingParty struct {
	// Enabled is false when the issuer is an IP address and no RP ID is
	// set: browsers refuse WebAuthn there (Warning says so).
	Enabled bool
	Warning string
	RPID    string
	// Origins are the origins whose answers are accepted: the issuer's,
	// https://RPID for iOS apps (the origin AuthenticationServices
	// reports), and android:apk-key-hash:… for each Android signing
	// certificate (what Credential Manager reports for an app).
	Origins     []string
	AppleAppIDs []string
	AndroidApps []AndroidApp
}

var (
	appleAppID   = regexp.MustCompile(`^[A-Z0-9]{10}\.[A-Za-z0-9][A-Za-z0-9.-]*$`)
	androidPkg   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$`)
	fingerprint  = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){31}$`)
	maxRPIDBytes = 253
)

// Configure checks the settings. An error names the setting.
func Configure(s Settings) (RelyingParty, error) {
	var rp RelyingParty
	u, err := url.Parse(s.Issuer)
	if err != nil || u.Host == "" {
		return rp, fmt.Errorf("the issuer %q has no host", s.Issuer)
	}
	host := strings.ToLower(u.Hostname())
	rpID := strings.ToLower(strings.TrimSpace(s.RPID))
	switch {
	case rpID == "" && net.ParseIP(host) != nil:
		rp.Warning = fmt.Sprintf("passkeys are off: the issuer's host %s is an IP address, on which browsers refuse WebAuthn; set AUTHD_WEBAUTHN_RP_ID to a domain name of the issuer to turn them on", host)
		return rp, nil
	case rpID == "":
		rpID = host
	case net.ParseIP(rpID) != nil || len(rpID) > maxRPIDBytes || strings.Contains(rpID, "/") || strings.Contains(rpID, ":"):
		return rp, fmt.Errorf("AUTHD_WEBAUTHN_RP_ID=%q is not a domain name", s.RPID)
	case host != rpID && !strings.HasSuffix(host, "."+rpID):
		return rp, fmt.Errorf("AUTHD_WEBAUTHN_RP_ID=%q is neither the issuer's host %s nor a parent domain of it (WebAuthn §5.1.2)", s.RPID, host)
	case !strings.Contains(rpID, ".") && rpID != "localhost":
		return rp, fmt.Errorf("AUTHD_WEBAUTHN_RP_ID=%q is a top-level domain; browsers refuse it", s.RPID)
	}
	rp.Enabled, rp.RPID = true, rpID
	rp.Origins = []string{u.Scheme + "://" + u.Host}
	for _, id := range strings.Split(s.AppleAppIDs, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		if !appleAppID.MatchString(id) {
			return rp, fmt.Errorf("AUTHD_APPLE_APP_IDS: %q is not TEAMID.bundle.id (a 10-character team ID, a dot, the bundle ID)", id)
		}
		rp.AppleAppIDs = append(rp.AppleAppIDs, id)
	}
	if len(rp.AppleAppIDs) > 0 && rp.Origins[0] != "https://"+rpID {
		rp.Origins = append(rp.Origins, "https://"+rpID)
	}
	if strings.TrimSpace(s.AndroidApps) != "" {
		if err := json.Unmarshal([]byte(s.AndroidApps), &rp.AndroidApps); err != nil {
			return rp, fmt.Errorf(`AUTHD_ANDROID_APPS is not a JSON array of {"package_name", "sha256_cert_fingerprints"}: %v`, err)
		}
		for i, a := range rp.AndroidApps {
			if !androidPkg.MatchString(a.PackageName) {
				return rp, fmt.Errorf("AUTHD_ANDROID_APPS: %q is not an Android package name", a.PackageName)
			}
			if len(a.Fingerprints) == 0 {
				return rp, fmt.Errorf("AUTHD_ANDROID_APPS: %s has no sha256_cert_fingerprints", a.PackageName)
			}
			for j, f := range a.Fingerprints {
				if !fingerprint.MatchString(f) {
					return rp, fmt.Errorf("AUTHD_ANDROID_APPS: %s: %q is not a SHA-256 fingerprint (32 hex bytes separated by colons)", a.PackageName, f)
				}
				f = strings.ToUpper(f)
				rp.AndroidApps[i].Fingerprints[j] = f
				b, _ := hex.DecodeString(strings.ReplaceAll(f, ":", ""))
				rp.Origins = append(rp.Origins, "android:apk-key-hash:"+base64.RawURLEncoding.EncodeToString(b))
			}
		}
	}
	return rp, nil
}

// AppleAppSiteAssociation is the body of /.well-known/apple-app-site-association
// (Apple's "Supporting associated domains": webcredentials.apps), or nil
// when no iOS app is configured.
func (rp RelyingParty) AppleAppSiteAssociation() []byte {
	if len(rp.AppleAppIDs) == 0 {
		return nil
	}
	type apps struct {
		Apps []string `json:"apps"`
	}
	b, _ := json.Marshal(struct {
		WebCredentials apps `json:"webcredentials"`
	}{apps{rp.AppleAppIDs}})
	return b
}

// AssetLinks is the body of /.well-known/assetlinks.json (Digital Asset
// Links, relation delegate_permission/common.get_login_creds), or nil when
// no Android app is configured.
func (rp RelyingParty) AssetLinks() []byte {
	if len(rp.AndroidApps) == 0 {
		return nil
	}
	type target struct {
		Namespace    string   `json:"namespace"`
		PackageName  string   `json:"package_name"`
		Fingerprints []string `json:"sha256_cert_fingerprints"`
	}
	type statement struct {
		Relation []string `json:"relation"`
		Target   target   `json:"target"`
	}
	out := make([]statement, 0, len(rp.AndroidApps))
	for _, a := range rp.AndroidApps {
		out = append(out, statement{Relation: []string{"delegate_permission/common.get_login_creds"},
			Target: target{Namespace: "android_app", PackageName: a.PackageName, Fingerprints: a.Fingerprints}})
	}
	b, _ := json.Marshal(out)
	return b
}
