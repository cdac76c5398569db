package main

import (
	"flag"
	"log/slog"
	"net"

	"github.com/authd/authd/passkey"
	"github.com/authd/authd/revocation"
	"github.com/authd/authd/secevent"
	"github.com/authd/authd/storage"
)

// passkeyConfig holds the passkey settings (issue 24).
type passkeyConfig struct {
	RPID        string
	AppleAppIDs string
	AndroidApps string
}

func (p *passkeyConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&p.RPID, "webauthn-rp-id", "", "passkeys' relying party ID: the issuer's host (default) or a parent domain of it, so that passkeys work on sibling hosts and in your apps; required for passkeys when the issuer is an IP address (AUTHD_WEBAUTHN_RP_ID)")
	fs.StringVar(&p.AppleAppIDs, "apple-app-ids", "", "iOS apps that may use the site's passkeys, comma-separated TEAMID.bundle.id; served in /.well-known/apple-app-site-association (AUTHD_APPLE_APP_IDS)")
	fs.StringVar(&p.AndroidApps, "android-apps", "", `Android apps that may use the site's passkeys, a JSON array of {"package_name":…,"sha256_cert_fingerprints":[…]}; served in /.well-known/assetlinks.json (AUTHD_ANDROID_APPS)`)
}

// relyingParty checks the settings against the issuer (addr's when the
// issuer is not set yet: serve defaults it to http://ADDR).
func (p *passkeyConfig) relyingParty(issuer, addr string) (passkey.RelyingParty, error) {
	if issuer == "" {
		host, port, _ := net.SplitHostPort(addr)
		if host == "" {
			host = "127.0.0.1"
		}
		issuer = "http://" + net.JoinHostPort(host, port)
	}
	return passkey.Configure(passkey.Settings{Issuer: issuer, RPID: p.RPID, AppleAppIDs: p.AppleAppIDs, AndroidApps: p.AndroidApps})
}

// passkeyStore is the passkey service's store: the backend's passkey
// tables, with the users, transactions and the revoking RevokeSubject of
// the store every revocation goes through.
type passkeyStore struct {
	storage.PasskeyStore
	revocation.Store
}

// newPasskeys builds the passkey service, or nil (with the warning logged
// once) when passkeys are off: an IP-address issuer without
// AUTHD_WEBAUTHN_RP_ID, or a backend without passkey tables.
func newPasskeys(c config, issuer string, backend storage.Store, revoking revocation.Store, log *slog.Logger, security *secevent.Recorder) (*passkey.Service, error) {
	rp, err := c.passkeys.relyingParty(issuer, c.Addr)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if !rp.Enabled {
		log.Warn(rp.Warning)
		return nil, nil
	}
	ps, ok := backend.(storage.PasskeyStore)
	if !ok {
		log.Warn("passkeys are off: the store has no passkey tables")
		return nil, nil
	}
	return passkey.New(rp, passkeyStore{PasskeyStore: ps, Store: revoking}, passkey.Options{Logger: log, Security: security})
}
