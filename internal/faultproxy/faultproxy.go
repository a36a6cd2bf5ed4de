// Package faultproxy is a TCP proxy that a fault-injection test puts between
// the service and a real dependency (Redis, RabbitMQ, MariaDB, PostgreSQL),
// so that a fault happens when the test says and not when the scheduler
// happens to allow it: cut every connection at a chosen moment, refuse new
// ones, hold a broker's replies while its requests still arrive, hold one
// chosen request (a COMMIT), freeze the peer, or slow it down; and so that
// the test can see what a client sent and what a cut threw away.
//
// Every connection is pumped by a reader and a writer per direction with a
// queue between them (up to queueLimit bytes), so holding a direction never
// blocks the side that is still allowed to talk: bytes keep being read and
// wait in the queue, in order, until the hold is lifted or Cut discards them.
//
// Locking: Proxy.mu guards every mutable field of the Proxy, its links and
// their pipes. There is no other lock, and no I/O runs while it is held.
package faultproxy

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// queueLimit is how many bytes a direction may hold before the proxy stops
// reading from its source. Tests hold a few MB at most; the limit only keeps
// a runaway test from eating the machine, and when it is reached the sender
// blocks the way it would on a peer whose TCP window is full.
const queueLimit = 64 << 20

// readSize is the largest chunk one read takes from a connection.
const readSize = 32 << 10

// Proxy forwards connections from 127.0.0.1 to one upstream address and
// lets a test break them on purpose. Its methods are safe for concurrent use.
type Proxy struct {
	tb       testing.TB
	ln       net.Listener
	upstream string
	ctx      context.Context // cancelled by close, so a pending dial ends with it
	cancel   context.CancelFunc
	wg       sync.WaitGroup // every goroutine the proxy starts

	mu          sync.Mutex
	links       map[*link]struct{}
	changed     chan struct{} // closed and replaced whenever a waiter may be able to proceed
	closed      bool
	refuse      bool
	blackhole   bool
	pause       bool
	holdReplies bool
	latency     time.Duration
	discarded   [2]int64                     // bytes read and never delivered, by direction (see Discarded)
	match       func(chunk []byte) bool      // see HoldRequest; nil when off
	watch       func(conn int, chunk []byte) // see Watch; nil when off
	caught      chan int                     // gets the connection match caught its request on
	conns       int                          // connections accepted so far: the next one's number
}

// Start listens on 127.0.0.1:0 and forwards every accepted connection to
// upstream (host:port), so a test gets a dependency it can break without
// touching the real one. The proxy, its connections and its goroutines are
// closed by tb.Cleanup.
func Start(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		tb:       tb,
		ln:       ln,
		upstream: upstream,
		ctx:      ctx,
		cancel:   cancel,
		links:    make(map[*link]struct{}),
		changed:  make(chan struct{}),
	}
	p.wg.Add(1)
	go p.serve()
	tb.Cleanup(p.close)
	return p
}

// Addr returns the host:port a client dials instead of the upstream's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns raw, a URL such as redis://127.0.0.1:6379/0,
// amqp://guest:guest@127.0.0.1:5672/vhost or mysql://root@127.0.0.1:3306/db,
// with its host:port replaced by Addr, so a test can hand the service the
// configuration it already has, pointed through the proxy. Everything else
// in raw (user, password, path, query) is kept. raw must be a URL, not a
// key=value DSN; anything else fails the test.
func (p *Proxy) URL(raw string) string {
	p.tb.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		p.tb.Fatalf("faultproxy: URL(%q): %v", raw, err)
	}
	if u.Host == "" {
		p.tb.Fatalf("faultproxy: URL(%q): no host to replace", raw)
	}
	u.Host = p.Addr()
	return u.String()
}

// Cut closes every open connection now, both the client's side and the
// upstream's, and discards whatever bytes were held for them: the moment a
// dependency crashes or the network drops, chosen by the test. Connections
// accepted afterwards are forwarded as usual. When Cut returns, Conns is 0
// unless a new connection has already arrived.
func (p *Proxy) Cut() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Refuse, while on, accepts each new connection and closes it at once, as a
// dependency that is restarting does, so a test can check that the service
// gives up cleanly and reconnects later. Open connections are left alone.
func (p *Proxy) Refuse(on bool) { p.set(func() { p.refuse = on }) }

// Blackhole, while on, keeps every connection open, including ones accepted
// while it is on, but forwards nothing in either direction: a dependency
// that accepts connections and never answers, which is what timeouts exist
// for. Bytes are held, not dropped, and delivered in order when it is turned
// off. It is the same hold as Pause, kept as its own switch so that a test
// using one cannot lift the other.
func (p *Proxy) Blackhole(on bool) { p.set(func() { p.blackhole = on }) }

// HoldReplies, while on, forwards client-to-upstream bytes as usual but holds
// upstream-to-client bytes; turning it off delivers them in order. It makes a
// lost reply certain: hold the broker's replies, let the request reach it
// (a publish, a commit), then Cut, and the client never learns the outcome.
func (p *Proxy) HoldReplies(on bool) { p.set(func() { p.holdReplies = on }) }

// HoldRequest holds the first client-to-upstream chunk that match accepts
// (a chunk is what one read took: a request the client wrote at once, up to
// 32 KiB) and everything after it on that connection; every other
// connection, and the replies, flow as usual. The returned channel gets
// the number of the connection the request was caught on (as Watch numbers
// them). HoldRequest(nil) turns it off and
// delivers what was held, in order (it returns nil); Cut discards it
// instead. It makes the loss of one chosen request certain: catch a
// database client's COMMIT, kill the client, Cut, and the transaction was
// never committed, though every statement before it ran. match runs under
// the proxy's lock: it must be quick and must not call the proxy.
func (p *Proxy) HoldRequest(match func(chunk []byte) bool) <-chan int {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.broadcast()
	if p.match, p.caught = match, nil; match == nil {
		for l := range p.links {
			l.holding = false
		}
		return nil
	}
	p.caught = make(chan int, 1)
	return p.caught
}

// Watch, with a non-nil fn, shows fn every chunk of client-to-upstream
// bytes as the proxy reads it, with the number of the connection it came
// on (connections are numbered from 1 as they are accepted), so a test can
// see what a client asked of its dependency (an order ID in a database
// statement, say, and in which session) without changing anything.
// Watch(nil) stops it. fn runs under the proxy's lock: it must be quick,
// must not keep the chunk, and must not call the proxy.
func (p *Proxy) Watch(fn func(conn int, chunk []byte)) { p.set(func() { p.watch = fn }) }

// Pause, while on, lets nothing flow either way on any connection, like a
// SIGSTOP of the peer: writes still succeed (the stopped peer's kernel would
// buffer them) and reads wait. Held bytes are delivered in order when it is
// turned off, so a test can freeze a dependency mid-conversation and resume it.
func (p *Proxy) Pause(on bool) { p.set(func() { p.pause = on }) }

// Latency delays each chunk by d from the moment the proxy reads it, in both
// directions, so a round trip takes at least 2*d longer; chunks already
// queued keep the delay they were read with. 0 turns it off. It lets a test
// push a call past a deadline without depending on how slow the machine is.
func (p *Proxy) Latency(d time.Duration) { p.set(func() { p.latency = d }) }

// Held returns how many bytes wait in the proxy right now, read from one
// side and not yet delivered to the other: the requests (toUpstream) and the
// replies (toClient) a hold or a latency is keeping back.
func (p *Proxy) Held() (toUpstream, toClient int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		if l.up != nil {
			toUpstream += l.up.queued
			toClient += l.down.queued
		}
	}
	return toUpstream, toClient
}

// Discarded returns how many bytes the proxy has thrown away since it
// started: read from one side and never delivered to the other because
// their connection closed while they waited (Cut, or a side hung up). After
// a hold and a Cut it is what the upstream (toUpstream) or the client
// (toClient) certainly never received, so a test can prove that an ack or a
// commit was lost and not merely late.
func (p *Proxy) Discarded() (toUpstream, toClient int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.discarded[0], p.discarded[1]
}

// discard counts n bytes of pp's direction as thrown away. p.mu must be held.
func (p *Proxy) discard(pp *pipe, n int) {
	if pp.reply {
		p.discarded[1] += int64(n)
	} else {
		p.discarded[0] += int64(n)
	}
}

// Conns returns how many connections are currently open through the proxy,
// counting one from accept (even while the upstream is still being dialled)
// until both its sides are closed, so a test can wait for a pool to connect
// or to let go.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// set changes the proxy's state under its lock and wakes every waiter, so a
// writer that was holding bytes looks again.
func (p *Proxy) set(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
	p.broadcast()
}

// broadcast wakes every goroutine waiting on p.changed. p.mu must be held.
func (p *Proxy) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// close stops accepting, closes every connection and waits for every
// goroutine the proxy started, so goleak finds none after the test.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// serve accepts connections until the listener is closed.
func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if !closed {
				p.tb.Errorf("faultproxy: accept: %v", err)
			}
			return
		}
		p.mu.Lock()
		if p.closed || p.refuse {
			p.mu.Unlock()
			c.Close()
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		p.conns++
		l := &link{p: p, id: p.conns, client: c, ctx: ctx, cancel: cancel}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go l.dial()
	}
}

// link is one client connection and its upstream connection.
type link struct {
	p      *Proxy
	id     int // its number, from 1 in the order of acceptance
	client net.Conn
	ctx    context.Context // cancelled by close: wakes waiters, aborts the dial
	cancel context.CancelFunc

	// Guarded by p.mu.
	closed   bool
	holding  bool  // HoldRequest caught a request here: up is held
	up, down *pipe // client to upstream, upstream to client; nil until dialled
}

// pipe is one direction of a link: a reader fills queue from src, a writer
// drains it to dst whenever the direction is not held.
type pipe struct {
	src, dst net.Conn
	reply    bool // upstream to client, the direction HoldReplies holds

	// Guarded by p.mu.
	queue  []chunk
	queued int  // bytes in queue
	eof    bool // src has nothing more to give
	done   bool // the writer has delivered everything and closed dst for writing
}

// chunk is one read's bytes and the time they may be written (read time
// plus the latency at that moment).
type chunk struct {
	data []byte
	due  time.Time
}

// dial connects to the upstream and starts the four pumps; a link whose dial
// fails is closed, which the client sees as a dependency that hung up.
func (l *link) dial() {
	p := l.p
	defer p.wg.Done()
	var d net.Dialer
	up, err := d.DialContext(l.ctx, "tcp", p.upstream)
	if err != nil {
		if l.ctx.Err() == nil {
			p.tb.Logf("faultproxy: dial upstream %s: %v", p.upstream, err)
		}
		l.close()
		return
	}
	p.mu.Lock()
	if l.closed {
		p.mu.Unlock()
		up.Close()
		return
	}
	l.up = &pipe{src: l.client, dst: up}
	l.down = &pipe{src: up, dst: l.client, reply: true}
	p.wg.Add(4)
	p.mu.Unlock()
	go l.read(l.up)
	go l.write(l.up)
	go l.read(l.down)
	go l.write(l.down)
}

// close closes both sides of the link and forgets it; it is safe to call
// more than once and from any goroutine.
func (l *link) close() {
	p := l.p
	p.mu.Lock()
	if l.closed {
		p.mu.Unlock()
		return
	}
	l.closed = true
	delete(p.links, l)
	var up net.Conn
	if l.up != nil {
		up = l.up.dst
		for _, pp := range [...]*pipe{l.up, l.down} {
			p.discard(pp, pp.queued)
			pp.queue, pp.queued = nil, 0
		}
	}
	p.mu.Unlock()
	l.cancel()
	l.client.Close()
	if up != nil {
		up.Close()
	}
}

// read moves bytes from pp.src into pp.queue until src ends or the link is
// closed. It keeps reading while the direction is held, so a held peer's
// sender is not slowed, until queueLimit bytes wait.
func (l *link) read(pp *pipe) {
	p := l.p
	defer p.wg.Done()
	buf := make([]byte, readSize)
	for {
		if !l.waitRoom(pp) {
			return
		}
		n, err := pp.src.Read(buf)
		p.mu.Lock()
		switch {
		case n > 0 && l.closed:
			p.discard(pp, n) // read as the link closed: nobody will write it
		case n > 0:
			pp.queue = append(pp.queue, chunk{data: bytes.Clone(buf[:n]), due: time.Now().Add(p.latency)})
			pp.queued += n
			if p.watch != nil && !pp.reply {
				p.watch(l.id, buf[:n])
			}
		}
		if err != nil {
			// EOF or any other end: the writer delivers what came before
			// it, then closes dst for writing, the way the peer did.
			pp.eof = true
		}
		p.broadcast()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// waitRoom waits until pp.queue has room for another read; it reports false
// when the link is closed.
func (l *link) waitRoom(pp *pipe) bool {
	p := l.p
	for {
		p.mu.Lock()
		if l.closed {
			p.mu.Unlock()
			return false
		}
		if pp.queued < queueLimit {
			p.mu.Unlock()
			return true
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-l.ctx.Done():
			return false
		}
	}
}

// write delivers pp.queue to pp.dst in order, each chunk no earlier than it
// is due and only while the direction is not held. After the source's end it
// closes dst for writing, and the last of the two writers closes the link.
func (l *link) write(pp *pipe) {
	p := l.p
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if l.closed {
			p.mu.Unlock()
			return
		}
		held := p.pause || p.blackhole || (pp.reply && p.holdReplies) || (!pp.reply && l.holding)
		var wait time.Duration
		switch {
		case held:
		case len(pp.queue) > 0 && !pp.reply && p.match != nil && p.match(pp.queue[0].data):
			l.holding, p.match = true, nil // caught: this one and what follows wait
			p.caught <- l.id
			p.mu.Unlock()
			continue
		case len(pp.queue) > 0:
			c := pp.queue[0]
			if wait = time.Until(c.due); wait <= 0 {
				pp.queue[0] = chunk{}
				pp.queue = pp.queue[1:]
				pp.queued -= len(c.data)
				p.broadcast() // the reader may be waiting for room
				p.mu.Unlock()
				if n, err := pp.dst.Write(c.data); err != nil {
					p.mu.Lock()
					p.discard(pp, len(c.data)-n)
					p.mu.Unlock()
					l.close()
					return
				}
				continue
			}
		case pp.eof:
			pp.done = true
			last := l.up.done && l.down.done
			p.mu.Unlock()
			if cw, ok := pp.dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			if last {
				l.close()
			}
			return
		}
		changed := p.changed
		p.mu.Unlock()
		var due <-chan time.Time
		var t *time.Timer
		if wait > 0 {
			t = time.NewTimer(wait)
			due = t.C
		}
		select {
		case <-changed:
		case <-due:
		case <-l.ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
	}
}
