package mail

import "testing"

func TestParseSMTPURL(t *testing.T) {
	for _, c := range []struct {
		in, tls, user, pass string
		port                int
		bad                 bool
	}{
		{in: "smtp://mx.example.com", tls: "opportunistic", port: 25},
		{in: "smtp://u:p%40ss@mx.example.com:2525", tls: "opportunistic", port: 2525, user: "u", pass: "p@ss"},
		{in: "smtp://mx.example.com?starttls=required", tls: "required", port: 587},
		{in: "smtp://mx.example.com:25?starttls=required", tls: "required", port: 25},
		{in: "smtps://mx.example.com", tls: "implicit", port: 465},
		{in: "smtps://mx.example.com?starttls=required", bad: true},
		{in: "smtp://mx.example.com?starttls=maybe", bad: true},
		{in: "http://mx.example.com", bad: true},
		{in: "smtp://", bad: true},
		{in: "smtp://mx.example.com:0", bad: true},
		{in: "smtp://mx.example.com/path", bad: true},
	} {
		got, err := ParseSMTPURL(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%s: accepted", c.in)
			}
			continue
		}
		if err != nil || got.TLS != c.tls || got.Port != c.port || got.Username != c.user || got.Password != c.pass {
			t.Errorf("%s: %+v, %v", c.in, got, err)
		}
	}
}

func TestDomain(t *testing.T) {
	if d, err := Domain("Example <no-reply@example.com>"); err != nil || d != "example.com" {
		t.Fatal(d, err)
	}
	if _, err := Domain("nobody"); err == nil {
		t.Fatal("accepted an address without a domain")
	}
}

func TestTemplatesRender(t *testing.T) {
	for name := range templates {
		s, b, err := render(name, "x@example.com", Data{App: "App", Code: "123456", Link: "https://x/y", Address: "n@example.com"})
		if err != nil || s == "" || b == "" {
			t.Errorf("%s: %q %q %v", name, s, b, err)
		}
	}
}
