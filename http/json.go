package http

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/flashsale/flashsale"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MaxBodyBytes bounds every request body; larger is 413 too_large.
const MaxBodyBytes = 64 << 10

var errTooLarge = flashsale.Errorf(flashsale.ETooLarge, "request body is larger than %d bytes", MaxBodyBytes)

// bufPool recycles body buffers: the purchase path reads one per request.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads all of r, at most MaxBodyBytes: the one bound on every
// body, read by hand rather than through io.LimitReader, which would cost
// the purchase path an allocation (http.MaxBytesReader too, another). The
// caller returns buf to bufPool when done with the bytes.
func readBody(r io.Reader) (*bytes.Buffer, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	if r == nil {
		return buf, nil
	}
	for {
		buf.Grow(bytes.MinRead)
		b := buf.AvailableBuffer()
		b = b[:min(cap(b), MaxBodyBytes+1-buf.Len())]
		n, err := r.Read(b)
		buf.Write(b[:n])
		if buf.Len() > MaxBodyBytes {
			putBuf(buf)
			return nil, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			putBuf(buf)
			return nil, flashsale.Errorf(flashsale.EInvalid, "could not read the request body")
		}
	}
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= MaxBodyBytes+2*bytes.MinRead {
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
// unknown fields, field names that differ from the schema's only in case,
// duplicate fields, invalid UTF-8, values of the wrong type and data after
// the object, with a message that names the problem.
//
// encoding/json would take {"ROOMS":5} as rooms and let the last of two
// "rooms" win; go-json-experiment/json (encoding/json/v2 before it is
// released, which this Go serves only behind GOEXPERIMENT=jsonv2) matches
// names exactly and refuses duplicates by default.
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
	if err := jsonv2.Unmarshal(trimmed, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return jsonError(err, len(b)-len(trimmed))
	}
	return nil
}

// jsonError turns a decoding error into an EInvalid error a client can
// act on; skipped is the leading whitespace not given to the decoder, so
// byte offsets count from the start of the body.
func jsonError(err error, skipped int) error {
	if e, ok := errors.AsType[*flashsale.Error](err); ok {
		return e
	}
	if e, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		at := e.ByteOffset + int64(skipped)
		switch {
		case errors.Is(e.Err, jsontext.ErrDuplicateName):
			return flashsale.Errorf(flashsale.EInvalid, "duplicate field %q: each field may appear once", fieldName(e.JSONPointer))
		case errors.Is(e.Err, io.ErrUnexpectedEOF):
			return flashsale.Errorf(flashsale.EInvalid, "malformed JSON: the body ends before the object does")
		case e.JSONPointer == "" && strings.Contains(e.Err.Error(), "after top-level value"):
			return flashsale.Errorf(flashsale.EInvalid, "request body has data after the JSON object at byte %d", at)
		}
		return flashsale.Errorf(flashsale.EInvalid, "malformed JSON at byte %d: %v", at, e.Err)
	}
	if e, ok := errors.AsType[*jsonv2.SemanticError](err); ok {
		if errors.Is(e.Err, jsonv2.ErrUnknownName) {
			if in := fieldPath(e.JSONPointer.Parent()); in != "" {
				return flashsale.Errorf(flashsale.EInvalid, "unknown field %q in %s (names are case-sensitive)", fieldName(e.JSONPointer), in)
			}
			return flashsale.Errorf(flashsale.EInvalid, "unknown field %q (names are case-sensitive)", fieldName(e.JSONPointer))
		}
		field := cmp.Or(fieldPath(e.JSONPointer), "body")
		if e.GoType != nil {
			return flashsale.Errorf(flashsale.EInvalid, "%s must be %s, not a JSON %s", field, jsonKind(e.GoType), kindName(e.JSONKind))
		}
		return flashsale.Errorf(flashsale.EInvalid, "%s is invalid", field)
	}
	return flashsale.Errorf(flashsale.EInvalid, "invalid JSON: %s", err.Error())
}

// fieldName is the last name of a JSON pointer.
func fieldName(p jsontext.Pointer) string { return p.LastToken() }

// fieldPath writes a JSON pointer as the field path the error messages
// use elsewhere: /nights/1/date is nights[1].date.
func fieldPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// kindName names a JSON kind for a message.
func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
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
func pathID(r *http.Request) (string, error) { return checkID(r.PathValue("id")) }

// checkID is pathID of an {id} value already read.
func checkID(id string) (string, error) {
	if id == "" || len(id) > maxIDLen {
		return "", flashsale.ErrNotFound
	}
	return id, nil
}

const maxIDLen = 128
