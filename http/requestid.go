package http

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"unsafe"

	"github.com/flashsale/flashsale"
)

// requestIDHeader names the request id (X-Request-ID) a proxy may send and
// the response always carries back, in the canonical form the header maps
// are indexed by.
const requestIDHeader = "X-Request-Id"

// maxRequestID bounds a client's id: it is copied into log lines and
// message headers.
const maxRequestID = 64

// validRequestID reports whether a client's id can be kept: 1 to 64
// printable ASCII characters, so nothing forged reaches a log line.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// requestID is a generated id and its header value in one allocation:
// the sold-out path answers tens of thousands of requests a second.
type requestID struct {
	hdr [1]string
	buf [16]byte
}

// withRequestID keeps the client's X-Request-ID when valid, makes one
// otherwise (8 random bytes in hex: enough to follow one request through
// the logs; math/rand because nothing secret depends on it), echoes it in
// the response and returns ctx carrying it.
func withRequestID(w http.ResponseWriter, r *http.Request) context.Context {
	if v := r.Header[requestIDHeader]; len(v) == 1 && validRequestID(v[0]) {
		w.Header()[requestIDHeader] = v
		return flashsale.WithRequestID(r.Context(), v[0])
	}
	rid := new(requestID)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	hex.Encode(rid.buf[:], b[:])
	// buf is never written again, so the string may share it.
	rid.hdr[0] = unsafe.String(&rid.buf[0], len(rid.buf))
	w.Header()[requestIDHeader] = rid.hdr[:]
	return flashsale.WithRequestID(r.Context(), rid.hdr[0])
}
