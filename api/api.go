// Package api holds the OpenAPI description of the HTTP API. It is the
// contract: the http package serves it and its tests check the handlers
// against it.
package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document, served at GET /api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
