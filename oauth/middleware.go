package oauth

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxBodyBytes bounds every request body; larger bodies are refused with 413.
const maxBodyBytes = 64 << 10

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// knownRoutes limits the route label to fixed values (no unbounded metric
// cardinality, nothing from the query string is ever logged).
var knownRoutes = map[string]bool{
	pathAuthorize: true, pathToken: true, pathRevoke: true, pathIntrospect: true,
	pathLogout: true, pathAccount: true, pathMetadata: true, pathDiscovery: true,
	pathJWKS: true, pathUserinfo: true, pathEndSession: true, pathPAR: true, pathChallenge: true,
	"/static/authd.css": true, "/demo/callback": true, "/favicon.ico": true,
}

// logRequests logs one line per request: request id, method, route, status
// and latency. It never logs the query string, form or headers, which carry
// codes, tokens, verifiers and secrets.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			id = randomString(9)
		}
		w.Header().Set("X-Request-Id", id)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				// A panic is a bug; the client still gets a clean answer.
				s.log.Error("panic", "request_id", id, "panic", p)
				if sw.status == 0 {
					http.Error(sw, `{"error":"server_error"}`, http.StatusInternalServerError)
				}
			}
			route := r.URL.Path
			switch {
			case knownRoutes[route], s.methods.routes[route]:
			case s.accounts != nil && s.accounts.Route(route) != "":
				route = s.accounts.Route(route)
			case s.admin != nil && strings.HasPrefix(route, "/admin/"):
				if route = s.admin.Route(route); route == "" {
					route = "other"
				}
			default:
				route = "other"
			}
			if sw.status == 0 {
				sw.status = http.StatusOK
			}
			s.metrics.httpRequests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
			// The record goes straight to the handler with no caller
			// (pc 0): Logger.LogAttrs would walk the stack on every
			// request for a source the access log has no use for (a
			// handler with AddSource prints none for these lines).
			if h := s.access.Handler(); h.Enabled(r.Context(), slog.LevelInfo) {
				end := time.Now()
				rec := slog.NewRecord(end, slog.LevelInfo, "request", 0)
				rec.AddAttrs(
					slog.String("request_id", id),
					slog.String("method", r.Method),
					slog.String("route", route),
					slog.Int("status", sw.status),
					slog.Float64("latency_s", end.Sub(start).Seconds()),
				)
				_ = h.Handle(r.Context(), rec)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// errBodyTooLarge is the 413 answer of the OAuth API to a body over
// maxBodyBytes (RFC 6749 §5.2's format).
var errBodyTooLarge = []byte(`{"error":"invalid_request","error_description":"The request body is too large."}` + "\n")

// limitBody caps request bodies at maxBodyBytes and answers a larger one
// with tooLarge (413, RFC 9110 §15.5.14) before next runs: a declared
// Content-Length over the cap, and a body of unknown length (chunked),
// which is read here up to the cap, so that one growing over it is 413 on
// every route, not each handler's "could not parse the form" (400). Form
// bodies are read whole by their handlers anyway.
func limitBody(next http.Handler, tooLarge http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBodyBytes {
			tooLarge(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		if r.ContentLength < 0 && r.Body != nil {
			b, err := io.ReadAll(r.Body)
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				tooLarge(w, r)
				return
			}
			// Another read error (the client went away) reaches the
			// handler's parse as before.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
		}
		next.ServeHTTP(w, r)
	})
}

// errReader returns err, or io.EOF for nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// bodyTooLarge answers a body over maxBodyBytes: JSON (RFC 6749 §5.2) on
// the OAuth API's endpoints and for a JSON request, a page in words on
// the pages.
func (s *Server) bodyTooLarge(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case pathToken, pathRevoke, pathIntrospect, pathPAR, pathUserinfo, pathChallenge:
		writeJSONBytes(w, http.StatusRequestEntityTooLarge, errBodyTooLarge)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		writeJSONBytes(w, http.StatusRequestEntityTooLarge, errBodyTooLarge)
		return
	}
	s.pageTooLarge(w, r)
}

// pageTooLarge is the page of a form over maxBodyBytes.
func (s *Server) pageTooLarge(w http.ResponseWriter, r *http.Request) {
	securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.renderError(w, http.StatusRequestEntityTooLarge, "This form is too large to send.",
			"What was sent is over 64 KiB. Go back, shorten what you entered, and try again.")
	})).ServeHTTP(w, r)
}

// securityHeaders sets the headers every HTML page carries: no framing,
// a CSP without inline script or style, no referrer, no caching. The CSP
// has no form-action: the sign-in and consent forms post here and are
// answered with a redirect to the client's redirect_uri (any origin, or an
// app's own scheme), which browsers that apply form-action to redirects
// would block. The forms' targets are this server's, and CSRF tokens and
// the cross-origin check guard what they post.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(challengeWriter{w}, r)
	})
}

// pageChallenge is the WWW-Authenticate challenge of a page's 401 (a
// wrong password, no session): RFC 9110 §15.5.2 wants one on every 401.
// The pages authenticate by their sign-in form and a session cookie, for
// which no HTTP scheme is registered; browsers ignore a scheme they do not
// know, so this opens no password dialog.
const pageChallenge = `Cookie realm="authd"`

// challengeWriter adds pageChallenge to a 401 that carries no challenge of
// its own.
type challengeWriter struct{ http.ResponseWriter }

func (w challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", pageChallenge)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w challengeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
