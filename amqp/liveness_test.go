package amqp

import (
	"context"
	"errors"
	"net/url"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/faultproxy"
)

// TestPublisherCutStorm cuts the publisher's link twice, half a second
// apart, while hundreds of writers publish with request-sized deadlines, as
// cmd/flashsale's TestFaultBrokerCutTwice does, and wants a publish to
// succeed again within seconds of each round.
func TestPublisherCutStorm(t *testing.T) {
	proxy, pcfg := proxied(t, MustConfig(t))
	p := MustPublisher(t, pcfg)
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := p.Write(ctx, reservation("sale-1", int(n.Add(1))))
				cancel()
				if err != nil && !errors.Is(err, flashsale.ErrUnavailable) {
					t.Errorf("Write = %v", err)
				}
				if err != nil {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for round := range 15 {
		time.Sleep(300 * time.Millisecond)
		proxy.Cut()
		time.Sleep(500 * time.Millisecond)
		proxy.Cut()
		deadline := time.Now().Add(15 * time.Second)
		for i := 0; ; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := p.Write(ctx, reservation("sale-2", round*100000+i))
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
				t.Fatalf("round %d: no publish in 15 s after the cut: %v", round, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestPauseWhileRecycling pauses a consumer while it is subscribing again
// after an idle spell (recycle: four round trips, each slowed by the proxy).
// Before, a Pause that came then was never answered: the session went back
// to its paused loop with consuming still set (CI, TestStaleAOF: a rebuild
// waited minutes for one instance's consumer, and every purchase was 503).
func TestPauseWhileRecycling(t *testing.T) {
	proxy, ccfg := proxied(t, MustConfig(t))
	c := NewTestConsumer(t, ccfg, newMemStore())
	c.idle = 20 * time.Millisecond
	go c.Run(context.Background())
	proxy.Latency(40 * time.Millisecond) // a recycle takes ~160 ms of each ~180 ms
	for i := range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Pause(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Pause %d while the idle consumer recycles its channel: %v", i, err)
		}
		c.Resume()
		time.Sleep(time.Duration(20+i*13) * time.Millisecond)
	}
}

// TestDrainReturnsClosed: the library closes a session's returns channel
// when the channel shuts down, and draining it must then end. Before, the
// matcher spun there for ever (reading a closed channel never blocks), so
// a publisher whose link was cut never reconnected.
func TestDrainReturnsClosed(t *testing.T) {
	s := &session{pending: map[uint64]*waiter{}}
	returns := make(chan amqp091.Return, 2)
	returns <- amqp091.Return{CorrelationId: "1"}
	close(returns)
	done := make(chan struct{})
	go func() { s.drainReturns(returns); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("drainReturns on a closed channel did not return")
	}
}

// TestPublishCanceledWaiting: a Write whose context ends while it waits for
// its turn to publish was never sent. It is a certain failure (the caller
// gives the units back), and the session it would have used stays up.
// Before, it counted as an unknown outcome and ended the session, so under
// load every request that ran out of time cut the publisher's connection.
func TestPublishCanceledWaiting(t *testing.T) {
	p := MustPublisher(t, MustConfig(t))
	if _, err := p.Write(context.Background(), reservation("sale-1", 0)); err != nil {
		t.Fatal(err)
	}
	p.pubMu.Lock()
	sess := p.sess
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := p.Write(ctx, reservation("sale-1", 1))
		done <- err
	}()
	<-ctx.Done()
	time.Sleep(20 * time.Millisecond) // Write is past its own check, waiting for pubMu
	p.pubMu.Unlock()
	err := <-done
	if !errors.Is(err, flashsale.ErrUnavailable) || errors.Is(err, flashsale.ErrIndeterminate) {
		t.Fatalf("Write canceled before its publish = %v, want a certain ErrUnavailable", err)
	}
	if _, err := p.Write(context.Background(), reservation("sale-1", 2)); err != nil {
		t.Fatal(err)
	}
	p.pubMu.Lock()
	same := p.sess == sess
	p.pubMu.Unlock()
	if !same {
		t.Error("the session was ended by a publish that was never sent")
	}
	if got := p.Stats(); got.Failed != 1 || got.Indeterminate != 0 {
		t.Errorf("stats = %+v, want 1 certain failure and no unknown outcome", got)
	}
}

// proxied returns cfg with its broker behind a fault proxy of its own.
func proxied(tb testing.TB, cfg Config) (*faultproxy.Proxy, Config) {
	tb.Helper()
	u, err := url.Parse(cfg.URL)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := faultproxy.Start(tb, u.Host)
	cfg.URL = proxy.URL(cfg.URL)
	return proxy, cfg
}
