// Package amqp is the distributed order path on RabbitMQ: a Publisher that
// makes a reservation durable in a quorum queue before the purchase is
// answered (flashsale.OrderWriter), and a Consumer that batch-inserts the
// queued reservations into the database with manual acknowledgements.
//
// The queue is the durable log between the stock engine and the database, so
// everything here errs on the side of "at least once": a message is acked
// only after the database committed it, the database's unique order ID makes
// a redelivery harmless (ErrDuplicate), and a message that cannot be written
// is dead-lettered only after the stock engine was told to return its units.
package amqp

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale"
)

// Defaults for Config's zero fields.
const (
	NameDefault           = "flashsale"
	MaxInFlightDefault    = 1024
	PrefetchDefault       = 500
	BatchSizeDefault      = 256
	BatchWaitDefault      = 5 * time.Millisecond
	MaxAttemptsDefault    = 5
	ConfirmTimeoutDefault = 5 * time.Second
)

const (
	// dialTimeout bounds the TCP and AMQP handshake of one connection attempt.
	dialTimeout = 5 * time.Second
	// heartbeat makes a silently dead broker or network show up as a closed
	// connection within a few seconds instead of a TCP timeout.
	heartbeat = 5 * time.Second
	// backoffMin and backoffMax bound the wait between reconnection attempts.
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// Config names the topology and tunes both ends of the order path. The zero
// value of every field but URL means its default.
type Config struct {
	// URL is the broker, such as amqp://guest:guest@127.0.0.1:5672/.
	URL string
	// Name prefixes the topology: exchange and queue "<name>.orders",
	// dead-letter exchange "<name>.orders.dlx" and queue "<name>.orders.dead".
	// Separate names let several deployments (or tests) share a broker.
	Name string

	// MaxInFlight bounds the publishes awaiting a broker confirm. When it is
	// reached Write fails at once with ErrUnavailable: a flash sale that
	// outruns the broker must shed load, not queue goroutines.
	MaxInFlight int
	// ConfirmTimeout is how long Write waits for a confirm before it gives
	// up with ErrUnavailable (unless the caller's context ends sooner).
	ConfirmTimeout time.Duration

	// Prefetch is how many unacknowledged deliveries the broker pushes to the
	// consumer. The consumer raises it to twice its largest batch (BatchSize,
	// or a second's writes under RatePerSec if that is fewer), so the next
	// batch is already buffered while one commits and a batch catching up
	// after a slow commit can fill.
	Prefetch int
	// BatchSize is the most reservations written in one transaction.
	BatchSize int
	// BatchWait is how long a batch waits to fill once it has its first
	// reservation: the latency paid for fewer, larger transactions.
	BatchWait time.Duration
	// RatePerSec caps the orders per second the consumer writes, so the
	// database sees a flat line however steep the sale's peak; 0 means no cap.
	//
	// The cap is per consumer, that is per instance: each Consumer has a
	// limiter of its own, so N instances write at most N × RatePerSec. Divide
	// the database's budget by the number of instances.
	//
	// While a backlog lasts the consumer writes at the cap even when commits
	// are slow, up to a quarter second each: its limiter holds a quarter
	// second of quota, and the quota a slow commit leaves unused makes the
	// next batch bigger (up to BatchSize), so it is caught up rather than
	// lost. Commits slower than that (a database starved of CPU) write below
	// the cap. Over any one second the consumer writes at most 1.25 ×
	// RatePerSec; quota does not build up while the queue is empty, so a
	// consumer that was idle starts a burst at the cap, not above it.
	RatePerSec float64
	// MaxAttempts is how many deliveries a reservation gets whose
	// transaction keeps failing while the database answers before it is
	// dead-lettered. While the database does not answer at all (Handler.Ping
	// fails) attempts are not spent: the consumer holds the batch and
	// retries for as long as the outage lasts.
	MaxAttempts int
	// OnDead, if set, is called by the consumer before it dead-letters a
	// decodable reservation the database never placed, so the caller can
	// record the order as failed and return its units. If it returns an
	// error the message is requeued instead, and dead-lettered only once
	// OnDead succeeds. It may be called more than once for a reservation,
	// so it must be idempotent.
	OnDead func(ctx context.Context, r flashsale.Reservation, reason error) error

	// TracerProvider, when set, traces the order path: a producer span
	// around each publish and its confirm, whose context rides in the
	// message's headers (Propagator's, W3C traceparent by default), and a
	// consumer span per delivery that continues that trace. Nil: no span
	// and no header work at all.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator

	// wrapConn, in this package's tests, wraps each connection dialled,
	// to fail its writes on purpose.
	wrapConn func(net.Conn) net.Conn
}

// withDefaults returns cfg with every zero field set to its default.
func (cfg Config) withDefaults() Config {
	cfg.Name = cmp.Or(cfg.Name, NameDefault)
	cfg.MaxInFlight = cmp.Or(cfg.MaxInFlight, MaxInFlightDefault)
	cfg.ConfirmTimeout = cmp.Or(cfg.ConfirmTimeout, ConfirmTimeoutDefault)
	cfg.Prefetch = cmp.Or(cfg.Prefetch, PrefetchDefault)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.BatchWait = cmp.Or(cfg.BatchWait, BatchWaitDefault)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, MaxAttemptsDefault)
	return cfg
}

// Validate reports the first field that cannot work.
func (cfg Config) Validate() error {
	switch {
	case cfg.URL == "":
		return fmt.Errorf("amqp: url is required")
	case cfg.MaxInFlight < 0 || cfg.Prefetch < 0 || cfg.BatchSize < 0 || cfg.MaxAttempts < 0:
		return fmt.Errorf("amqp: max in flight, prefetch, batch size and max attempts must not be negative")
	case cfg.BatchWait < 0 || cfg.ConfirmTimeout < 0 || cfg.RatePerSec < 0:
		return fmt.Errorf("amqp: batch wait, confirm timeout and rate must not be negative")
	}
	return nil
}

// The topology's names, derived from Config.Name.
func (cfg Config) exchange() string     { return cfg.Name + ".orders" }
func (cfg Config) queue() string        { return cfg.Name + ".orders" }
func (cfg Config) deadExchange() string { return cfg.Name + ".orders.dlx" }
func (cfg Config) deadQueue() string    { return cfg.Name + ".orders.dead" }

// routingKey is the one key orders are published and bound with; dead
// letters keep it, so the dead-letter binding uses it too.
const routingKey = "order"

// Declare creates the topology if it does not exist: a durable direct
// exchange, a durable quorum queue bound to it whose rejected messages go to
// a dead-letter exchange, and a durable queue bound to that exchange that
// keeps them for an operator. It is idempotent; NewPublisher and NewConsumer
// call it too, so deployment order does not matter.
func Declare(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	conn, err := dial(ctx, cfg, "declare")
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("declare: open channel: %w", err)
	}
	defer ch.Close()
	return declare(ch, cfg)
}

func declare(ch *amqp091.Channel, cfg Config) error {
	if err := ch.ExchangeDeclare(cfg.deadExchange(), amqp091.ExchangeDirect, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", cfg.deadExchange(), err)
	}
	// Quorum queues replicate and fsync, and count deliveries
	// (x-delivery-count), which is what MaxAttempts reads.
	if _, err := ch.QueueDeclare(cfg.deadQueue(), true, false, false, false, amqp091.Table{
		amqp091.QueueTypeArg: amqp091.QueueTypeQuorum,
	}); err != nil {
		return fmt.Errorf("declare queue %s: %w", cfg.deadQueue(), err)
	}
	if err := ch.QueueBind(cfg.deadQueue(), routingKey, cfg.deadExchange(), false, nil); err != nil {
		return fmt.Errorf("bind queue %s: %w", cfg.deadQueue(), err)
	}
	if err := ch.ExchangeDeclare(cfg.exchange(), amqp091.ExchangeDirect, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", cfg.exchange(), err)
	}
	// No x-delivery-limit: the broker would dead-letter on its own without
	// the consumer calling OnDead, and the units would never come back.
	if _, err := ch.QueueDeclare(cfg.queue(), true, false, false, false, amqp091.Table{
		amqp091.QueueTypeArg:     amqp091.QueueTypeQuorum,
		"x-dead-letter-exchange": cfg.deadExchange(),
	}); err != nil {
		return fmt.Errorf("declare queue %s: %w", cfg.queue(), err)
	}
	if err := ch.QueueBind(cfg.queue(), routingKey, cfg.exchange(), false, nil); err != nil {
		return fmt.Errorf("bind queue %s: %w", cfg.queue(), err)
	}
	return nil
}

// dial opens one connection named after its role, so the broker's
// management UI tells publishers from consumers.
func dial(ctx context.Context, cfg Config, role string) (*amqp091.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dial %s: %w", role, err)
	}
	props := amqp091.NewConnectionProperties()
	props.SetClientConnectionName(cfg.Name + "." + role)
	conn, err := amqp091.DialConfig(cfg.URL, amqp091.Config{
		Heartbeat:  heartbeat,
		Locale:     "en_US",
		Dial:       dialer(cfg.wrapConn),
		Properties: props,
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", role, err)
	}
	return conn, nil
}

// dialer is the library's dialer, its connections wrapped when wrap is set.
func dialer(wrap func(net.Conn) net.Conn) func(network, addr string) (net.Conn, error) {
	dial := amqp091.DefaultDial(dialTimeout)
	if wrap == nil {
		return dial
	}
	return func(network, addr string) (net.Conn, error) {
		c, err := dial(network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
}

// sleep waits d, or less if ctx or stop ends first, and reports whether the
// full wait elapsed.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// nextBackoff doubles d within [backoffMin, backoffMax].
func nextBackoff(d time.Duration) time.Duration {
	return min(max(2*d, backoffMin), backoffMax)
}

// Stats are cumulative counters for tests and metrics. A Publisher fills the
// publish side and a Consumer the consume side.
type Stats struct {
	Published uint64 // messages handed to the broker
	Confirmed uint64 // publishes the broker confirmed (Write returned OrderPending)
	Failed    uint64 // publishes that certainly failed: full, disconnected, blocked, nack, return
	Returned  uint64 // of those, publishes the broker returned as unroutable
	// Indeterminate counts publishes sent whose confirm never came (timeout,
	// connection loss, the caller gave up) or whose write failed after some
	// of it may have left: the broker may have kept them.
	Indeterminate uint64

	Consumed uint64 // deliveries received
	Batches  uint64 // transactions committed by the handler
	Acked    uint64 // deliveries acknowledged
	Requeued uint64 // deliveries returned to the queue after a failed transaction
	// Redelivered counts deliveries the broker marked redelivered (a
	// requeue, or a consumer that went away before acking).
	Redelivered uint64
	Retried     uint64 // batches written again after a database outage, unsettled meanwhile
	Dead        uint64 // deliveries dead-lettered
}

// counters is Stats updated concurrently.
type counters struct {
	published, confirmed, failed, indeterminate, returned atomic.Uint64
	consumed, batches, acked, requeued, deadLettered      atomic.Uint64
	retried, redelivered                                  atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Published: c.published.Load(), Confirmed: c.confirmed.Load(), Failed: c.failed.Load(),
		Indeterminate: c.indeterminate.Load(), Returned: c.returned.Load(),
		Consumed: c.consumed.Load(), Batches: c.batches.Load(), Acked: c.acked.Load(),
		Requeued: c.requeued.Load(), Retried: c.retried.Load(), Dead: c.deadLettered.Load(),
		Redelivered: c.redelivered.Load(),
	}
}
