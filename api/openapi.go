package api

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the description of this API (openapi.yaml, OpenAPI 3.1): the
// authoritative contract. Tests check that it and the router describe the
// same routes, that real responses validate against it, and that its error
// code enum is wire.Codes().
//
//go:embed openapi.yaml
var OpenAPI []byte

// openapi serves the description. It is open to anyone, like the probes: it
// is the same for every build of a version and tells nothing of the
// cluster's state.
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	w.Write(OpenAPI)
}
