package passkey_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/authd/authd/passkey"
)

func TestConfigure(t *testing.T) {
	for _, tc := range []struct {
		s       passkey.Settings
		rpID    string
		enabled bool
		err     string
	}{
		{s: passkey.Settings{Issuer: "https://id.example.com"}, rpID: "id.example.com", enabled: true},
		{s: passkey.Settings{Issuer: "https://id.example.com", RPID: "example.com"}, rpID: "example.com", enabled: true},
		{s: passkey.Settings{Issuer: "http://localhost:8080"}, rpID: "localhost", enabled: true},
		{s: passkey.Settings{Issuer: "http://127.0.0.1:8080"}},
		{s: passkey.Settings{Issuer: "http://127.0.0.1:8080", RPID: "127.0.0.1"}, err: "not a domain name"},
		{s: passkey.Settings{Issuer: "https://id.example.com", RPID: "other.com"}, err: "parent domain"},
		{s: passkey.Settings{Issuer: "https://id.example.com", RPID: "ample.com"}, err: "parent domain"},
		{s: passkey.Settings{Issuer: "https://id.example.com", RPID: "com"}, err: "top-level"},
		{s: passkey.Settings{Issuer: "https://id.example.com", AppleAppIDs: "team.com.example"}, err: "AUTHD_APPLE_APP_IDS"},
		{s: passkey.Settings{Issuer: "https://id.example.com", AndroidApps: `{}`}, err: "AUTHD_ANDROID_APPS"},
		{s: passkey.Settings{Issuer: "https://id.example.com", AndroidApps: `[{"package_name":"com.example","sha256_cert_fingerprints":["AB"]}]`}, err: "fingerprint"},
	} {
		rp, err := passkey.Configure(tc.s)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: err = %v, want %q", tc.s, err, tc.err)
			}
			continue
		}
		if err != nil || rp.Enabled != tc.enabled || rp.RPID != tc.rpID {
			t.Errorf("%+v = %+v, %v", tc.s, rp, err)
		}
		if !tc.enabled && !strings.Contains(rp.Warning, "AUTHD_WEBAUTHN_RP_ID") {
			t.Errorf("%+v: warning %q", tc.s, rp.Warning)
		}
	}
}

// TestAssociationFiles parses the files as the platforms document them:
// Apple's webcredentials.apps (App IDs), Google's Digital Asset Links
// statement list.
func TestAssociationFiles(t *testing.T) {
	fp := strings.TrimSuffix(strings.Repeat("0a:", 32), ":")
	rp, err := passkey.Configure(passkey.Settings{Issuer: "https://id.example.com", RPID: "example.com",
		AppleAppIDs: "ABCDE12345.com.example.app, ABCDE12345.com.example.other",
		AndroidApps: `[{"package_name":"com.example.app","sha256_cert_fingerprints":["` + fp + `"]}]`})
	if err != nil {
		t.Fatal(err)
	}
	var aasa struct {
		WebCredentials struct {
			Apps []string `json:"apps"`
		} `json:"webcredentials"`
	}
	if err := json.Unmarshal(rp.AppleAppSiteAssociation(), &aasa); err != nil || !slices.Equal(aasa.WebCredentials.Apps, []string{"ABCDE12345.com.example.app", "ABCDE12345.com.example.other"}) {
		t.Fatalf("AASA %s: %v", rp.AppleAppSiteAssociation(), err)
	}
	var links []struct {
		Relation []string `json:"relation"`
		Target   struct {
			Namespace    string   `json:"namespace"`
			PackageName  string   `json:"package_name"`
			Fingerprints []string `json:"sha256_cert_fingerprints"`
		} `json:"target"`
	}
	if err := json.Unmarshal(rp.AssetLinks(), &links); err != nil || len(links) != 1 ||
		!slices.Equal(links[0].Relation, []string{"delegate_permission/common.get_login_creds"}) ||
		links[0].Target.Namespace != "android_app" || links[0].Target.PackageName != "com.example.app" ||
		!slices.Equal(links[0].Target.Fingerprints, []string{strings.ToUpper(fp)}) {
		t.Fatalf("assetlinks %s: %v", rp.AssetLinks(), err)
	}
	// The origins: the site, https://RPID for iOS apps, the APK key hash
	// for Android apps.
	want := []string{"https://id.example.com", "https://example.com", "android:apk-key-hash:CgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgo"}
	if !slices.Equal(rp.Origins, want) {
		t.Fatalf("Origins = %q, want %q", rp.Origins, want)
	}
	none, _ := passkey.Configure(passkey.Settings{Issuer: "https://id.example.com"})
	if none.AppleAppSiteAssociation() != nil || none.AssetLinks() != nil {
		t.Fatal("files without apps configured")
	}
}
