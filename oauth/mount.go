package oauth

import (
	"net/http"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
)

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

// People returns the identity service the server signs people in with, on
// Store: the admin API's user operations share it.
func (s *Server) People() *identity.Service { return s.people }

// Store returns the store every write of the server goes through: Deps.Store
// under the client cache (Config.ClientCacheTTL) and revocation.Store, so
// that a client written or deleted through it is current here at once and
// every revocation drops its replay cache entries. The admin API writes
// through it.
func (s *Server) Store() storage.Store { return s.revoker }
