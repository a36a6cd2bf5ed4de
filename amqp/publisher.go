package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flashsale/flashsale"
)

var _ flashsale.OrderWriter = (*Publisher)(nil)

// Reasons a publish failed. Write wraps each with flashsale.ErrUnavailable,
// so callers branch on that and logs say which.
var (
	errFull         = errors.New("too many publishes awaiting confirm")
	errDisconnected = errors.New("not connected to the broker")
	errBlocked      = errors.New("broker is blocking publishers")
	errNacked       = errors.New("broker refused the message (nack)")
	errReturned     = errors.New("message was unroutable (returned)")
	errTimeout      = errors.New("no confirm in time")
	errLost         = errors.New("connection lost before the confirm")
	errClosed       = errors.New("publisher closed")
	errCanceled     = errors.New("the caller gave up before the publish was sent")
	// errWriteFailed: the connection's write failed, and some or all of
	// the message may have left. The library's buffered writer keeps the
	// first error, so a flush by another frame (a heartbeat) can send this
	// message's frames and fail after them: the broker may hold it.
	errWriteFailed = errors.New("the write to the broker failed")
)

// Publisher publishes reservations as persistent messages and waits for the
// broker's confirm before Write returns, which is what lets the purchase be
// answered: a confirmed message is on disk on a quorum of nodes.
//
// Confirms are pipelined: all Writes share one long-lived channel in confirm
// mode, any number up to MaxInFlight are outstanding at once, and a single
// goroutine per connection matches confirms (and returns) to the waiting
// callers by delivery tag. A Write costs one frame write and one channel
// receive; no goroutine, channel or connection is made per message.
//
// Lock order: pubMu before session.mu.
type Publisher struct {
	cfg Config
	log *slog.Logger
	tr  *tracer // nil: tracing off
	// slots holds one token per publish awaiting its confirm; the token is
	// taken before the publish and given back when the outcome is known, so
	// a caller that gave up early still counts until the broker answers.
	slots chan struct{}

	// pubMu is held across a publish so that the delivery tag read before it
	// is the one the channel assigns, and guards sess.
	pubMu sync.Mutex
	sess  *session // nil while disconnected

	blocked atomic.Bool // the broker sent connection.blocked (resource alarm)
	// redeclaring is set while redeclare runs; bg waits for it on Close.
	redeclaring atomic.Bool
	bg          sync.WaitGroup
	closing     chan struct{}
	once        sync.Once
	done        chan struct{} // closed when the supervisor goroutine returned

	waiters sync.Pool
	bodies  sync.Pool
	stats   counters
}

// session is one connection and its confirm-mode channel. Its pending map is
// keyed by the channel's delivery tags, which restart at 1 on every channel.
type session struct {
	conn *amqp091.Connection
	ch   *amqp091.Channel

	mu      sync.Mutex
	pending map[uint64]*waiter

	// dead is closed (once) when a publish fails: the matcher ends the
	// session then even if the library never told it.
	dead     chan struct{}
	deadOnce sync.Once
}

// kill ends the session from a publisher's side.
func (s *session) kill() { s.deadOnce.Do(func() { close(s.dead) }) }

// waiter is one Write awaiting its confirm.
type waiter struct {
	done     chan error // buffered: the matcher never blocks on a caller
	deadline time.Time
	returned bool // the broker returned the message; its ack is then a failure
}

// NewPublisher connects, declares the topology and starts the goroutine that
// matches confirms and reconnects. It fails if the broker cannot be reached
// now, so a misconfigured URL shows up at start rather than at the first sale.
func NewPublisher(ctx context.Context, cfg Config, logger *slog.Logger) (*Publisher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Publisher{
		cfg:     cfg,
		log:     logger.With("component", "amqp.publisher", "exchange", cfg.exchange()),
		tr:      newTracer(cfg),
		slots:   make(chan struct{}, cfg.MaxInFlight),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	p.waiters.New = func() any { return &waiter{done: make(chan error, 1)} }
	p.bodies.New = func() any { b := make([]byte, 0, 128); return &b }
	s, events, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	p.sess = s
	go p.supervise(s, events)
	p.log.Info("publisher connected", "max_in_flight", cfg.MaxInFlight, "confirm_timeout", cfg.ConfirmTimeout)
	return p, nil
}

// events are a session's notification channels, read only by the matcher.
type events struct {
	confirms <-chan amqp091.Confirmation
	returns  <-chan amqp091.Return
	closed   <-chan *amqp091.Error
	blocked  <-chan amqp091.Blocking
}

// connect opens a session. It declares the topology every time, so a broker
// that lost its definitions heals on reconnect instead of returning every
// message.
func (p *Publisher) connect(ctx context.Context) (*session, events, error) {
	conn, err := dial(ctx, p.cfg, "publisher")
	if err != nil {
		return nil, events{}, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = declare(ch, p.cfg)
	}
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, events{}, fmt.Errorf("publisher: %w", err)
	}
	// The library delivers notifications from its reader goroutine with
	// blocking sends; buffers as large as the in-flight bound mean it never
	// waits on the matcher, even while the matcher is busy or closing.
	n := p.cfg.MaxInFlight + 1
	ev := events{
		confirms: ch.NotifyPublish(make(chan amqp091.Confirmation, n)),
		returns:  ch.NotifyReturn(make(chan amqp091.Return, n)),
		closed:   conn.NotifyClose(make(chan *amqp091.Error, 1)),
		blocked:  conn.NotifyBlocked(make(chan amqp091.Blocking, 4)),
	}
	// A channel-level error (say a publish to a deleted exchange) closes
	// only the channel; close the connection too so one path handles both.
	chClosed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	go func() {
		if e, ok := <-chClosed; ok && e != nil {
			p.log.Warn("channel closed by broker", "err", e)
			conn.Close()
		}
	}()
	p.blocked.Store(false)
	return &session{conn: conn, ch: ch, pending: make(map[uint64]*waiter, p.cfg.MaxInFlight), dead: make(chan struct{})}, ev, nil
}

// supervise matches confirms for the current session and, when its
// connection is lost, fails its waiters and reconnects with backoff.
func (p *Publisher) supervise(s *session, ev events) {
	defer close(p.done)
	backoff := time.Duration(0)
	for {
		reason := p.match(s, ev)
		p.pubMu.Lock()
		p.sess = nil
		p.pubMu.Unlock()
		if reason == errClosed {
			p.drain(s, ev)
		}
		s.conn.Close()
		s.failAll(p, reason)
		if reason == errClosed {
			return
		}
		p.log.Warn("connection lost, reconnecting", "err", reason)
		for {
			backoff = nextBackoff(backoff)
			if !sleep(context.Background(), p.closing, backoff) {
				return
			}
			var err error
			s, ev, err = p.connect(context.Background())
			if err == nil {
				break
			}
			p.log.Warn("reconnect failed", "err", err, "retry_in", nextBackoff(backoff))
		}
		p.log.Info("reconnected")
		backoff = 0
		p.pubMu.Lock()
		p.sess = s
		p.pubMu.Unlock()
	}
}

// match is the single goroutine that settles a session's waiters. It
// returns why the session ended: errClosed, or the connection's error.
func (p *Publisher) match(s *session, ev events) error {
	tick := time.NewTicker(max(p.cfg.ConfirmTimeout/8, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case r, ok := <-ev.returns:
			if !ok {
				return errLost
			}
			s.markReturned(r)
			p.redeclare(r)
		case c, ok := <-ev.confirms:
			if !ok {
				return errLost
			}
			// The broker sends basic.return before the basic.ack of the
			// same message and the library hands them over in that order,
			// so any return for this tag is already buffered.
			s.drainReturns(ev.returns)
			s.settle(p, c)
		case e := <-ev.closed:
			if e != nil {
				return fmt.Errorf("%w: %w", errLost, e)
			}
			return errLost
		case b := <-ev.blocked:
			p.blocked.Store(b.Active)
			p.log.Warn("broker flow control", "blocked", b.Active, "reason", b.Reason)
		case now := <-tick.C:
			// A session whose channel closed ends even if the library's
			// signal is missed. (The one such case seen, a matcher that
			// never reconnected after a cut, was the matcher spinning on
			// a closed returns channel: see drainReturns.)
			if s.ch.IsClosed() || s.conn.IsClosed() {
				return fmt.Errorf("%w: the channel is closed", errLost)
			}
			s.expire(p, now)
		case <-s.dead:
			return fmt.Errorf("%w: a publish failed", errLost)
		case <-p.closing:
			return errClosed
		}
	}
}

// drain lets outstanding confirms arrive, up to ConfirmTimeout, so Close
// does not fail publishes the broker is about to confirm.
func (p *Publisher) drain(s *session, ev events) {
	deadline := time.NewTimer(p.cfg.ConfirmTimeout)
	defer deadline.Stop()
	for s.inFlight() > 0 {
		select {
		case r, ok := <-ev.returns:
			if !ok {
				return
			}
			s.markReturned(r)
		case c, ok := <-ev.confirms:
			if !ok {
				return
			}
			s.drainReturns(ev.returns)
			s.settle(p, c)
		case <-ev.closed:
			return
		case <-deadline.C:
			return
		}
	}
}

// Write publishes r and waits for the broker to confirm it, returning
// OrderPending: the order is durable in the queue and the consumer will
// write it. Every error wraps flashsale.ErrUnavailable, and says which of
// two kinds it is:
//
//   - certain: the message never reached a queue (MaxInFlight publishes
//     await confirms, the connection is down or blocked, ctx ended before
//     it was sent, the broker nacked or returned it). The caller returns
//     the units.
//   - flashsale.ErrIndeterminate: the message was sent and its confirm
//     never came (ConfirmTimeout, ctx ended, the connection was lost), or
//     the write itself failed after some of it may have left. The
//     broker may have kept it, so the caller must not return the units:
//     the reservation stays in the outbox and the relay publishes it again
//     (a second copy is a duplicate to the consumer). Returning the units
//     here sold phantom rooms: the order landed anyway and its units were
//     sold twice, so every later buyer's order failed.
//
// Write does not queue: it fails at once rather than wait for a slot or a
// connection. It waits for the confirm at most ConfirmTimeout or until ctx ends.
// Traced, the publish and its confirm are one producer span.
func (p *Publisher) Write(ctx context.Context, r *flashsale.Reservation) (flashsale.OrderStatus, error) {
	if p.tr == nil {
		return p.write(ctx, r)
	}
	ctx, span := p.tr.startPublish(ctx, p.cfg.exchange(), r)
	status, err := p.write(ctx, r)
	endPublish(span, err)
	return status, err
}

func (p *Publisher) write(ctx context.Context, r *flashsale.Reservation) (flashsale.OrderStatus, error) {
	if err := ctx.Err(); err != nil {
		return "", p.fail(r, err)
	}
	bp := p.bodies.Get().(*[]byte)
	body, err := appendReservation((*bp)[:0], r)
	if err != nil {
		p.bodies.Put(bp)
		return "", p.fail(r, err)
	}
	if p.blocked.Load() {
		p.bodies.Put(bp)
		return "", p.fail(r, errBlocked)
	}
	select {
	case p.slots <- struct{}{}:
	default:
		p.bodies.Put(bp)
		return "", p.fail(r, errFull)
	}
	w := p.waiters.Get().(*waiter)
	w.returned = false
	w.deadline = time.Now().Add(p.cfg.ConfirmTimeout)

	err = p.publish(ctx, r, body, w)
	*bp = body
	p.bodies.Put(bp) // the library wrote the frames before Publish returned
	if err != nil {
		<-p.slots
		p.waiters.Put(w)
		if errors.Is(err, errWriteFailed) {
			return "", p.unsure(r, err)
		}
		return "", p.fail(r, err)
	}
	p.stats.published.Add(1)

	select {
	case err = <-w.done:
		// Only a waiter whose result was received can be reused: one the
		// caller abandoned may still be written to by the matcher.
		p.waiters.Put(w)
	case <-ctx.Done():
		err = ctx.Err()
	}
	switch {
	case err == nil:
	case errors.Is(err, errReturned):
		p.stats.returned.Add(1)
		return "", p.fail(r, err)
	case errors.Is(err, errNacked):
		return "", p.fail(r, err)
	default:
		return "", p.unsure(r, err)
	}
	p.stats.confirmed.Add(1)
	return flashsale.OrderPending, nil
}

// publish sends one message on the current session, registering w under the
// delivery tag the channel will give it.
func (p *Publisher) publish(ctx context.Context, r *flashsale.Reservation, body []byte, w *waiter) error {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	s := p.sess
	if s == nil {
		select {
		case <-p.closing:
			return errClosed
		default:
			return errDisconnected
		}
	}
	tag := s.ch.GetNextPublishSeqNo()
	s.mu.Lock()
	s.pending[tag] = w
	s.mu.Unlock()
	err := s.ch.PublishWithContext(ctx, p.cfg.exchange(), routingKey, true, false, amqp091.Publishing{
		DeliveryMode: amqp091.Persistent,
		MessageId:    r.OrderID,
		// CorrelationId carries the delivery tag so a basic.return, which
		// has no tag of its own, finds its waiter.
		CorrelationId: strconv.FormatUint(tag, 10),
		Headers:       p.tr.headers(ctx),
		Body:          body,
	})
	if err != nil {
		s.mu.Lock()
		_, mine := s.pending[tag]
		delete(s.pending, tag)
		s.mu.Unlock()
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) && mine {
			// The library looked at ctx before sending anything: a
			// certain failure, on a session that is still fine.
			return fmt.Errorf("%w: %w", errCanceled, err)
		}
		// Reconnect now, whatever the library said. After a failed flush
		// it does not end the connection itself: the next publish would
		// fail on the same stored error first, an unknown outcome too.
		s.kill()
		if !mine {
			// The matcher already settled w (it expired while the write
			// was stuck): its result is in w.done and the slot is freed.
			return nil
		}
		return publishError(err)
	}
	return nil
}

// publishError says what a failed publish left behind. The library's
// ErrClosed means it refused to send (the connection or channel was already
// closed before this message's last frame): the broker cannot have a
// complete message. Any other error came from the write itself, after which
// the message may have left whole: errWriteFailed, an unknown outcome.
func publishError(err error) error {
	if errors.Is(err, amqp091.ErrClosed) {
		return fmt.Errorf("%w: %w", errDisconnected, err)
	}
	return fmt.Errorf("%w: %w", errWriteFailed, err)
}

// fail counts and wraps a Write that certainly did not enqueue r.
func (p *Publisher) fail(r *flashsale.Reservation, err error) error {
	p.stats.failed.Add(1)
	return fmt.Errorf("publish order=%s: %w: %w", r.OrderID, flashsale.ErrUnavailable, err)
}

// unsure counts and wraps a Write that sent r and never learnt whether the
// broker kept it.
func (p *Publisher) unsure(r *flashsale.Reservation, err error) error {
	p.stats.indeterminate.Add(1)
	return fmt.Errorf("publish order=%s: %w (%w): %w", r.OrderID, flashsale.ErrIndeterminate, flashsale.ErrUnavailable, err)
}

// Stats returns the publish counters.
func (p *Publisher) Stats() Stats { return p.stats.snapshot() }

// Close stops accepting publishes, waits up to ConfirmTimeout for the
// outstanding confirms, fails the rest with ErrUnavailable and closes the
// connection.
func (p *Publisher) Close() error {
	p.once.Do(func() { close(p.closing) })
	<-p.done
	p.bg.Wait()
	return nil
}

// redeclare declares the topology again, on a connection of its own, when a
// message came back unroutable: the order queue or its binding is gone
// (deleted, or lost with the broker's definitions), and until something
// declares it every purchase fails; the consumers would only on their next
// reconnection. One runs at a time; returns meanwhile are ignored.
func (p *Publisher) redeclare(r amqp091.Return) {
	if r.ReplyCode != amqp091.NoRoute || !p.redeclaring.CompareAndSwap(false, true) {
		return
	}
	p.bg.Go(func() {
		defer p.redeclaring.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConfirmTimeout)
		defer cancel()
		err := func() error {
			conn, err := dial(ctx, p.cfg, "declare")
			if err != nil {
				return err
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				return err
			}
			return declare(ch, p.cfg)
		}()
		if err != nil {
			p.log.Warn("a message was unroutable; declaring the order queue again failed", "err", err)
			return
		}
		p.log.Warn("a message was unroutable: the order queue or its binding was gone, and is declared again")
	})
}

func (s *session) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func (s *session) markReturned(r amqp091.Return) {
	tag, err := strconv.ParseUint(r.CorrelationId, 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	if w := s.pending[tag]; w != nil {
		w.returned = true
	}
	s.mu.Unlock()
}

// drainReturns takes the returns already buffered. A closed channel ends
// it: reading one yields at once, for ever, and the matcher once spun here
// for minutes after a cut link while every publish failed (CI,
// TestFaultBrokerCutTwice; TestPublisherCutStorm).
func (s *session) drainReturns(returns <-chan amqp091.Return) {
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				return
			}
			s.markReturned(r)
		default:
			return
		}
	}
}

// settle resolves the waiter of one confirm. The library expands a
// multiple=true ack or nack into one Confirmation per tag, in tag order.
func (s *session) settle(p *Publisher, c amqp091.Confirmation) {
	s.mu.Lock()
	w := s.pending[c.DeliveryTag]
	delete(s.pending, c.DeliveryTag)
	s.mu.Unlock()
	if w == nil {
		return // expired earlier
	}
	var err error
	switch {
	case !c.Ack:
		err = errNacked
	case w.returned:
		err = errReturned
	}
	w.done <- err
	<-p.slots
}

// expire fails the waiters whose confirm is overdue.
func (s *session) expire(p *Publisher, now time.Time) {
	s.mu.Lock()
	var late []*waiter
	for tag, w := range s.pending {
		if now.After(w.deadline) {
			late = append(late, w)
			delete(s.pending, tag)
		}
	}
	s.mu.Unlock()
	for _, w := range late {
		w.done <- errTimeout
		<-p.slots
	}
}

// failAll fails every waiter of a session that ended.
func (s *session) failAll(p *Publisher, reason error) {
	s.mu.Lock()
	pending := s.pending
	s.pending = map[uint64]*waiter{}
	s.mu.Unlock()
	for _, w := range pending {
		w.done <- reason
		<-p.slots
	}
}
