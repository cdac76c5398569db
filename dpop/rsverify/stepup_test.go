package rsverify

import (
	"errors"
	"testing"
	"time"
)

func TestMeets(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	two := Requirement{ACRValues: []string{"urn:authd:acr:2fa", "phr"}, MaxAge: 5 * time.Minute}
	for _, tc := range []struct {
		name string
		tok  Token
		ok   bool
	}{
		{"two factors, recent", Token{ACR: "urn:authd:acr:2fa", AuthTime: now.Add(-time.Minute)}, true},
		{"passkey, recent", Token{ACR: "phr", AuthTime: now.Add(-time.Minute)}, true},
		{"one factor", Token{ACR: "urn:authd:acr:1fa", AuthTime: now}, false},
		{"no acr", Token{AuthTime: now}, false},
		{"too old", Token{ACR: "urn:authd:acr:2fa", AuthTime: now.Add(-time.Hour)}, false},
		{"no auth_time", Token{ACR: "urn:authd:acr:2fa"}, false},
	} {
		err := tc.tok.Meets(two, now)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInsufficientAuthentication)) {
			t.Errorf("%s: Meets = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if err := (&Token{}).Meets(Requirement{}, now); err != nil {
		t.Errorf("no requirement: %v", err)
	}
	want := `DPoP error="insufficient_user_authentication", error_description="A stronger or more recent authentication is required", acr_values="urn:authd:acr:2fa phr", max_age=300`
	if got := StepUpChallenge("DPoP", two); got != want {
		t.Errorf("StepUpChallenge = %s", got)
	}
}
