package oauth

// scopeWords names scopes in words for the consent and one-tap pages.
type scopeWords map[string]string

// builtinScopeWords are the descriptions authd ships; Config.ScopeDescriptions
// adds to and overrides them.
var builtinScopeWords = map[string]string{
	"openid":         "Confirm who you are",
	"offline_access": "Stay signed in",
	"profile":        "See your name",
	"email":          "See your email address",
}

func newScopeWords(custom map[string]string) scopeWords {
	w := scopeWords{}
	for k, v := range builtinScopeWords {
		w[k] = v
	}
	for k, v := range custom {
		if v != "" {
			w[k] = v
		}
	}
	return w
}

// describe returns the words for each scope, in order; a scope without a
// description is shown by its name.
func (w scopeWords) describe(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if d, ok := w[s]; ok {
			out = append(out, d)
		} else {
			out = append(out, s)
		}
	}
	return out
}
