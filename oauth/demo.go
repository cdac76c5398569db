package oauth

import (
	"fmt"
	"net/http"

	"github.com/authd/authd/web/templates"
)

// handleDemoCallback is the redirect_uri of the "authd dev" demo client: it
// shows the code and a ready token request. It exists only in dev mode.
func (s *Server) handleDemoCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := templates.DemoData{Code: q.Get("code"), State: q.Get("state"), Issuer: q.Get("iss")}
	if e := q.Get("error"); e != "" {
		d.Error = e + ": " + q.Get("error_description")
	} else {
		d.Curl = fmt.Sprintf("curl -s %s%s \\\n  -d grant_type=authorization_code \\\n  -d client_id=demo-app \\\n  --data-urlencode 'redirect_uri=%s/demo/callback' \\\n  --data-urlencode 'code=%s' \\\n  -d code_verifier=%s",
			s.cfg.Issuer, pathToken, s.cfg.Issuer, d.Code, s.cfg.DemoVerifier)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.Demo(w, d); err != nil {
		s.log.Error("render demo", "error", err)
	}
}
