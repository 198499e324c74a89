package api

import (
	"net/http"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/acl"
)

// whoami tells a caller what the access control made of it, so that a page
// (the dashboard) offers only what the caller's role may do. Without an ACL
// nobody is authenticated and everybody may do everything.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p, ok := acl.PrincipalFrom(r.Context())
	if !ok {
		writeJSON(w, http.StatusOK, wire.WhoAmI{ACL: false, Role: string(acl.RoleOperator)})
		return
	}
	writeJSON(w, http.StatusOK, wire.WhoAmI{ACL: true, Name: p.Name, Role: string(p.Role), Locks: p.Locks, Keys: p.Keys})
}
