package http

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/flashsale/flashsale"
)

// requestCtx is a request's context: its request id (the client's
// X-Request-ID, or one made here) and its deadline, in one allocation on a
// path that answers tens of thousands of requests a second.
//
// The deadline's timer is made only if something waits on Done. Deadline
// and Err hold from the start, so a call that only reads the deadline
// (go-redis sets its socket deadlines from it) or checks Err is bounded
// too; database/sql and the queue publisher wait on Done, and get a real
// timer then. The sold-out path does no I/O and pays nothing:
// context.WithTimeout per request cost it 5-10% of its throughput
// (docs/benchmarks.md). A zero deadline (an event stream, which bounds its
// own reads and writes) is the request's own.
type requestCtx struct {
	flashsale.RequestIDContext // the request's context and its id
	deadline                   time.Time

	idBuf [16]byte  // a generated id, in hex
	idHdr [1]string // the id as the response header's value

	once    sync.Once
	started atomic.Bool     // set once timed is: from then on it answers Done and Err
	timed   context.Context // made by the first Done (or the request's own, after release)
	cancel  context.CancelFunc
}

// newRequestCtx returns parent with a deadline timeout from now (none when
// timeout is 0) and no request id yet (see identify). Call release when the
// request ends.
func newRequestCtx(parent context.Context, timeout time.Duration) *requestCtx {
	c := &requestCtx{}
	c.Context = parent
	if timeout > 0 {
		c.deadline = time.Now().Add(timeout)
		if pd, ok := parent.Deadline(); ok && pd.Before(c.deadline) {
			c.deadline = pd
		}
	}
	return c
}

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

// clientRequestID returns the client's X-Request-ID header value when it
// is one valid id.
func clientRequestID(r *http.Request) ([]string, bool) {
	v := r.Header[requestIDHeader]
	return v, len(v) == 1 && validRequestID(v[0])
}

// requestIDValue is the X-Request-Id header of an answer given before the
// request has its context (answerSoldOut): the client's id when valid,
// else a new one, as identify makes them.
func requestIDValue(r *http.Request) []string {
	if v, ok := clientRequestID(r); ok {
		return v
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return []string{hex.EncodeToString(b[:])}
}

// identify keeps the client's X-Request-ID when valid, makes one otherwise
// (8 random bytes in hex: enough to follow one request through the logs;
// math/rand because nothing secret depends on it), and echoes it in the
// response.
func (c *requestCtx) identify(w http.ResponseWriter, r *http.Request) {
	if v, ok := clientRequestID(r); ok {
		c.ID = v[0]
		w.Header()[requestIDHeader] = v
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	hex.Encode(c.idBuf[:], b[:])
	// idBuf is never written again, so the string may share it.
	c.idHdr[0] = unsafe.String(&c.idBuf[0], len(c.idBuf))
	c.ID = c.idHdr[0]
	w.Header()[requestIDHeader] = c.idHdr[:]
}

func (c *requestCtx) start() {
	c.once.Do(func() {
		c.timed, c.cancel = context.WithDeadline(c.Context, c.deadline)
		c.started.Store(true)
	})
}

func (c *requestCtx) Deadline() (time.Time, bool) {
	if c.deadline.IsZero() {
		return c.Context.Deadline()
	}
	return c.deadline, true
}

func (c *requestCtx) Done() <-chan struct{} {
	if c.deadline.IsZero() {
		return c.Context.Done()
	}
	c.start()
	return c.timed.Done()
}

// Err agrees with Done: once a timer exists its context answers (a Done
// closed by release must come with an error, or derived contexts panic).
func (c *requestCtx) Err() error {
	if c.deadline.IsZero() {
		return c.Context.Err()
	}
	if c.started.Load() {
		return c.timed.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// AfterFunc lets a context derived from this one (database/sql's, the
// publisher's) be cancelled by a callback rather than a goroutine the
// context package would start for each, since it cannot see the timer's
// own cancelCtx through this type.
func (c *requestCtx) AfterFunc(f func()) (stop func() bool) {
	if c.deadline.IsZero() {
		return context.AfterFunc(c.Context, f)
	}
	c.start()
	return context.AfterFunc(c.timed, f)
}

// release stops the timer if one was made; a Done after it returns the
// request's own channel.
func (c *requestCtx) release() {
	if c.deadline.IsZero() {
		return
	}
	c.once.Do(func() {
		c.timed, c.cancel = c.Context, func() {}
		c.started.Store(true)
	})
	c.cancel()
}
