package api

import (
	"bytes"
	"testing"
)

func TestOpenAPIEmbedded(t *testing.T) {
	if !bytes.HasPrefix(OpenAPI, []byte("openapi: 3.1.")) {
		t.Fatalf("embedded document does not start with an OpenAPI 3.1 version line: %.40q", OpenAPI)
	}
	if bytes.Contains(OpenAPI, []byte("\t")) {
		t.Fatal("YAML must not contain tabs")
	}
}
