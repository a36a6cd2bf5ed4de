package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// Server-Sent Events: GET /api/sales/{id}/events pushes the rooms left,
// so a page never polls the sale view once a second per guest (the outage
// the sources describe). One broadcaster per sale per instance
// polls the service's public view while the sale has subscribers and
// publishes only what changed; each stream writes at most one update per
// eventGap, the latest, however often the figures move.
//
// Lock order: eventHub.mu and room.mu are never held together.
//
// Each client address holds at most Server.streamsPerClient streams
// (admit); the page falls back to polling when refused.

// Defaults of the event stream.
const (
	// eventPoll is how often a sale with subscribers is read.
	eventPoll = 500 * time.Millisecond
	// eventGap is the least time between two updates on one stream: at
	// most two a second per client.
	eventGap = 500 * time.Millisecond
	// eventHeartbeat keeps proxies from closing an idle stream.
	eventHeartbeat = 15 * time.Second
	// eventWriteTimeout bounds one write to a slow client.
	eventWriteTimeout = 10 * time.Second
	// eventRetry sets the browser's reconnection delay.
	eventRetry = "retry: 2000\n\n"
)

// eventHub is the set of broadcasters, one per sale with subscribers.
type eventHub struct {
	s                          *Server
	poll, gap, heartbeat, wait time.Duration
	// read is what a broadcaster publishes at each poll: the rooms left
	// here, the operators' dashboard in adminstream.go.
	read func(ctx context.Context, id string) ([]byte, error)

	mu       sync.Mutex
	rooms    map[string]*room
	clients  map[string]int        // open guest streams by client address (Server.streamsPerClient)
	servers  map[*http.Server]bool // whose shutdown we listen to
	shutdown chan struct{}         // closed when an http.Server serving us shuts down
	closed   bool
	running  atomic.Int32 // broadcasters whose loop has not returned

	// life ends with close: the broadcasters and the admin stream's
	// audits run under it, so none outlives the servers' shutdown.
	life context.Context
	end  context.CancelFunc
}

func newEventHub(s *Server) *eventHub {
	h := &eventHub{s: s, poll: eventPoll, gap: eventGap, heartbeat: eventHeartbeat, wait: eventWriteTimeout,
		rooms: map[string]*room{}, clients: map[string]int{}, servers: map[*http.Server]bool{}, shutdown: make(chan struct{})}
	h.life, h.end = context.WithCancel(context.Background())
	h.read = func(ctx context.Context, id string) ([]byte, error) {
		v, err := s.svc.PublicSale(ctx, id)
		if err != nil {
			return nil, err
		}
		return roomsEvent(v), nil
	}
	return h
}

// room is one sale's broadcaster: the latest event and a channel closed
// when it changes, so fanning out costs one close, not a send per client.
type room struct {
	subs int           // guarded by eventHub.mu
	stop chan struct{} // closed when the last subscriber leaves

	mu      sync.Mutex
	last    []byte
	changed chan struct{}
}

func (r *room) current() ([]byte, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.changed
}

// publish stores ev and wakes the streams when it differs from the last.
func (r *room) publish(ev []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes.Equal(ev, r.last) {
		return
	}
	r.last = ev
	close(r.changed)
	r.changed = make(chan struct{})
}

// isEventStream reports whether r is for an event stream (the guests'
// or the operators'), which lives for minutes and so is exempt from the
// request deadline (serveHTTP).
func isEventStream(r *http.Request) bool {
	return r.Method == http.MethodGet && (strings.HasSuffix(r.URL.Path, "/events") &&
		strings.HasPrefix(r.URL.Path, "/api/sales/") || isAdminStream(r.URL.Path))
}

// isStreamRoute reports whether pattern is an event stream's route, whose
// length is no latency: it would swamp the histogram's p99.
func isStreamRoute(pattern string) bool {
	return pattern == eventsRoute || pattern == adminStreamRoute
}

// roomsEventJSON is one update: what a guest can still buy.
type roomsEventJSON struct {
	Status flashsale.SaleStatus `json:"status"`
	Nights []publicNightJSON    `json:"nights"`
}

// roomsEvent encodes a view as one SSE message.
func roomsEvent(v *flashsale.SaleView) []byte {
	pv := publicView(v)
	b, err := json.Marshal(roomsEventJSON{Status: pv.Status, Nights: pv.Nights})
	if err != nil {
		panic(err) // a plain struct always encodes
	}
	return sseMessage("rooms", b)
}

// handleEvents answers an unknown sale with a JSON error, then streams.
// The first update is the view it just read; later ones come from the
// sale's broadcaster.
func (h *eventHub) handleEvents(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if err := s.limitRead(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	client, ok := h.admitStream(w, r)
	if !ok {
		return
	}
	defer h.release(client)
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	v, err := s.svc.PublicSale(ctx, id)
	cancel()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h.stream(w, r, id, roomsEvent(v))
}

// admitStream counts a stream against its client address's cap, or
// answers 429; the caller releases the client when the stream ends.
func (h *eventHub) admitStream(w http.ResponseWriter, r *http.Request) (string, bool) {
	client := h.s.clientIP(r)
	if !h.admit(client) {
		h.s.writeError(w, r, &flashsale.RateLimitedError{Wait: streamRefusedWait})
		return "", false
	}
	return client, true
}

// stream answers 200 and writes first, then the sale's broadcaster's
// updates until the client leaves or the server shuts down.
func (h *eventHub) stream(w http.ResponseWriter, r *http.Request, id string, first []byte) {
	rc, shutdown := h.open(w, r)
	rm := h.join(id)
	defer h.leave(id, rm)

	sent := first
	if !h.write(rc, w, append([]byte(eventRetry), sent...)) {
		return
	}
	beat := time.NewTicker(h.heartbeat)
	defer beat.Stop()
	gap := time.NewTimer(h.gap)
	defer gap.Stop()
	for {
		// Coalesce: whatever changed during the gap is sent once, the latest.
		select {
		case <-gap.C:
		case <-r.Context().Done():
			return
		case <-shutdown:
			return
		}
		ev, changed := rm.current()
		for ev == nil || bytes.Equal(ev, sent) {
			select {
			case <-changed:
			case <-beat.C:
				if !h.write(rc, w, []byte(": ping\n\n")) {
					return
				}
			case <-r.Context().Done():
				return
			case <-shutdown:
				return
			}
			ev, changed = rm.current()
		}
		if !h.write(rc, w, ev) {
			return
		}
		sent = ev
		gap.Reset(h.gap)
	}
}

// open answers 200 as an event stream and returns the stream's controller
// and a channel closed when the server serving it shuts down. The
// server's read timeout needs nothing here (net/http lifts it once the
// request is read); its write timeout is moved on at every write.
func (h *eventHub) open(w http.ResponseWriter, r *http.Request) (*http.ResponseController, <-chan struct{}) {
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	return rc, h.watch(r)
}

// sseMessage is one Server-Sent Events message: the event's name and its
// JSON data.
func sseMessage(event string, data []byte) []byte {
	b := make([]byte, 0, len("event: \ndata: \n\n")+len(event)+len(data))
	b = append(append(append(append(b, "event: "...), event...), "\ndata: "...), data...)
	return append(b, '\n', '\n')
}

// write sends b and flushes it, bounded by the write timeout.
func (h *eventHub) write(rc *http.ResponseController, w http.ResponseWriter, b []byte) bool {
	if err := rc.SetWriteDeadline(time.Now().Add(h.wait)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return false
	}
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// watch returns a channel closed when the http.Server serving r shuts
// down: Shutdown waits for idle connections, and a stream never is.
func (h *eventHub) watch(r *http.Request) <-chan struct{} {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	h.mu.Lock()
	defer h.mu.Unlock()
	if srv != nil && !h.servers[srv] {
		h.servers[srv] = true
		srv.RegisterOnShutdown(h.close)
	}
	return h.shutdown
}

// close ends every stream.
func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.shutdown)
		h.end()
	}
}

// join subscribes to a sale, starting its broadcaster for the first subscriber.
func (h *eventHub) join(id string) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	rm := h.rooms[id]
	if rm == nil {
		rm = &room{stop: make(chan struct{}), changed: make(chan struct{})}
		h.rooms[id] = rm
		h.running.Add(1)
		go h.run(id, rm)
	}
	rm.subs++
	return rm
}

// leave unsubscribes; the last one out stops the broadcaster.
func (h *eventHub) leave(id string, rm *room) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rm.subs--; rm.subs == 0 {
		delete(h.rooms, id)
		close(rm.stop)
	}
}

// streamRefusedWait is the Retry-After of a stream refused for its
// client's cap; the page polls meanwhile.
const streamRefusedWait = 10 * time.Second

// admit counts a stream of client's, unless client holds the cap already:
// one address held 5 000 streams (issue 23), each a goroutine and a socket.
func (h *eventHub) admit(client string) bool {
	if h.s.streamsPerClient <= 0 {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clients[client] >= h.s.streamsPerClient {
		return false
	}
	h.clients[client]++
	return true
}

// release uncounts a stream admit counted.
func (h *eventHub) release(client string) {
	if h.s.streamsPerClient <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clients[client]--; h.clients[client] <= 0 {
		delete(h.clients, client)
	}
}

// broadcasters counts the poll loops still running, for tests.
func (h *eventHub) broadcasters() int { return int(h.running.Load()) }

// run polls one sale until its last subscriber leaves. A failed read
// keeps the last figures: the stream goes quiet rather than wrong.
func (h *eventHub) run(id string, rm *room) {
	defer h.running.Add(-1)
	ctx, cancel := context.WithCancel(h.life)
	defer cancel()
	t := time.NewTicker(h.poll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-rm.stop:
			return
		case <-t.C:
		}
		pctx, pcancel := context.WithTimeout(ctx, h.s.timeout)
		ev, err := h.read(pctx, id)
		pcancel()
		if err != nil {
			if !failing { // once per outage, not twice a second
				h.s.log.Warn("event stream: read sale", "sale_id", id, "err", err)
			}
			failing = true
			continue
		}
		failing = false
		rm.publish(ev)
	}
}
