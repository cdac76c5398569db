package pkce_test

import (
	"fmt"

	"github.com/authd/authd/pkce"
)

func ExampleS256Challenge() {
	// The code_verifier from RFC 7636 Appendix B.
	verifier := "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	fmt.Println(pkce.S256Challenge(verifier))
	// Output: E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM
}

func ExampleVerify() {
	const challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" // recorded at the authorize endpoint
	fmt.Println(pkce.Verify("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", challenge, pkce.MethodS256))
	fmt.Println(pkce.Verify("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", challenge, pkce.MethodS256))
	// Output:
	// <nil>
	// pkce: code_verifier does not match code_challenge
}
