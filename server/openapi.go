package server

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's OpenAPI 3 document, served at /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openapi(w http.ResponseWriter, r *http.Request, _ Token) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}
