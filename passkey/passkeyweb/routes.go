package passkeyweb

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
)

// Routes implements signin.Mounter: POST options.
func (m *Method) Routes(signin.Flow) []signin.Route {
	return []signin.Route{{Method: http.MethodPost, Path: "options", Handler: m.OptionsHandler()}}
}

// OptionsHandler answers the options of a sign-in ceremony: JSON
// {"publicKey": …}, no-store. Only a same-origin request (Sec-Fetch-Site,
// Origin: net/http.CrossOriginProtection) with an X-CSRF-Token gets them;
// the token is bound to the challenge and checked against the CSRF cookie
// when the form is posted (the flow's check), so a challenge fetched
// without the page's token can never be answered. Errors are JSON with
// a "message" in words.
func (m *Method) OptionsHandler() http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusForbidden, "cross_origin", "This request was not sent from this site.")
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		csrf := r.Header.Get("X-CSRF-Token")
		if csrf == "" || len(csrf) > 128 {
			writeError(w, http.StatusForbidden, "invalid_csrf", "This page has expired. Reload it and try again.")
			return
		}
		opts, err := m.svc.BeginLogin(r.Context(), csrf)
		if err != nil {
			if errors.Is(err, storage.ErrUnavailable) {
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "The server is busy. Please try again in a moment.")
				return
			}
			slog.ErrorContext(r.Context(), "passkey options", "error", err)
			writeError(w, http.StatusInternalServerError, "server_error", "Something went wrong. Please try again in a moment.")
			return
		}
		writeJSON(w, http.StatusOK, opts)
	}))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]string{"error": code, "message": msg})
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
