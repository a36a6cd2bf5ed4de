package amqp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flashsale/flashsale"
)

// NoticeSink publishes order events to the topic exchange "<name>.events"
// with the event's type as the routing key ("order.paid", "sale.sold_out"),
// persistent, with the event ID as the message ID, and counts one
// delivered only when the broker confirmed it. The platform binds its own
// queues (say "order.*" for the payment service). An unroutable event
// (no queue bound yet) is confirmed and dropped by the broker: that is
// the exchange's semantics, and the webhook is the transport that waits
// for its receiver.
//
// The sink keeps one connection and one confirming channel, redialled
// after any failure.
type NoticeSink struct {
	cfg Config

	mu   sync.Mutex
	conn *amqp091.Connection
	ch   *amqp091.Channel
}

var _ flashsale.NoticeSink = (*NoticeSink)(nil)

// NewNoticeSink returns a sink on cfg's broker; it connects on first use.
func NewNoticeSink(cfg Config) (*NoticeSink, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &NoticeSink{cfg: cfg}, nil
}

// EventsExchange is the exchange the sink publishes to.
func (s *NoticeSink) EventsExchange() string { return s.cfg.Name + ".events" }

// Name is the transport's name in the outbox and the delivery log.
func (s *NoticeSink) Name() string { return "amqp" }

// Deliver publishes n and waits for the broker's confirm. Deliveries may
// run concurrently (the dispatcher delivers several orders' events at
// once): the publish is serialised, the wait for the confirm is not.
func (s *NoticeSink) Deliver(ctx context.Context, n flashsale.Notice) (int, error) {
	dc, err := s.publish(ctx, n)
	if err != nil {
		return 0, err
	}
	ok, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		s.mu.Lock()
		s.reset() // a confirm that may still come would be matched to nothing
		s.mu.Unlock()
		return 0, fmt.Errorf("events: confirm %s: %w", n.ID, err)
	case !ok:
		return 0, fmt.Errorf("events: the broker refused %s (nack)", n.ID)
	}
	return 0, nil
}

func (s *NoticeSink) publish(ctx context.Context, n flashsale.Notice) (*amqp091.DeferredConfirmation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, s.EventsExchange(), string(n.Type), false, false, amqp091.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp091.Persistent,
		MessageId:    n.ID,
		Type:         string(n.Type),
		Headers:      noticeHeaders(n),
		Timestamp:    n.At,
		Body:         n.Payload,
	})
	if err != nil {
		s.reset()
		return nil, fmt.Errorf("events: publish %s: %w", n.ID, err)
	}
	return dc, nil
}

// open dials and declares the exchange unless a live channel is open.
func (s *NoticeSink) open(ctx context.Context) error {
	if s.ch != nil && !s.ch.IsClosed() {
		return nil
	}
	s.reset()
	conn, err := dial(ctx, s.cfg, "events")
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil {
		err = ch.ExchangeDeclare(s.EventsExchange(), amqp091.ExchangeTopic, true, false, false, false, nil)
	}
	if err != nil {
		conn.Close()
		return fmt.Errorf("events: open channel: %w", err)
	}
	s.conn, s.ch = conn, ch
	return nil
}

func (s *NoticeSink) reset() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
	s.conn, s.ch = nil, nil
}

// Close closes the sink's connection.
func (s *NoticeSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn, s.ch = nil, nil
	if errors.Is(err, amqp091.ErrClosed) {
		return nil
	}
	return err
}

// noticeHeaders marks a test sale's event ("test": true), else none.
func noticeHeaders(n flashsale.Notice) amqp091.Table {
	if !n.Test {
		return nil
	}
	return amqp091.Table{"test": true}
}
