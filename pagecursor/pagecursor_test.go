package pagecursor

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, key := range []string{"a", "alice", "cl_0123456789", "ünïcode", strings.Repeat("x", MaxKey)} {
		got, ok := Decode("users", Encode("users", key))
		if !ok || got != key {
			t.Errorf("%q: got %q, %v", key, got, ok)
		}
	}
	if k, ok := Decode("users", ""); !ok || k != "" {
		t.Errorf("empty cursor: %q %v", k, ok)
	}
}

func TestRefused(t *testing.T) {
	raw := func(b ...byte) string { return base64.RawURLEncoding.EncodeToString(append(b, sum(b)...)) }
	good := Encode("users", "alice")
	cases := map[string]string{
		"another list":    Encode("clients", "alice"),
		"not base64":      "%%%",
		"standard base64": "YWJj+/==",
		"old version":     raw(append([]byte{1}, "alice"...)...),
		"future version":  raw(append([]byte{3, 5}, "usersalice"...)...),
		"list too short":  raw(2, 9, 'u'),
		"empty key":       Encode("users", ""),
		"NUL":             Encode("users", "al\x00ice"),
		"invalid UTF-8":   Encode("users", "al\xffice"),
		"too long":        Encode("users", strings.Repeat("x", MaxKey+1)),
		"huge":            strings.Repeat("A", 10000),
		"one byte":        raw(2),
		"truncated":       good[:len(good)-2],
		"no checksum":     base64.RawURLEncoding.EncodeToString(append([]byte{2, 5}, "usersalice"...)),
	}
	for name, c := range cases {
		if k, ok := Decode("users", c); ok {
			t.Errorf("%s: accepted as %q", name, k)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("users", Encode("users", "alice"))
	f.Fuzz(func(t *testing.T, list, c string) {
		if len(list) > 255 {
			return
		}
		k, ok := Decode(list, c)
		if ok && c != "" && Encode(list, k) != c {
			t.Fatalf("decode(%q)=%q does not re-encode", c, k)
		}
	})
}
