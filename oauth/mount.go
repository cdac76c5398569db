package oauth

import "net/http"

// AdminAPI is an HTTP API served under /admin/ (authd's is package
// adminapi, which cmd/authd builds and mounts). The server runs it behind
// its own middleware: the request ID (X-Request-Id, set on the response
// before the API runs), the access log, the request metrics and panic
// recovery; and outside the public body limit, since the API bounds its
// own bodies.
type AdminAPI interface {
	http.Handler
	// Route returns the route label of path, for the request metrics and
	// the access log: one of a fixed few values (the label set must stay
	// bounded whatever a client sends), or "" for a path that is none of
	// the API's routes ("other").
	Route(path string) string
}

// MountAdmin serves api under /admin/. Call it before the server serves
// its first request; without it, /admin/… is 404 like any unknown path.
func (s *Server) MountAdmin(api AdminAPI) { s.admin = api }
