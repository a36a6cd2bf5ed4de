package amqp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/flashsale/flashsale"
)

// Handler writes a batch of reservations in one transaction, with the
// contract of flashsale.OrderStore.PlaceOrders: one error per reservation, or a
// transaction error and nothing changed. Ping tells an outage (the
// database does not answer: hold the batch and retry for as long as it
// takes) from a transaction this batch made fail (retry it, and give up on
// it after MaxAttempts). flashsale.Store satisfies it; a wrapper can return
// the stock engine's units for orders the database failed.
type Handler interface {
	PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error)
	Ping(ctx context.Context) error
}

var _ Handler = flashsale.Store{}

const (
	// writeTimeout bounds one batch's rate wait and transaction. The batch
	// is written with a context detached from Run's, so a stop never
	// abandons a transaction halfway and the batch in hand is finished.
	writeTimeout = 30 * time.Second
	// pingTimeout bounds the check that tells an outage from a bad batch.
	pingTimeout = 2 * time.Second
	// idleCheck is how long an idle consumer waits before it subscribes
	// again on a fresh channel (see recycle).
	idleCheck = 5 * time.Second
	// retryMinDefault and retryMax bound the pause after a failed
	// transaction, so a database outage is not met with a tight
	// redelivery loop that burns every message's attempts in milliseconds.
	retryMinDefault = 250 * time.Millisecond
	retryMax        = 10 * time.Second
	// rateSlices is how many batches a second a rate-capped consumer aims
	// for while its commits are quick: a batch is then a tenth of a
	// second's writes, so the database sees a steady stream of small
	// commits, not a burst of BatchSize every few seconds. When a commit
	// takes longer than a slice, the quota it left unused makes the next
	// batch bigger (see Consumer.want).
	rateSlices = 10
	// bucketDivisor sizes the rate limiter's bucket: 1/bucketDivisor of a
	// second of quota (see NewConsumer).
	bucketDivisor = 4
)

// consumerSeq makes consumer tags unique within the process.
var consumerSeq atomic.Uint64

// Consumer moves reservations from the queue into the database in batches.
// Each delivery is acknowledged only after the transaction that recorded it
// committed, so a crash at any point redelivers instead of losing; the
// database's unique order ID turns the redelivery into ErrDuplicate, which
// is acknowledged as done.
type Consumer struct {
	cfg       Config
	store     Handler
	log       *slog.Logger
	tr        *tracer       // nil: tracing off
	limiter   *rate.Limiter // nil when RatePerSec is 0
	batchSize int           // the largest batch
	slice     int           // the smallest batch a capped consumer aims for
	prefetch  int
	retryMin  time.Duration // tests shorten it
	idle      time.Duration // idleCheck; tests shorten it
	retry     time.Duration // the current pause after failures; Run's goroutine only

	stop     chan struct{}
	stopOnce sync.Once
	running  atomic.Bool
	done     chan struct{} // closed when Run returns

	mu   sync.Mutex
	conn *amqp091.Connection // current connection, for killConnection

	// The pause state (see Pause), guarded by pmu. kick (capacity 1) wakes
	// the session to look at it; changed is closed and replaced whenever
	// consuming changes, so waiters need no polling.
	pmu       sync.Mutex
	wantPause bool
	consuming bool // a session has deliveries coming: it may hold some
	changed   chan struct{}
	kick      chan struct{}

	stats counters
}

// NewConsumer checks that the broker is reachable and declares the
// topology. Consuming starts with Run.
func NewConsumer(ctx context.Context, cfg Config, store Handler, logger *slog.Logger) (*Consumer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := Declare(ctx, cfg); err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	c := &Consumer{
		cfg:       cfg,
		store:     store,
		log:       logger.With("component", "amqp.consumer", "queue", cfg.queue()),
		tr:        newTracer(cfg),
		batchSize: cfg.BatchSize,
		slice:     cfg.BatchSize,
		retryMin:  retryMinDefault,
		idle:      idleCheck,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		changed:   make(chan struct{}),
		kick:      make(chan struct{}, 1),
	}
	if cfg.RatePerSec > 0 {
		// The bucket holds a quarter second of quota, so the quota a slow
		// commit (up to 250 ms) leaves unused is carried into the next batch
		// instead of lost: with one batch in flight, that is what keeps the
		// write rate at the cap while the database is slow. It is no larger
		// because carried quota is also what can land on top of the cap:
		// any one-second window sees at most 1.25 × RatePerSec (measured
		// 2.4 × with a full second's bucket). A batch cannot outgrow the
		// bucket, since WaitN refuses more than the burst.
		burst := max(1, int(math.Ceil(cfg.RatePerSec/bucketDivisor)))
		c.batchSize = min(cfg.BatchSize, burst)
		c.slice = min(c.batchSize, max(1, int(cfg.RatePerSec/rateSlices)))
		c.limiter = rate.NewLimiter(rate.Limit(cfg.RatePerSec), burst)
		// Start with an empty bucket: a full one would let the first
		// second's worth through free, a spike the cap exists to prevent.
		c.limiter.AllowN(time.Now(), burst)
	}
	// While one batch commits, the next must already be buffered, or a
	// catching-up batch could not fill.
	c.prefetch = max(cfg.Prefetch, 2*c.batchSize)
	return c, nil
}

// Run consumes until ctx ends or Close is called, reconnecting with backoff
// whenever the connection is lost. Either way of stopping stops taking
// deliveries, writes and acknowledges the batch in hand, and returns nil;
// unacknowledged prefetched deliveries go back to the queue.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("amqp: consumer is already running")
	}
	defer close(c.done)
	select {
	case <-c.stop:
		return nil // closed before it ran
	default:
	}
	var backoff time.Duration
	for {
		connected, err := c.session(ctx)
		if err == nil {
			return nil
		}
		if connected {
			backoff = 0
		}
		backoff = nextBackoff(backoff)
		c.log.Warn("consumer connection lost, reconnecting", "err", err, "retry_in", backoff)
		if !sleep(ctx, c.stop, backoff) {
			return nil
		}
	}
}

// Close stops the consumer gracefully (see Run) and waits for Run to return.
func (c *Consumer) Close() error {
	c.stopOnce.Do(func() { close(c.stop) })
	if c.running.Load() {
		<-c.done
	}
	return nil
}

// Stats returns the consume counters.
func (c *Consumer) Stats() Stats { return c.stats.snapshot() }

// item is one decoded delivery in a batch.
type item struct {
	tag   uint64
	count int64 // earlier deliveries of this message (x-delivery-count)
	r     flashsale.Reservation
	reqID string     // the purchase's request id (x-request-id), for the log lines
	span  trace.Span // its consumer span, until it is settled; nil when not tracing
}

// gatherState says why gather returned.
type gatherState int

const (
	gatherFull    gatherState = iota // batch full or BatchWait passed
	gatherStopped                    // ctx ended or Close was called
	gatherLost                       // the deliveries channel closed
	gatherKick                       // Pause or Resume asked the session to look
	// gatherIdle: no delivery for idleCheck (see recycle).
	gatherIdle
)

// session consumes on one connection. It returns nil after a graceful stop
// and the cause otherwise; connected reports whether consuming began.
func (c *Consumer) session(ctx context.Context) (connected bool, err error) {
	conn, err := dial(ctx, c.cfg, "consumer")
	if err != nil {
		return false, err
	}
	defer conn.Close()
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("open channel: %w", err)
	}
	// Declaring on every connection heals a broker that lost its
	// definitions; Consume would otherwise fail until someone redeclares.
	if err := declare(ch, c.cfg); err != nil {
		return false, err
	}
	if err := ch.Qos(c.prefetch, 0, false); err != nil {
		return false, fmt.Errorf("qos: %w", err)
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	defer c.setConsuming(false)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := make([]item, 0, c.batchSize)
	for {
		if c.pausing() {
			// Paused: nothing is held, and nothing is taken until Resume.
			// Say so here too: a Pause that came while an idle session
			// was subscribing again (recycle) finds it back at this loop
			// with consuming still set, and waited for ever (CI,
			// TestStaleAOF; TestPauseWhileRecycling).
			c.setConsuming(false)
			select {
			case <-c.kick:
				continue
			case e := <-closed:
				return true, fmt.Errorf("connection closed while paused: %v", e)
			case <-ctx.Done():
				return true, nil
			case <-c.stop:
				return true, nil
			}
		}
		// Consuming is set before the broker can send anything, so a Pause
		// that comes in meanwhile waits for this session to settle.
		c.setConsuming(true)
		tag := c.cfg.Name + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(consumerSeq.Add(1), 10)
		deliveries, err := ch.Consume(c.cfg.queue(), tag, false, false, false, false, nil)
		if err != nil {
			return false, fmt.Errorf("consume %s: %w", c.cfg.queue(), err)
		}
		c.log.Info("consuming", "consumer_tag", tag, "batch_size", c.batchSize, "min_batch_size", c.slice,
			"prefetch", c.prefetch, "rate_per_sec", c.cfg.RatePerSec)
		for {
			var state gatherState
			batch, state = c.gather(ctx, deliveries, timer, batch[:0])
			if state == gatherLost {
				// Acks can no longer reach the broker, but the batch in hand is
				// written anyway: if the queue itself is gone (deleted, or its
				// data lost) nothing will redeliver it, and if it is redelivered
				// the order ID makes the copy a duplicate.
				c.salvage(batch)
				return true, errors.New("deliveries channel closed")
			}
			if len(batch) > 0 {
				if err := c.process(ctx, ch, batch); err != nil {
					return true, err
				}
			}
			if state == gatherStopped {
				// Stop the broker sending more; closing the connection then
				// requeues whatever was prefetched but not in the batch.
				if err := ch.Cancel(tag, false); err != nil {
					c.log.Warn("cancel consumer", "err", err)
				}
				c.log.Info("consumer stopped")
				return true, nil
			}
			if state == gatherIdle {
				if ch, err = c.recycle(conn, ch, tag); err != nil {
					return true, err
				}
				break // the outer loop consumes again, on the new channel
			}
			if state == gatherKick && c.pausing() {
				if err := c.settleAll(ctx, ch, tag, deliveries, batch[:0]); err != nil {
					return true, err
				}
				c.setConsuming(false)
				c.log.Info("consumer paused")
				break
			}
		}
	}
}

// recycle closes an idle consumer's channel and opens a fresh one to
// consume on. A quorum queue deleted and declared again (the publisher does
// when a message comes back unroutable) sends its consumers no cancel:
// RabbitMQ attaches the old subscription to the new queue and hands it the
// new messages, which never reach the client, and they stay unacknowledged
// there, invisible to every other consumer, until the channel closes.
// Closing it requeues them. The consumer holds nothing when it is idle, so
// this costs a few frames every idleCheck and loses nothing.
func (c *Consumer) recycle(conn *amqp091.Connection, ch *amqp091.Channel, tag string) (*amqp091.Channel, error) {
	ch.Cancel(tag, false) // best effort: the close ends the subscription anyway
	ch.Close()
	nch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("reopen channel: %w", err)
	}
	if err := nch.Qos(c.prefetch, 0, false); err != nil {
		return nil, fmt.Errorf("qos: %w", err)
	}
	c.log.Debug("idle: subscribed again on a fresh channel", "after", c.idle)
	return nch, nil
}

// settleAll cancels the consumer and writes and settles every delivery the
// broker already sent, so that once it returns this consumer holds nothing:
// all it took is in the database (or back in the queue).
func (c *Consumer) settleAll(ctx context.Context, ch *amqp091.Channel, tag string, deliveries <-chan amqp091.Delivery, batch []item) error {
	if err := ch.Cancel(tag, false); err != nil {
		return fmt.Errorf("cancel consumer: %w", err)
	}
	// The library closes deliveries once it has handed over everything it
	// received before the cancel was confirmed.
	// They are written without waiting for the rate cap: a pause is the
	// start of a rebuild, which waits for it, and at most a prefetch's worth
	// arrives at once.
	for d := range deliveries {
		if batch = c.add(batch, d); len(batch) == c.cfg.BatchSize {
			if err := c.write(ctx, ch, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		return c.write(ctx, ch, batch)
	}
	return nil
}

// Pause makes the consumer stop taking deliveries and returns once it holds
// none: the batch in hand and every delivery already prefetched are written
// and acknowledged (or requeued), so everything the queue had given it is
// in the database. A consumer that is not connected holds nothing: the
// broker requeued what it had. It stays paused, across reconnections, until
// Resume. The rebuild after a Redis loss pauses every instance's consumer
// so that nothing is in flight while it reads the database.
func (c *Consumer) Pause(ctx context.Context) error {
	c.pmu.Lock()
	c.wantPause = true
	c.pmu.Unlock()
	c.wakeSession()
	for {
		c.pmu.Lock()
		consuming, changed := c.consuming, c.changed
		c.pmu.Unlock()
		if !consuming {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("pause consumer: %w", ctx.Err())
		case <-c.done:
			return nil
		}
	}
}

// Resume undoes Pause; consuming starts again at once.
func (c *Consumer) Resume() {
	c.pmu.Lock()
	c.wantPause = false
	c.pmu.Unlock()
	c.wakeSession()
}

// Drain consumes alone until the queue is empty (the rebuild's leader calls
// it once every other consumer is paused), then pauses again and returns:
// every message that was in the queue is then in the database.
func (c *Consumer) Drain(ctx context.Context) error {
	c.Resume()
	for {
		n, err := c.Backlog(ctx)
		if err == nil && n == 0 {
			if err := c.Pause(ctx); err != nil {
				return err
			}
			// A delivery requeued while it paused (its transaction failed)
			// is back in the queue: go round again.
			if n, err := c.Backlog(ctx); err == nil && n == 0 {
				return nil
			}
			c.Resume()
		}
		if !sleep(ctx, c.stop, 50*time.Millisecond) {
			return fmt.Errorf("drain: %w", cmp.Or(ctx.Err(), errConsumerClosed))
		}
	}
}

// errConsumerClosed is why a Drain cut short by Close stopped.
var errConsumerClosed = errors.New("consumer closed")

// Backlog is the number of messages ready in the queue.
func (c *Consumer) Backlog(ctx context.Context) (int, error) { return Backlog(ctx, c.cfg) }

// Backlog is the number of messages ready in cfg's order queue, on a
// connection of its own (the audit reads it from a process that may not
// consume).
func Backlog(ctx context.Context, cfg Config) (int, error) {
	cfg = cfg.withDefaults()
	conn, err := dial(ctx, cfg, "depth")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("depth: open channel: %w", err)
	}
	q, err := ch.QueueDeclarePassive(cfg.queue(), true, false, false, false, amqp091.Table{amqp091.QueueTypeArg: amqp091.QueueTypeQuorum})
	if err != nil {
		return 0, fmt.Errorf("depth: %w", err)
	}
	return q.Messages, nil
}

func (c *Consumer) pausing() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.wantPause
}

func (c *Consumer) setConsuming(on bool) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.consuming != on {
		c.consuming = on
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

func (c *Consumer) wakeSession() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// gather collects decoded deliveries: it waits for the first, then at most
// BatchWait for the rest, up to what want allows. Under a rate cap it also
// drops the quota that was not owed to a backlog (see forfeit).
func (c *Consumer) gather(ctx context.Context, deliveries <-chan amqp091.Delivery, timer *time.Timer, batch []item) ([]item, gatherState) {
	idleFrom := -1.0 // the limiter's tokens when the consumer ran out of deliveries
	var idle *time.Timer
	for len(batch) == 0 {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return batch, gatherLost
			}
			batch = c.add(batch, d)
			continue
		default:
		}
		if c.limiter != nil && idleFrom < 0 {
			idleFrom = c.limiter.Tokens()
		}
		if idle == nil {
			idle = time.NewTimer(c.idle)
			defer idle.Stop()
		}
		select {
		case d, ok := <-deliveries:
			if !ok {
				return batch, gatherLost
			}
			batch = c.add(batch, d)
		case <-idle.C:
			return batch, gatherIdle
		case <-c.kick:
			return batch, gatherKick
		case <-ctx.Done():
			return batch, gatherStopped
		case <-c.stop:
			return batch, gatherStopped
		}
	}
	if idleFrom >= 0 {
		c.forfeit(idleFrom)
	}
	want := c.want()
	timer.Reset(c.cfg.BatchWait)
	defer timer.Stop()
	for len(batch) < want {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return batch, gatherLost
			}
			batch = c.add(batch, d)
		case <-timer.C:
			// Short: the consumer has caught up with the queue, so no
			// writes are owed beyond this batch.
			c.forfeit(float64(len(batch)))
			return batch, gatherFull
		case <-c.kick:
			return batch, gatherKick
		case <-ctx.Done():
			return batch, gatherStopped
		case <-c.stop:
			return batch, gatherStopped
		}
	}
	return batch, gatherFull
}

// want is the size a batch aims for. Uncapped, it is BatchSize. Capped, it
// is the quota the limiter holds now, at least a slice and at most the
// largest batch: after a quick commit that is a slice, paced by the
// limiter's wait; after a slow one it is the quota that accrued meanwhile,
// written at once, so the rate stays at the cap however long a commit takes
// (up to a largest batch per commit).
func (c *Consumer) want() int {
	if c.limiter == nil {
		return c.batchSize
	}
	return min(c.batchSize, max(c.slice, int(c.limiter.Tokens())))
}

// forfeit drops the limiter's quota above keep. Quota is carried only
// while a backlog waits on slow commits; quota that accrued while the
// consumer waited for deliveries, or while it kept up with a trickle, is
// not owed to anyone, and a consumer that kept it would meet the next
// sale's first burst with up to a second's writes on top of the cap. So
// gather forfeits what accrued while it waited for a first delivery, and
// all but the batch in hand when a batch comes up short.
func (c *Consumer) forfeit(keep float64) {
	if c.limiter == nil {
		return
	}
	if n := int(c.limiter.Tokens() - keep); n > 0 {
		c.limiter.AllowN(time.Now(), n)
	}
}

// add decodes d into the batch. A body that is not a reservation can never
// be written, so it is dead-lettered at once; with no reservation there are
// no units to return and OnDead is not called.
func (c *Consumer) add(batch []item, d amqp091.Delivery) []item {
	c.stats.consumed.Add(1)
	if d.Redelivered {
		c.stats.redelivered.Add(1)
	}
	r, err := decodeReservation(d.Body)
	if err != nil {
		c.log.Error("dead-lettering undecodable message", "message_id", d.MessageId, "bytes", len(d.Body), "err", err)
		if err := d.Nack(false, false); err != nil {
			c.log.Warn("nack undecodable message", "err", err)
		} else {
			c.stats.deadLettered.Add(1)
		}
		return batch
	}
	return append(batch, item{tag: d.DeliveryTag, count: deliveryCount(d.Headers), r: r, reqID: deliveryRequestID(d.Headers),
		span: c.tr.startProcess(&d, c.cfg.queue(), &r)})
}

// deliveryCount reads the quorum queue's count of earlier deliveries.
func deliveryCount(h amqp091.Table) int64 {
	switch v := h["x-delivery-count"].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	}
	return 0
}

// verdict is what happens to one delivery after its batch was written.
type verdict int

const (
	verdictAck     verdict = iota // recorded (or already recorded)
	verdictRequeue                // the transaction failed; try again later
	verdictDead                   // give up: return the units and dead-letter
)

// process writes a batch under the rate cap and settles its deliveries. An
// error means the channel failed; unsettled deliveries will be redelivered.
func (c *Consumer) process(ctx context.Context, ch *amqp091.Channel, batch []item) error {
	if c.limiter != nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		err := c.limiter.WaitN(wctx, len(batch))
		cancel()
		if err != nil {
			return fmt.Errorf("rate wait: %w", err)
		}
	}
	return c.write(ctx, ch, batch)
}

// write writes a batch and settles its deliveries (process without the cap).
func (c *Consumer) write(ctx context.Context, ch *amqp091.Channel, batch []item) error {
	ctx = c.tr.batchContext(ctx, batch)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	rs := make([]flashsale.Reservation, len(batch))
	for i := range batch {
		rs[i] = batch[i].r
	}
	results := make([]error, len(batch)) // per reservation, as PlaceOrders says
	txErrs := make([]error, len(batch))  // non-nil where its transaction failed
	failed := false
	err := c.place(wctx, rs, results)
	for err != nil && c.down(ctx) {
		// The database does not answer: an outage, not this batch's fault.
		// The batch is held unsettled (a crash redelivers it) and written
		// again after a capped backoff for as long as the outage lasts, so
		// no delivery spends an attempt and nothing is dead-lettered for
		// it. A stop leaves it unsettled too.
		c.log.Warn("database unreachable, holding the batch", "batch", len(rs), "err", err)
		if !c.pause(ctx) {
			return fmt.Errorf("stopped during a database outage: %w", err)
		}
		c.stats.retried.Add(1)
		tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		err = c.place(tctx, rs, results)
		tcancel()
	}
	if err != nil {
		if len(rs) == 1 {
			txErrs[0], failed = err, true
		} else {
			// One bad reservation must not fail its neighbours until they
			// all run out of attempts: retry each alone, so only the
			// culprit is requeued.
			c.log.Warn("batch transaction failed, writing one by one", "batch", len(rs), "err", err)
			for i := range rs {
				if err := c.place(wctx, rs[i:i+1], results[i:i+1]); err != nil {
					txErrs[i], failed = err, true
				}
			}
		}
	}

	if err := c.settle(wctx, ch, batch, results, txErrs); err != nil {
		return err
	}
	if failed {
		c.pause(ctx)
	} else {
		c.retry = 0
	}
	return nil
}

// down reports whether the database does not answer.
func (c *Consumer) down(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	defer cancel()
	return c.store.Ping(pctx) != nil
}

// salvage writes a batch whose deliveries can no longer be settled.
func (c *Consumer) salvage(batch []item) {
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	rs := make([]flashsale.Reservation, len(batch))
	for i := range batch {
		rs[i] = batch[i].r
	}
	results := make([]error, len(batch))
	if err := c.place(ctx, rs, results); err != nil {
		c.log.Warn("batch of a lost channel not written; it is redelivered if the queue still has it", "batch", len(rs), "err", err)
		return
	}
	c.log.Info("wrote the batch of a lost channel", "batch", len(rs))
}

// place calls the handler once, checking it kept the one-result-per-input
// contract.
func (c *Consumer) place(ctx context.Context, rs []flashsale.Reservation, results []error) error {
	errs, err := c.store.PlaceOrders(ctx, rs)
	if err == nil && len(errs) != len(rs) {
		err = fmt.Errorf("place orders: %d results for %d reservations", len(errs), len(rs))
	}
	if err != nil {
		return err
	}
	copy(results, errs)
	c.stats.batches.Add(1)
	return nil
}

// judge decides one delivery's fate from its result and transaction error.
func (c *Consumer) judge(it *item, result, txErr error) (verdict, error) {
	if txErr != nil {
		if it.count+1 >= int64(c.cfg.MaxAttempts) {
			return verdictDead, fmt.Errorf("transaction failed on attempt %d of %d: %w", it.count+1, c.cfg.MaxAttempts, txErr)
		}
		return verdictRequeue, txErr
	}
	switch {
	case result == nil,
		errors.Is(result, flashsale.ErrDuplicate),
		errors.Is(result, flashsale.ErrSoldOut),
		errors.Is(result, flashsale.ErrLimitExceeded),
		errors.Is(result, flashsale.ErrKeyConflict):
		// Recorded: held, already there, or inserted as failed (the
		// handler's wrapper returns the units of failed orders).
		return verdictAck, nil
	}
	// Any other per-order error (unknown sale, invalid reservation) comes
	// from the data, not the moment: retrying cannot help.
	return verdictDead, fmt.Errorf("order refused: %w", result)
}

// logWritten says what became of an acknowledged order: one line per
// order, bounded by the stock rather than by the traffic.
func (c *Consumer) logWritten(it *item, result error) {
	switch {
	case result == nil:
		c.log.Info("order held", "sale_id", it.r.SaleID, "order_id", it.r.OrderID, "request_id", it.reqID)
	case errors.Is(result, flashsale.ErrDuplicate):
		c.log.Debug("order already written", "sale_id", it.r.SaleID, "order_id", it.r.OrderID, "request_id", it.reqID)
	default:
		c.log.Info("order failed", "sale_id", it.r.SaleID, "order_id", it.r.OrderID, "request_id", it.reqID, "err", result)
	}
}

// settle acknowledges the batch: runs of successes with one multiple=true
// ack each, failures one by one. Deliveries arrive in tag order and every
// earlier delivery on the channel is already settled, so a multiple ack
// covers exactly the run.
func (c *Consumer) settle(ctx context.Context, ch *amqp091.Channel, batch []item, results, txErrs []error) error {
	run := 0 // successes since the last settled delivery
	flush := func(i int) error {
		if run == 0 {
			return nil
		}
		if err := ch.Ack(batch[i].tag, true); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		c.stats.acked.Add(uint64(run))
		run = 0
		return nil
	}
	for i := range batch {
		it := &batch[i]
		v, reason := c.judge(it, results[i], txErrs[i])
		if v != verdictDead {
			c.tr.endProcess(it, v, results[i], reason)
		}
		if v == verdictAck {
			c.logWritten(it, results[i])
			run++
			continue
		}
		if err := flush(i - 1); err != nil {
			return err
		}
		switch v {
		case verdictRequeue:
			c.log.Warn("requeueing order", "order_id", it.r.OrderID, "sale_id", it.r.SaleID, "request_id", it.reqID, "attempt", it.count+1, "err", reason)
			if err := ch.Nack(it.tag, false, true); err != nil {
				return fmt.Errorf("nack: %w", err)
			}
			c.stats.requeued.Add(1)
		case verdictDead:
			if c.cfg.OnDead != nil {
				if err := c.cfg.OnDead(c.tr.itemContext(ctx, it), it.r, reason); err != nil {
					// Its failed row is not written (or its units not back):
					// keep the message until both are done.
					c.log.Warn("requeueing order: giving up on it failed", "order_id", it.r.OrderID, "sale_id", it.r.SaleID, "request_id", it.reqID, "err", err)
					c.tr.endProcess(it, verdictRequeue, results[i], err)
					if err := ch.Nack(it.tag, false, true); err != nil {
						return fmt.Errorf("nack: %w", err)
					}
					c.stats.requeued.Add(1)
					continue
				}
			}
			c.log.Error("dead-lettering order", "order_id", it.r.OrderID, "sale_id", it.r.SaleID, "request_id", it.reqID, "attempt", it.count+1, "err", reason)
			c.tr.endProcess(it, verdictDead, results[i], reason)
			if err := ch.Nack(it.tag, false, false); err != nil {
				return fmt.Errorf("nack: %w", err)
			}
			c.stats.deadLettered.Add(1)
		}
	}
	return flush(len(batch) - 1)
}

// pause waits after a failed transaction, doubling the wait on each
// consecutive failure up to retryMax, so a struggling database is not met
// with a tight loop. It reports false when a stop cut it short.
func (c *Consumer) pause(ctx context.Context) bool {
	c.retry = min(max(2*c.retry, c.retryMin), retryMax)
	return sleep(ctx, c.stop, c.retry)
}

// killConnection closes the current connection without settling anything,
// as a crash would; tests use it.
func (c *Consumer) killConnection() {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}
