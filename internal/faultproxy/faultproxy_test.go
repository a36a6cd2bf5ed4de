package faultproxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ioWait bounds every wait for bytes that should arrive; it is generous
// because the machine is shared. quiet is how long a test watches for bytes
// that must not arrive: a short wait cannot make such a test fail falsely.
const (
	ioWait = 10 * time.Second
	quiet  = 100 * time.Millisecond
)

func TestForward(t *testing.T) {
	echo := startEcho(t)
	p := Start(t, echo.addr)
	c := dial(t, p.Addr())
	for i := range 5 {
		roundTrip(t, c, fmt.Sprintf("hello %d\n", i))
	}

	t.Run("HalfClose", func(t *testing.T) {
		// A client that writes and then shuts its side still gets the reply,
		// and the connection goes away once both sides have finished.
		c := dial(t, p.Addr())
		if _, err := c.Write([]byte("last words")); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(ioWait))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("ReadAll = %v", err)
		}
		if got, want := string(got), "last words"; got != want {
			t.Fatalf("reply = %q, want %q", got, want)
		}
		checkFor(t, ioWait, "Conns() == 1", func() bool { return p.Conns() == 1 })
	})
}

func TestUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	p := Start(t, addr)
	expectClosed(t, dial(t, p.Addr()))
	checkFor(t, ioWait, "Conns() == 0", func() bool { return p.Conns() == 0 })
}

func TestCut(t *testing.T) {
	echo := startEcho(t)
	p := Start(t, echo.addr)
	c1 := dial(t, p.Addr())
	c2 := dial(t, p.Addr())
	roundTrip(t, c1, "one")
	roundTrip(t, c2, "two")

	p.Cut()
	if got, want := p.Conns(), 0; got != want {
		t.Fatalf("Conns() after Cut = %d, want %d", got, want)
	}
	expectClosed(t, c1)
	expectClosed(t, c2)
	checkFor(t, ioWait, "upstream sees both closed", func() bool { return echo.open() == 0 })

	roundTrip(t, dial(t, p.Addr()), "after cut")
}

func TestRefuse(t *testing.T) {
	echo := startEcho(t)
	p := Start(t, echo.addr)
	old := dial(t, p.Addr())
	roundTrip(t, old, "before")

	p.Refuse(true)
	expectClosed(t, dial(t, p.Addr()))
	roundTrip(t, old, "open connections are left alone")
	if got, want := p.Conns(), 1; got != want {
		t.Fatalf("Conns() while refusing = %d, want %d", got, want)
	}

	p.Refuse(false)
	roundTrip(t, dial(t, p.Addr()), "after")
}

func TestHoldReplies(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		echo := startEcho(t)
		p := Start(t, echo.addr)
		c := dial(t, p.Addr())
		roundTrip(t, c, "warm")
		before := echo.received.Load()

		// A few MB of order-sensitive bytes in many writes: every one reaches
		// the upstream, none comes back until the hold is lifted.
		p.HoldReplies(true)
		var sent bytes.Buffer
		for i := range 1 << 20 {
			sent.Write(binary.BigEndian.AppendUint32(nil, uint32(i)))
		}
		for b := sent.Bytes(); len(b) > 0; {
			n := min(len(b), 4096+len(b)%1000)
			if _, err := c.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		want := before + int64(sent.Len())
		checkFor(t, ioWait, "upstream received every request", func() bool { return echo.received.Load() == want })
		expectSilent(t, c)

		p.HoldReplies(false)
		got := make([]byte, sent.Len())
		c.SetReadDeadline(time.Now().Add(ioWait))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("reading released replies: %v", err)
		}
		if !bytes.Equal(got, sent.Bytes()) {
			t.Fatal("released replies differ from what was sent (order or content)")
		}
	})

	t.Run("CutLosesThem", func(t *testing.T) {
		// The lost-confirm recipe: the request arrives, the reply never does.
		echo := startEcho(t)
		p := Start(t, echo.addr)
		c := dial(t, p.Addr())
		roundTrip(t, c, "warm")
		before := echo.received.Load()

		p.HoldReplies(true)
		if _, err := c.Write([]byte("publish")); err != nil {
			t.Fatal(err)
		}
		checkFor(t, ioWait, "upstream received the request", func() bool { return echo.received.Load() == before+7 })
		p.Cut()
		expectClosed(t, c)

		p.HoldReplies(false)
		roundTrip(t, dial(t, p.Addr()), "after")
	})
}

func TestPause(t *testing.T) {
	echo := startEcho(t)
	p := Start(t, echo.addr)
	c := dial(t, p.Addr())
	roundTrip(t, c, "warm")
	before := echo.received.Load()

	p.Pause(true)
	if _, err := c.Write([]byte("frozen")); err != nil {
		t.Fatalf("Write while paused = %v, want nil (a stopped peer still buffers)", err)
	}
	expectSilent(t, c)
	if got := echo.received.Load(); got != before {
		t.Fatalf("upstream received %d bytes while paused, want %d", got, before)
	}

	p.Pause(false)
	expectRead(t, c, "frozen")

	t.Run("CloseWhileHeld", func(t *testing.T) {
		// The test ends with bytes held both ways and the proxy still
		// paused: its cleanup must still close everything, or it hangs here
		// (or goleak fails the package).
		p := Start(t, echo.addr)
		c := dial(t, p.Addr())
		roundTrip(t, c, "warm")
		p.Pause(true)
		if _, err := c.Write([]byte("never delivered")); err != nil {
			t.Fatal(err)
		}
		expectSilent(t, c)
	})
}

func TestBlackhole(t *testing.T) {
	echo := startEcho(t)
	p := Start(t, echo.addr)
	old := dial(t, p.Addr())
	roundTrip(t, old, "warm")

	p.Blackhole(true)
	fresh := dial(t, p.Addr())
	checkFor(t, ioWait, "Conns() == 2", func() bool { return p.Conns() == 2 })
	for _, c := range []net.Conn{old, fresh} {
		if _, err := c.Write([]byte("anyone?")); err != nil {
			t.Fatal(err)
		}
	}
	expectSilent(t, old)
	expectSilent(t, fresh)

	// Blackhole and Pause are separate switches over one hold: lifting
	// one leaves the other in force.
	p.Pause(true)
	p.Blackhole(false)
	expectSilent(t, old)
	p.Pause(false)

	expectRead(t, old, "anyone?")
	expectRead(t, fresh, "anyone?")
}

// TestDiscarded holds bytes both ways and cuts the link: Held counts them
// while they wait, Discarded counts them once the Cut threw them away, and
// the upstream never got the held request.
func TestDiscarded(t *testing.T) {
	echo, p, c := startWarm(t)
	before := echo.received.Load()

	p.HoldReplies(true)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	checkFor(t, ioWait, "the echo of ping held", func() bool { up, down := p.Held(); return up == 0 && down == 4 })
	p.Blackhole(true)
	if _, err := c.Write([]byte("an ack")); err != nil {
		t.Fatal(err)
	}
	checkFor(t, ioWait, "an ack held", func() bool { up, down := p.Held(); return up == 6 && down == 4 })
	if up, down := p.Discarded(); up != 0 || down != 0 {
		t.Fatalf("Discarded() before the cut = %d, %d, want 0, 0", up, down)
	}

	p.Cut()
	if up, down := p.Discarded(); up != 6 || down != 4 {
		t.Fatalf("Discarded() after the cut = %d, %d, want 6, 4", up, down)
	}
	if up, down := p.Held(); up != 0 || down != 0 {
		t.Fatalf("Held() after the cut = %d, %d, want 0, 0", up, down)
	}
	expectClosed(t, c)
	p.Blackhole(false)
	p.HoldReplies(false)
	roundTrip(t, dial(t, p.Addr()), "after the cut")
	if got, want := echo.received.Load(), before+int64(len("ping")+len("after the cut")); got != want {
		t.Fatalf("upstream received %d bytes, want %d: the held ack must never arrive", got, want)
	}
}

// TestHoldRequest catches one request on one connection: what came before
// it arrives, it and what follows wait, other connections and the replies
// flow, and lifting the hold delivers the rest in order.
func TestHoldRequest(t *testing.T) {
	echo := startEcho(t)
	p := Start(t, echo.addr)
	held, other := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, held, "warm")
	roundTrip(t, other, "warm")

	caught := p.HoldRequest(func(chunk []byte) bool { return bytes.Contains(chunk, []byte("COMMIT")) })
	roundTrip(t, held, "INSERT")
	if _, err := held.Write([]byte("COMMIT")); err != nil {
		t.Fatal(err)
	}
	select {
	case conn := <-caught:
		if conn != 1 {
			t.Fatalf("caught on connection %d, want 1 (held, accepted first)", conn)
		}
	case <-time.After(ioWait):
		t.Fatal("COMMIT not caught")
	}
	if _, err := held.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	expectSilent(t, held)
	roundTrip(t, other, "COMMIT") // caught once, on one connection
	if up, _ := p.Held(); up != len("COMMITafter") {
		t.Fatalf("Held() = %d bytes to the upstream, want %d", up, len("COMMITafter"))
	}

	if p.HoldRequest(nil) != nil {
		t.Fatal("HoldRequest(nil) returned a channel")
	}
	expectRead(t, held, "COMMITafter")
	roundTrip(t, held, "flowing again")

	t.Run("Cut", func(t *testing.T) {
		before := echo.received.Load()
		caught := p.HoldRequest(func(chunk []byte) bool { return string(chunk) == "COMMIT" })
		defer p.HoldRequest(nil)
		if _, err := held.Write([]byte("COMMIT")); err != nil {
			t.Fatal(err)
		}
		<-caught
		discarded, _ := p.Discarded()
		p.Cut()
		if up, _ := p.Discarded(); up-discarded != int64(len("COMMIT")) {
			t.Fatalf("Cut discarded %d bytes to the upstream, want %d", up-discarded, len("COMMIT"))
		}
		if got := echo.received.Load(); got != before {
			t.Fatalf("upstream received %d bytes of a held request", got-before)
		}
	})
}

// TestWatch shows the requests, not the replies, and changes nothing.
func TestWatch(t *testing.T) {
	_, p, c := startWarm(t)
	var mu sync.Mutex
	var seen []string
	p.Watch(func(conn int, chunk []byte) {
		mu.Lock()
		seen = append(seen, fmt.Sprint(conn, ":", string(chunk)))
		mu.Unlock()
	})
	roundTrip(t, c, "order-1")
	p.Watch(nil)
	roundTrip(t, c, "order-2")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "1:order-1" {
		t.Fatalf("watched %q, want [1:order-1]: each request once with its connection, none after Watch(nil), no reply", seen)
	}
}

func TestLatency(t *testing.T) {
	echo := startEcho(t)
	p := Start(t, echo.addr)
	c := dial(t, p.Addr())
	roundTrip(t, c, "warm")

	const d = 50 * time.Millisecond
	p.Latency(d)
	for range 3 {
		start := time.Now()
		roundTrip(t, c, "slow")
		// One d each way. Only a lower bound: the machine is shared.
		if got, want := time.Since(start), 2*d; got < want {
			t.Fatalf("round trip took %v, want at least %v", got, want)
		}
	}

	p.Latency(0)
	roundTrip(t, c, "fast again")
}

func TestConns(t *testing.T) {
	echo := startEcho(t)
	p := Start(t, echo.addr)
	if got, want := p.Conns(), 0; got != want {
		t.Fatalf("Conns() = %d, want %d", got, want)
	}
	var cs []net.Conn
	for i := range 3 {
		c := dial(t, p.Addr())
		roundTrip(t, c, fmt.Sprint(i))
		cs = append(cs, c)
	}
	if got, want := p.Conns(), 3; got != want {
		t.Fatalf("Conns() = %d, want %d", got, want)
	}

	cs[0].Close()
	checkFor(t, ioWait, "Conns() == 2 after a client closes", func() bool { return p.Conns() == 2 })
	// The upstream hanging up reaches the clients, which close in turn.
	echo.closeAll()
	for _, c := range cs[1:] {
		expectClosed(t, c)
		c.Close()
	}
	checkFor(t, ioWait, "Conns() == 0", func() bool { return p.Conns() == 0 })
}

func TestURL(t *testing.T) {
	p := Start(t, "127.0.0.1:1")
	addr := p.Addr()
	tests := []struct {
		name, raw, want string
	}{
		{"Redis", "redis://127.0.0.1:6379/0", "redis://" + addr + "/0"},
		{"RedisPassword", "redis://:s3cr%40t@localhost:6379/2", "redis://:s3cr%40t@" + addr + "/2"},
		{"AMQP", "amqp://guest:guest@127.0.0.1:5672/vhost", "amqp://guest:guest@" + addr + "/vhost"},
		{"AMQPDefaultVhost", "amqp://guest:guest@127.0.0.1:5672/%2F", "amqp://guest:guest@" + addr + "/%2F"},
		{"MySQL", "mysql://root@127.0.0.1:3306/test?parseTime=true", "mysql://root@" + addr + "/test?parseTime=true"},
		{"Postgres", "postgres://postgres:pw@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres:pw@" + addr + "/test?sslmode=disable"},
		{"NoPort", "redis://localhost/0", "redis://" + addr + "/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.URL(tt.raw); got != tt.want {
				t.Fatalf("URL(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

// TestRedis checks the proxy against the real Redis with a raw RESP PING,
// and the lost-reply recipe: the command reaches Redis, the reply never
// reaches the client.
func TestRedis(t *testing.T) {
	raw := testenv.URL(t, testenv.Redis)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.Redis, err)
	}
	p := Start(t, u.Host)
	if got, err := url.Parse(p.URL(raw)); err != nil || got.Host != p.Addr() {
		t.Fatalf("URL(%q) = %v, %v; want host %s", raw, got, err, p.Addr())
	}

	c := dial(t, p.Addr())
	ping(t, c, u)

	p.HoldReplies(true)
	send(t, c, "PING")
	expectSilent(t, c)
	p.Cut()
	expectClosed(t, c)
	p.HoldReplies(false)

	ping(t, dial(t, p.Addr()), u)
}

// ping authenticates on c when u carries a password, then expects PONG.
func ping(tb testing.TB, c net.Conn, u *url.URL) {
	tb.Helper()
	r := bufio.NewReader(c)
	if pw, ok := u.User.Password(); ok {
		auth := []string{"AUTH", pw}
		if name := u.User.Username(); name != "" {
			auth = []string{"AUTH", name, pw}
		}
		resp(tb, c, r, "+OK", auth...)
	}
	resp(tb, c, r, "+PONG", "PING")
}

// send writes one RESP command.
func send(tb testing.TB, c net.Conn, args ...string) {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		tb.Fatalf("send %s: %v", args[0], err)
	}
}

// resp sends one RESP command and checks its one-line reply.
func resp(tb testing.TB, c net.Conn, r *bufio.Reader, want string, args ...string) {
	tb.Helper()
	send(tb, c, args...)
	c.SetReadDeadline(time.Now().Add(ioWait))
	line, err := r.ReadString('\n')
	if err != nil {
		tb.Fatalf("%s: reading reply: %v", args[0], err)
	}
	if got := strings.TrimRight(line, "\r\n"); got != want {
		tb.Fatalf("%s = %q, want %q", args[0], got, want)
	}
}

// echoServer writes back whatever it reads and counts the bytes, so a test
// can tell what reached the upstream even when the replies are held.
type echoServer struct {
	addr     string
	received atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startEcho starts an echoServer on 127.0.0.1:0, closed by tb.Cleanup.
// startWarm starts an echo upstream and a proxy to it, and returns them
// with a client connection that has made one round trip.
func startWarm(t *testing.T) (*echoServer, *Proxy, net.Conn) {
	t.Helper()
	echo := startEcho(t)
	p := Start(t, echo.addr)
	c := dial(t, p.Addr())
	roundTrip(t, c, "warm")
	return echo, p, c
}

func startEcho(tb testing.TB) *echoServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	e := &echoServer{addr: ln.Addr().String(), conns: make(map[net.Conn]struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns[c] = struct{}{}
			e.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.serve(c)
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		e.closeAll()
		wg.Wait()
	})
	return e
}

// serve echoes c until it ends, then closes it.
func (e *echoServer) serve(c net.Conn) {
	defer func() {
		e.mu.Lock()
		delete(e.conns, c)
		e.mu.Unlock()
		c.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			e.received.Add(int64(n))
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// open returns how many connections the echo server has open.
func (e *echoServer) open() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.conns)
}

// closeAll closes every connection the echo server has open.
func (e *echoServer) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c := range e.conns {
		c.Close()
	}
}

// dial connects to addr; the connection is closed by tb.Cleanup.
func dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, ioWait)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and expects it echoed back.
func roundTrip(tb testing.TB, c net.Conn, msg string) {
	tb.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		tb.Fatalf("write %q: %v", msg, err)
	}
	expectRead(tb, c, msg)
}

// expectRead reads len(want) bytes and expects them to be want.
func expectRead(tb testing.TB, c net.Conn, want string) {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(ioWait))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		tb.Fatalf("read %q: %v", want, err)
	}
	if string(got) != want {
		tb.Fatalf("read %q, want %q", got, want)
	}
}

// expectSilent expects a read to time out with nothing received.
func expectSilent(tb testing.TB, c net.Conn) {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(quiet))
	var b [1]byte
	n, err := c.Read(b[:])
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		tb.Fatalf("Read = %d, %v; want 0 and a timeout (nothing forwarded)", n, err)
	}
}

// expectClosed expects the connection to end, with no bytes before the end,
// well before ioWait.
func expectClosed(tb testing.TB, c net.Conn) {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(ioWait))
	var b [1]byte
	n, err := c.Read(b[:])
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		tb.Fatalf("Read = %d, %v; want 0 and the connection closed", n, err)
	}
}

// checkFor polls cond until it holds or the deadline passes.
func checkFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(time.Millisecond)
	}
}
