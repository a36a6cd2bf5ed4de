package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/flashsale/flashsale"
)

// MaxBodyBytes bounds every request body; larger is 413 too_large.
const MaxBodyBytes = 64 << 10

var errTooLarge = flashsale.Errorf(flashsale.ETooLarge, "request body is larger than %d bytes", MaxBodyBytes)

// bufPool recycles body buffers: the purchase path reads one per request.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads all of r, at most MaxBodyBytes. It reads through its own
// limit so a decoder given any reader stays bounded, and also recognises
// the *http.MaxBytesError of a handler's http.MaxBytesReader. The caller
// returns buf to bufPool when done with the bytes.
func readBody(r io.Reader) (*bytes.Buffer, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	if r == nil {
		return buf, nil
	}
	_, err := buf.ReadFrom(io.LimitReader(r, MaxBodyBytes+1))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok || buf.Len() > MaxBodyBytes {
		putBuf(buf)
		return nil, errTooLarge
	}
	if err != nil {
		putBuf(buf)
		return nil, flashsale.Errorf(flashsale.EInvalid, "could not read the request body")
	}
	return buf, nil
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= MaxBodyBytes+bytes.MinRead {
		bufPool.Put(b)
	}
}

// decodeBody reads r and decodes exactly one JSON object from it into v.
// With allowEmpty an empty (or all-whitespace) body leaves v untouched.
func decodeBody(r io.Reader, v any, allowEmpty bool) error {
	buf, err := readBody(r)
	if err != nil {
		return err
	}
	defer putBuf(buf)
	return decodeJSON(buf.Bytes(), v, allowEmpty)
}

// decodeJSON decodes exactly one JSON object from b into v, rejecting
// unknown fields, values of the wrong type and data after the object, with
// a message that names the problem.
func decodeJSON(b []byte, v any, allowEmpty bool) error {
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 {
		if allowEmpty {
			return nil
		}
		return flashsale.Errorf(flashsale.EInvalid, "request body is empty; a JSON object is required")
	}
	if trimmed[0] != '{' {
		return flashsale.Errorf(flashsale.EInvalid, "request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if rest := bytes.TrimLeft(trimmed[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return flashsale.Errorf(flashsale.EInvalid, "request body has data after the JSON object at byte %d", len(b)-len(rest))
	}
	return nil
}

// jsonError turns an encoding/json error into an EInvalid error a client can act on.
func jsonError(err error) error {
	if e, ok := errors.AsType[*json.SyntaxError](err); ok {
		return flashsale.Errorf(flashsale.EInvalid, "malformed JSON at byte %d: %s", e.Offset, e.Error())
	}
	if e, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := e.Field
		if field == "" {
			field = "body"
		}
		return flashsale.Errorf(flashsale.EInvalid, "%s must be %s, not a JSON %s", field, jsonKind(e.Type), e.Value)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return flashsale.Errorf(flashsale.EInvalid, "malformed JSON: the body ends before the object does")
	}
	// encoding/json reports unknown fields only as text; there is no typed
	// error to match, so its stable prefix is the one thing to go on.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return flashsale.Errorf(flashsale.EInvalid, "unknown field %s", name)
	}
	if e, ok := errors.AsType[*flashsale.Error](err); ok {
		return e
	}
	return flashsale.Errorf(flashsale.EInvalid, "invalid JSON: %s", err.Error())
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return fmt.Sprintf("a %s", t.Kind())
}

// printableASCII reports whether s is 1 to max bytes of printable ASCII.
func printableASCII(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// pathID returns the {id} path value. IDs are short; an absurdly long one
// cannot exist, so it is answered not found without asking the service.
func pathID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > maxIDLen {
		return "", flashsale.ErrNotFound
	}
	return id, nil
}

const maxIDLen = 128
