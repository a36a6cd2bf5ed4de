package funnel

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
)

// The waiting room (issue 24): a sale with one admits its guests from a
// queue (flashsale.Queue) in the draw's order, as fast as its rate and
// never beyond the rooms that can still be bought. This file is the
// funnel's part: joining, a guest's view, the draw's publication, the
// gate before a token, and the admission loop (waiter.run).

// Defaults of the waiting room.
const (
	// AdmitTickDefault is how often the admission loop looks at every
	// live sale with a waiting room.
	AdmitTickDefault = 200 * time.Millisecond
	// QueueIdleDefault is how long a guest may go without reading their
	// place before their turn is skipped (they may join again, at the back).
	QueueIdleDefault = 2 * time.Minute
	// derivedAdmitWindow: a sale without a set rate admits its whole stock
	// over this window, at least one guest a second.
	derivedAdmitWindow = 10 * time.Second
)

// errNoQueue refuses a waiting room where this shape has no queue.
var errNoQueue = flashsale.Errorf(flashsale.EInvalid,
	"waiting_room: this deployment has no queue for a waiting room yet (the embedded shape has one; the distributed shape's is not built)")

// waiter runs the waiting rooms of the live sales: one goroutine (run),
// and a lock over the admission state it keeps per sale.
type waiter struct {
	*parts
	queue flashsale.Queue // nil: no waiting rooms in this shape
	// places records new places before their guests are told; the
	// steps' progress and the draw go to records as they happen. With no
	// records (a test's store) the queue is not rebuilt after a loss.
	places  *placeLog
	records flashsale.QueueRecords
	sales   *catalog
	// seedKey derives each sale's draw seed (seed), so every instance
	// and every restart commits to the same one without storing it.
	seedKey []byte
	tick    time.Duration
	idle    time.Duration

	mu sync.Mutex
	// rooms are what this instance saw of each live sale's queue at its
	// last step: whether the next one moved it, and the pace it moves at.
	rooms map[string]*roomState
	// moved is closed, and forgotten, when a sale's queue moves: the
	// guests' streams wait on it (QueueMoved).
	moved map[string]chan struct{}
	// pending are places this instance could not record, by sale and
	// user, until the guest's next join records them.
	pending map[string]flashsale.PlaceRecord
	// lefts are the sales' rooms left as last read (left), leftReads the
	// reads in flight, one a sale.
	lefts     map[string]leftRead
	leftReads singleflight.Group
}

func newWaiter(p *parts, queue flashsale.Queue, sales *catalog, secret []byte, tick time.Duration) *waiter {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("flashsale draw seed v1"))
	return &waiter{parts: p, queue: queue, sales: sales, seedKey: m.Sum(nil),
		records: p.store.Queues, places: &placeLog{records: p.store.Queues, in: make(chan placeWrite)},
		tick: cmp.Or(tick, AdmitTickDefault), idle: QueueIdleDefault, rooms: map[string]*roomState{}, pending: map[string]flashsale.PlaceRecord{}, lefts: map[string]leftRead{},
		moved: map[string]chan struct{}{}}
}

// roomState is one sale's queue as of this instance's last step: its
// counts, and the pace its front moves at, measured.
type roomState struct {
	stats flashsale.QueueStats
	// draw is the sale's, once made (and recorded in the database).
	draw *flashsale.Draw
	// at and passed are the last sample of the places that have left the
	// front (admitted or skipped); avg is the moving average of the
	// rate they left at, per second, and pace the one ETAs are computed at
	// (shown); both 0 until measured.
	at        time.Time
	passed    int
	avg, pace float64
	// still: a step since the sample stood still by design.
	still bool
}

// paceWindow is the time constant of the measured pace's moving average:
// long enough that a second of more skips or fewer rooms does not push
// every guest's ETA up and down, short enough to follow a new rate.
const paceWindow = 15 * time.Second

// drawSecret is what the draw seeds derive from: the oldest token key
// (the last listed), which a rotation retires last, or the server secret.
// A rotation that retires it changes the seeds of sales not yet drawn, and
// so their published commitments: rotate between sales.
func drawSecret(cfg Config) []byte {
	if n := len(cfg.TokenKeys); n > 0 {
		return cfg.TokenKeys[n-1].Secret
	}
	return cfg.Secret
}

// seed is the sale's draw seed: secret until the draw reveals it, the same
// on every instance (they share the secret).
func (w *waiter) seed(saleID string) string {
	m := hmac.New(sha256.New, w.seedKey)
	m.Write([]byte(saleID))
	return hex.EncodeToString(m.Sum(nil))
}

// run admits guests every tick, and records new places, until ctx ends.
func (w *waiter) run(ctx context.Context) {
	if w.queue == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.places.run(ctx) })
	every(ctx, w.tick, nil, w.step)
	wg.Wait()
}

// step draws and admits for every live sale with a waiting room, and
// drops the queues of sales that ended or were deleted since the last. It
// walks those sales alone (catalog.waiting), so a platform's other live
// sales cost it nothing.
func (w *waiter) step(ctx context.Context) {
	now := w.now()
	w.dropEnded(ctx)
	for _, sale := range w.sales.waiting() {
		if now.Before(sale.StartsAt) {
			continue
		}
		if err := w.admitSale(ctx, sale, now); err != nil && ctx.Err() == nil {
			w.log.Warn("waiting room: admission step", "sale_id", sale.ID, "err", err)
		}
	}
}

// admitSale is one sale's admission step: the draw, once; then the queue
// admits as many guests as the rate owes (the queue keeps that clock, so
// every instance stepping it shares one rate), but never more than the
// rooms left in the engine less the admissions not yet used: every
// admitted guest can buy. When none is left for the waiting (every room
// is held, sold or promised to an admitted guest), the queue is sold out
// and every waiting guest reads so; when rooms come back (a hold expires
// or is cancelled, an admission lapses, the operator adds rooms), it
// opens again, in order. A paused sale, or a paused waiting room, admits
// nobody.
//
// Held rooms are not counted as obtainable although a hold may expire:
// counting them would admit guests to wait on other guests' holds, each
// told sold_out at the purchase, while the queue cannot say sold out
// until every hold is paid. A hold that ends gives its room back to the
// engine, and the next step admits the next in line for it.
func (w *waiter) admitSale(ctx context.Context, sale *flashsale.Sale, now time.Time) error {
	if _, err := w.drawOf(ctx, sale.ID); err != nil {
		return err
	}
	// The used count before the rooms left (AdmitRule.Used): a purchase
	// between the two reads is then counted as promised, not as free.
	before, err := w.queue.Stats(ctx, sale.ID, now)
	if err != nil {
		return err
	}
	avail, err := w.engine.Available(ctx, sale.ID)
	w.remember(sale.ID, roomsLeft(avail), err)
	if err != nil {
		return err
	}
	rule := flashsale.AdmitRule{For: time.Duration(sale.WaitingRoom.AdmissionSeconds) * time.Second,
		IdleAfter: w.idle, Rate: rate(sale), Left: roomsLeft(avail), Used: before.Used}
	paused := sale.Paused || sale.WaitingRoom.Paused
	if paused {
		rule.Rate = 0
	}
	a, err := w.queue.Admit(ctx, sale.ID, now, rule)
	if err != nil {
		return err
	}
	w.settle(sale.ID, a.Stats, now, !paused, rate(sale))
	if w.records != nil && len(a.Admitted)+len(a.Skipped) > 0 {
		// Not recorded, a restored queue has these guests waiting at
		// the front again: admitted again, never lost.
		if err := w.records.RecordPassed(ctx, sale.ID, a.Admitted, now.Add(rule.For), a.Skipped); err != nil {
			return fmt.Errorf("record the step: %w", err)
		}
	}
	return nil
}

// drawOf is the sale's draw, made by the first call from the start (on
// any instance) and the same ever after: it is recorded in the database
// once, and kept here (a Redis queue's is megabytes to fetch).
func (w *waiter) drawOf(ctx context.Context, saleID string) (flashsale.Draw, error) {
	w.mu.Lock()
	if r := w.rooms[saleID]; r != nil && r.draw != nil {
		defer w.mu.Unlock()
		return *r.draw, nil
	}
	w.mu.Unlock()
	d, err := w.queue.Draw(ctx, saleID, w.seed(saleID))
	if err != nil {
		return flashsale.Draw{}, err
	}
	if w.records != nil {
		if err := w.records.RecordDraw(ctx, d); err != nil {
			return flashsale.Draw{}, fmt.Errorf("record the draw: %w", err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.rooms[saleID]
	if r == nil {
		r = &roomState{}
		w.rooms[saleID] = r
	}
	r.draw = &d
	return d, nil
}

// restore brings the sale's queue up to its records (queue.go's Restore):
// after a restart of the embedded shape, or a Redis that lost it or came
// back stale. The engine's sale was just loaded from the database; its
// queue is loaded from the database too.
func (w *waiter) restore(ctx context.Context, sale *flashsale.Sale) error {
	if w.queue == nil || w.records == nil || sale.WaitingRoom == nil {
		return nil
	}
	d, places, err := w.records.QueueRecord(ctx, sale.ID)
	if err != nil {
		return fmt.Errorf("restore the waiting room: %w", err)
	}
	if d == nil && len(places) == 0 {
		return nil
	}
	if err := w.queue.Restore(ctx, sale.ID, d, places, w.now()); err != nil {
		return fmt.Errorf("restore the waiting room: %w", err)
	}
	w.log.Info("waiting room restored from the database", "sale_id", sale.ID, "places", len(places), "drawn", d != nil)
	return nil
}

// leftFor is how long the rooms left read for a sale's guests stand: a
// step's worth, so what a guest reads is never staler than the queue.
const leftFor = AdmitTickDefault

// leftRead is a sale's rooms left as last read from the engine.
type leftRead struct {
	n   int
	err error
	at  time.Time
}

// left is the rooms the engine has left for the sale (over every night),
// read at most once a leftFor however many guests ask: every place read
// shows it (not loaded checks it: loaded), and the 10 000 streams one step
// wakes must not each ask the engine (on the distributed shape they did:
// Redis timed out under them and the stock engine's breaker opened,
// refusing every purchase of every sale).
func (w *waiter) left(ctx context.Context, saleID string) (int, error) {
	now := w.now()
	w.mu.Lock()
	r, ok := w.lefts[saleID]
	w.mu.Unlock()
	if ok && now.Sub(r.at) < leftFor && now.Sub(r.at) >= 0 {
		return r.n, r.err
	}
	v, err, _ := w.leftReads.Do(saleID, func() (any, error) {
		avail, err := w.engine.Available(ctx, saleID)
		w.remember(saleID, roomsLeft(avail), err)
		return roomsLeft(avail), err
	})
	return v.(int), err
}

// remember keeps a read of the sale's rooms left (left); a failure other
// than the sale's loss is not kept, so the next guest asks again.
func (w *waiter) remember(saleID string, n int, err error) {
	if err != nil && !errors.Is(err, flashsale.ErrNotLoaded) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lefts[saleID] = leftRead{n: n, err: err, at: w.now()}
}

// loaded is ErrNotLoaded while the engine has lost the sale (its queue
// with it, on one Redis) and the rebuild has not restored it.
//
// It asks the engine every time, never the cached read (left): a read from
// before a Redis restart would let a join make a new place in the empty
// queue, or tell a guest who has one they never joined (CI caught the
// second in TestWaitRoomRedisLost).
func (w *waiter) loaded(ctx context.Context, saleID string) error {
	_, err := w.engine.Available(ctx, saleID)
	if errors.Is(err, flashsale.ErrNotLoaded) {
		return flashsale.Errorf(flashsale.EUnavailable, "the waiting room is being restored; try again in a few seconds")
	}
	return nil // any other failure is the queue's own to answer
}

// unrecorded keeps a place whose record failed, so the guest's next join
// (told to try again) records it, and returns the error to answer with:
// the place stands in the queue, but is not promised until recorded.
func (w *waiter) unrecorded(saleID string, rec flashsale.PlaceRecord, err error) error {
	w.log.Error("waiting room: record a place", "sale_id", saleID, "err", err)
	w.mu.Lock()
	w.pending[saleID+"\x00"+rec.UserID] = rec
	w.mu.Unlock()
	return flashsale.Errorf(flashsale.EUnavailable, "your place could not be saved; try again")
}

// recordAgain records the user's place if its first record failed here.
func (w *waiter) recordAgain(ctx context.Context, saleID, userID string) error {
	key := saleID + "\x00" + userID
	w.mu.Lock()
	rec, ok := w.pending[key]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	if err := w.places.record(ctx, saleID, rec); err != nil {
		return w.unrecorded(saleID, rec, err)
	}
	w.mu.Lock()
	delete(w.pending, key)
	w.mu.Unlock()
	return nil
}

// placeLog records new places in the database a batch at a time (a group
// commit, like the order writer's), and a join waits for its batch: a
// guest is told of a place only once it is recorded.
type placeLog struct {
	records flashsale.QueueRecords
	in      chan placeWrite
}

type placeWrite struct {
	sale string
	rec  flashsale.PlaceRecord
	done chan error // capacity 1
}

// placeBatch bounds one batch's records.
const placeBatch = 512

// record records a place, once its batch commits.
func (l *placeLog) record(ctx context.Context, saleID string, rec flashsale.PlaceRecord) error {
	if l.records == nil {
		return nil
	}
	w := placeWrite{sale: saleID, rec: rec, done: make(chan error, 1)}
	select {
	case l.in <- w:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes the batches until ctx ends: each what came while the last
// was written, up to placeBatch.
func (l *placeLog) run(ctx context.Context) {
	for {
		var batch []placeWrite
		select {
		case w := <-l.in:
			batch = append(batch, w)
		case <-ctx.Done():
			return
		}
	fill:
		for len(batch) < placeBatch {
			select {
			case w := <-l.in:
				batch = append(batch, w)
			default:
				break fill
			}
		}
		bySale := map[string][]flashsale.PlaceRecord{}
		for _, w := range batch {
			bySale[w.sale] = append(bySale[w.sale], w.rec)
		}
		errs := map[string]error{}
		for sale, recs := range bySale {
			errs[sale] = l.records.RecordPlaces(ctx, sale, recs)
		}
		for _, w := range batch {
			w.done <- errs[w.sale]
		}
	}
}

// dropEnded forgets the queues this instance stepped whose sales are no
// longer live (ended, or deleted): their places go with them (a guest
// reading one then reads closed). Another instance may drop it first;
// dropping twice is no error.
func (w *waiter) dropEnded(ctx context.Context) {
	// The sales this instance holds a queue or a read of, then which of
	// them are live: waiter.mu and catalog.mu are leaves, never held
	// together.
	w.mu.Lock()
	stepped := slices.Collect(maps.Keys(w.rooms))
	var read []string // read for a sale that never started here
	for id := range w.lefts {
		if _, ok := w.rooms[id]; !ok {
			read = append(read, id)
		}
	}
	w.mu.Unlock()
	gone := slices.DeleteFunc(stepped, w.sales.isLive)
	if read = slices.DeleteFunc(read, w.sales.isLive); len(read) > 0 {
		w.mu.Lock()
		for _, id := range read {
			if _, ok := w.rooms[id]; !ok {
				delete(w.lefts, id)
			}
		}
		w.mu.Unlock()
	}
	for _, id := range gone {
		if err := w.queue.Drop(ctx, id); err != nil {
			w.log.Warn("waiting room: drop an ended sale's queue", "sale_id", id, "err", err)
			continue
		}
		w.mu.Lock()
		delete(w.rooms, id)
		delete(w.lefts, id)
		for key := range w.pending {
			if strings.HasPrefix(key, id+"\x00") {
				delete(w.pending, key)
			}
		}
		if ch := w.moved[id]; ch != nil { // its streams read closed
			close(ch)
			delete(w.moved, id)
		}
		w.mu.Unlock()
	}
}

// rate is the sale's admissions a second: its own, or its stock over
// derivedAdmitWindow (at least one a second).
func rate(sale *flashsale.Sale) float64 {
	if r := sale.WaitingRoom.AdmitPerSecond; r > 0 {
		return r
	}
	stock := 0
	for _, n := range sale.Nights {
		stock += n.Stock
	}
	return max(1, float64(stock)/derivedAdmitWindow.Seconds())
}

// settle records the queue's counts after a step and, if they changed
// (the front moved, an admission lapsed or was used, the sold-out flag
// turned), wakes the sale's streams. While the queue is meant to move
// (open and not paused) it also measures the pace its front moves at.
func (w *waiter) settle(saleID string, st flashsale.QueueStats, now time.Time, moving bool, set float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.rooms[saleID]
	if r == nil || r.at.IsZero() { // the first step here
		if r == nil {
			r = &roomState{}
			w.rooms[saleID] = r
		}
		r.stats, r.at, r.passed = st, now, passed(st)
		return
	}
	r.measure(st, now, moving && !st.SoldOut && !r.stats.SoldOut, set)
	if r.stats == st {
		return
	}
	r.stats = st
	if ch := w.moved[saleID]; ch != nil {
		close(ch)
		delete(w.moved, saleID)
	}
}

// passed is how many places have left a queue's front: admitted (live,
// used or lapsed) or skipped. A guest joining again after that counts
// once more.
func passed(st flashsale.QueueStats) int { return st.Admitted + st.Used + st.Expired }

// measure takes a sample of the places passed, at most one a second, into
// the pace's moving average; a sample while the queue stood still by
// design (sold out, paused) only moves the sample on.
func (r *roomState) measure(st flashsale.QueueStats, now time.Time, moving bool, set float64) {
	r.still = r.still || !moving
	dt := now.Sub(r.at)
	if dt < time.Second {
		return
	}
	n := passed(st)
	// A front that ran out of guests measures the joins, not the pace; one
	// held by the stock at any step of the sample (sold out, a room at a
	// time coming back), the holds, not the pace the queue moves at once
	// rooms are there to give.
	if !r.still && st.Drawn && n-r.passed < r.stats.Waiting {
		got := float64(max(n-r.passed, 0)) / dt.Seconds()
		if r.avg == 0 {
			r.avg = set // from the set rate: one short second is not the pace
		}
		r.avg += (1 - math.Exp(-dt.Seconds()/paceWindow.Seconds())) * (got - r.avg)
		r.pace = shown(r.pace, r.avg, set)
	}
	r.at, r.passed, r.still = now, n, false
}

// Margins of the pace a guest's ETA is computed at (shown): a little under
// what was measured, so a pace that wavers does not raise the ETAs of
// everyone behind, but lowered at once when the queue is really slower.
const (
	paceMargin = 0.95 // the shown pace is this much of the measured
	paceSlower = 0.9  // it drops once the measured is under this much of it
)

// shown is the pace ETAs are computed at, given the one shown so far (0:
// none yet), the measured average and the set rate: it rises with the
// measured pace at once (the ETAs fall), and falls only when that is
// paceSlower of it or less (the ETAs rise only when the queue is really
// slower than they said).
func shown(cur, avg, set float64) float64 {
	if cur == 0 {
		cur = paceMargin * set
	}
	if avg == 0 { // not measured yet
		return cur
	}
	if target := paceMargin * avg; target > cur || target < paceSlower*cur {
		return target
	}
	return cur
}

// pace is the rate the sale's queue front moves at: measured, once this
// instance has watched it move, or else the sale's admission rate.
func (w *waiter) pace(sale *flashsale.Sale) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := rate(sale)
	if r := w.rooms[sale.ID]; r != nil && r.pace > 0 {
		return max(r.pace, set/100) // a stalled front: long, not endless
	}
	return shown(0, 0, set)
}

// movedCh is closed when the sale's queue next moves.
func (w *waiter) movedCh(saleID string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.moved[saleID]
	if ch == nil {
		ch = make(chan struct{})
		w.moved[saleID] = ch
	}
	return ch
}

// queueOf is the sale's waiting room, or ErrNotFound for a sale without one.
func (s *Service) queueOf(ctx context.Context, saleID string) (*flashsale.Sale, error) {
	sale, err := s.sales.get(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if sale.WaitingRoom == nil || s.wait.queue == nil {
		return nil, flashsale.Errorf(flashsale.ENotFound, "this sale has no waiting room")
	}
	return sale, nil
}

// JoinQueue gives the user a place in the sale's waiting room, from
// prequeue_minutes before the start until the end; created is false when
// they had one already (the same place). A new place must fit the join
// limits (the instance's per-address and per-user rates, under keys of
// their own) and, on a sale with a proof-of-work challenge, carry its
// solution: a script must pay for each account it queues.
func (s *Service) JoinQueue(ctx context.Context, u flashsale.User, req flashsale.JoinRequest) (*flashsale.QueueView, bool, error) {
	sale, err := s.queueOf(ctx, req.SaleID)
	if err != nil {
		return nil, false, err
	}
	now := s.now()
	opens := sale.StartsAt.Add(-time.Duration(sale.WaitingRoom.PrequeueMinutes) * time.Minute)
	switch {
	case now.Before(opens):
		return nil, false, flashsale.Errorf(flashsale.ENotStarted, "the waiting room opens at %s", opens.UTC().Format(time.RFC3339))
	case !now.Before(sale.EndsAt):
		return nil, false, flashsale.ErrEnded
	}
	if p, err := s.wait.queue.Place(ctx, sale.ID, u.ID, now); err == nil && p.State != flashsale.QueueExpired {
		if err := s.wait.recordAgain(ctx, sale.ID, u.ID); err != nil {
			return nil, false, err
		}
		v, err := s.queueView(ctx, sale, p, now)
		return v, false, err
	}
	// A sale the engine lost (Redis restarted empty) has lost its queue
	// too: a new place now could take the place of one the rebuild will
	// restore, so joins wait for it.
	if err := s.wait.loaded(ctx, sale.ID); err != nil {
		return nil, false, err
	}
	// The puzzle before the limits: checking it costs one hash and no
	// I/O, and a request without a solution spends nothing.
	if sale.Challenge.Difficulty > 0 {
		if _, _, err := s.signer.solved(req.Challenge, req.Solution, u, sale, now); err != nil {
			return nil, false, err
		}
	}
	if err := s.joinLimits(ctx, u, sale, req.ClientIP); err != nil {
		return nil, false, err
	}
	p, created, err := s.wait.queue.Join(ctx, sale.ID, u.ID, now)
	if err != nil {
		return nil, false, err
	}
	if created {
		rec := flashsale.PlaceRecord{UserID: u.ID, Ticket: p.Ticket, Rank: p.Rank, JoinedAt: now}
		if err := s.wait.places.record(ctx, sale.ID, rec); err != nil {
			return nil, false, s.wait.unrecorded(sale.ID, rec, err)
		}
	}
	v, err := s.queueView(ctx, sale, p, now)
	return v, created, err
}

// joinLimits applies the instance's per-address and per-user purchase
// rates to joins, under keys of their own.
func (s *Service) joinLimits(ctx context.Context, u flashsale.User, sale *flashsale.Sale, ip string) error {
	l := s.admit.limiter
	if l == nil {
		return nil
	}
	if r := s.admit.limits.PerIP; ip != "" && !r.Off() {
		if err := flashsale.Take(ctx, l, "join-ip:"+ip, r, s.log); err != nil {
			return err
		}
	}
	if r := s.admit.limits.PerUser; !r.Off() {
		if err := flashsale.Take(ctx, l, "join-user:"+u.ID, r, s.log); err != nil {
			return err
		}
	}
	return nil
}

// QueueStatus is the user's place in the sale's waiting room;
// ErrNotFound if they never joined.
func (s *Service) QueueStatus(ctx context.Context, u flashsale.User, saleID string) (*flashsale.QueueView, error) {
	sale, err := s.queueOf(ctx, saleID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	p, err := s.wait.queue.Place(ctx, sale.ID, u.ID, now)
	if errors.Is(err, flashsale.ErrNotFound) && !now.Before(sale.EndsAt) {
		return &flashsale.QueueView{State: flashsale.QueueClosed}, nil // its queue was dropped at the end
	}
	if errors.Is(err, flashsale.ErrNotFound) {
		if err := s.wait.loaded(ctx, sale.ID); err != nil {
			return nil, err // not "you never joined": the queue may be lost
		}
	}
	if err != nil {
		return nil, err
	}
	return s.queueView(ctx, sale, p, now)
}

// queueView is a place as the guest reads it: with the ETA at the sale's
// rate (so it only falls as the place does), when to ask again, and the
// rooms left.
func (s *Service) queueView(ctx context.Context, sale *flashsale.Sale, p flashsale.Place, now time.Time) (*flashsale.QueueView, error) {
	v := &flashsale.QueueView{Ticket: p.Ticket, State: p.State, Ahead: p.Ahead}
	if (p.State == flashsale.QueueWaiting || p.State == flashsale.QueueSoldOut) && p.Rank > 0 {
		v.Position = p.Ahead + 1 // 0 before the draw: nobody's place is known
	}
	if !now.Before(sale.EndsAt) {
		v.State = flashsale.QueueClosed
	}
	wait := time.Duration(float64(p.Ahead) / s.wait.pace(sale) * float64(time.Second))
	if now.Before(sale.StartsAt) {
		wait += sale.StartsAt.Sub(now)
	}
	v.ETASeconds = int(math.Ceil(wait.Seconds()))
	poll := wait / 10
	if p.Rank == 0 && now.Before(sale.StartsAt) {
		// Before the draw every poller wants their place just after the
		// start: spread them over pollSpread by their ticket, so a
		// hundred thousand do not all ask in the same second.
		poll = sale.StartsAt.Sub(now) + spread(p.Ticket)
	}
	v.PollAfterMS = int(min(max(poll, time.Second), 10*time.Second) / time.Millisecond)
	if p.State == flashsale.QueueAdmitted && !p.Used {
		until := p.AdmittedUntil
		v.AdmittedUntil = &until
	}
	left, err := s.wait.left(ctx, sale.ID)
	if err != nil && !errors.Is(err, flashsale.ErrNotLoaded) {
		return nil, err
	}
	v.RoomsLeft = left
	return v, nil
}

// pollSpread is how long after the start the pollers of a prequeue come.
const pollSpread = 5 * time.Second

// spread is a guest's share of pollSpread, the same at every read.
func spread(ticket string) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(ticket))
	return time.Duration(h.Sum64() % uint64(pollSpread))
}

// roomsLeft is the units the engine has left over every night: the most
// guests that could still buy (each takes at least one).
func roomsLeft(avail []int) int {
	n := 0
	for _, a := range avail {
		n += a
	}
	return n
}

// QueueMoved is closed when the sale's queue next moves (an admission
// step admitted, skipped or lapsed someone, or it turned sold out or
// open): a guest's stream reads their place again then.
func (s *Service) QueueMoved(ctx context.Context, saleID string) (<-chan struct{}, error) {
	sale, err := s.queueOf(ctx, saleID)
	if err != nil {
		return nil, err
	}
	return s.wait.movedCh(sale.ID), nil
}

// QueueDraw is the sale's published draw: the commitment before the
// start; the seed, the tickets and the order once it is drawn.
func (s *Service) QueueDraw(ctx context.Context, saleID string) (*flashsale.Draw, error) {
	sale, err := s.queueOf(ctx, saleID)
	if err != nil {
		return nil, err
	}
	return s.draw(ctx, sale)
}

// draw is the sale's draw as published now (QueueDraw): the commitment
// before the start; from the start the whole draw, made if the admission
// loop has not made it yet; after the end the commitment and the seed.
func (s *Service) draw(ctx context.Context, sale *flashsale.Sale) (*flashsale.Draw, error) {
	now := s.now()
	if now.Before(sale.StartsAt) || !now.Before(sale.EndsAt) {
		seed := s.wait.seed(sale.ID)
		c, err := flashsale.DrawCommitment(sale.ID, seed)
		if err != nil {
			return nil, err
		}
		d := &flashsale.Draw{SaleID: sale.ID, Commitment: c}
		if !now.Before(sale.EndsAt) {
			// The queue, and the list of tickets with it, was dropped at
			// the end; the seed stays published.
			d.Seed = seed
		}
		return d, nil
	}
	d, err := s.wait.drawOf(ctx, sale.ID)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// QueueReport is the sale's queue as its operators watch it: the counts,
// the pace, and the draw's commitment (and seed, once drawn).
func (s *Service) QueueReport(ctx context.Context, saleID string) (*flashsale.QueueReport, error) {
	sale, err := s.queueOf(ctx, saleID)
	if err != nil {
		return nil, err
	}
	d, err := s.draw(ctx, sale)
	if err != nil {
		return nil, err
	}
	st, err := s.wait.queue.Stats(ctx, sale.ID, s.now()) // after the draw, so Drawn and the seed agree
	if err != nil {
		return nil, err
	}
	r := &flashsale.QueueReport{Stats: st, Rate: rate(sale), Commitment: d.Commitment}
	if st.Drawn || d.Seed != "" {
		r.Seed = d.Seed
	}
	return r, nil
}

// admitted is nil when the user may take a token of (or, without tokens,
// buy from) the sale: it has no waiting room, or it admitted them and the
// admission is live (or was used: a guest who bought may buy again, within
// the sale's limit). until is when a live admission lapses (zero
// otherwise): a token taken with it expires then too, so no purchase
// outlives the admission whose room it was promised.
//
// The admission is spent (Use) only once the purchase has taken its room
// (spend): until then it stays counted against the rooms left, so a step
// on another instance cannot hand the same room to the next in line while
// this guest is between their token and their purchase.
func (s *Service) admitted(ctx context.Context, u flashsale.User, sale *flashsale.Sale, now time.Time) (until time.Time, err error) {
	if sale.WaitingRoom == nil {
		return time.Time{}, nil
	}
	if s.wait.queue == nil {
		return time.Time{}, errNoQueue
	}
	p, err := s.wait.queue.Place(ctx, sale.ID, u.ID, now)
	switch {
	case errors.Is(err, flashsale.ErrNotFound):
		return time.Time{}, flashsale.ErrNotAdmitted
	case err != nil:
		return time.Time{}, err
	case p.State != flashsale.QueueAdmitted:
		return time.Time{}, flashsale.ErrNotAdmitted
	case p.Used:
		return time.Time{}, nil
	}
	return p.AdmittedUntil, nil
}

// spend marks the user's admission used once their purchase took its room,
// and records it. It cannot fail the purchase (the room is taken): an
// admission not marked stays counted until it lapses, which only slows
// the queue.
func (s *Service) spend(ctx context.Context, u flashsale.User, sale *flashsale.Sale) {
	if sale.WaitingRoom == nil || s.wait.queue == nil {
		return
	}
	err := s.wait.queue.Use(ctx, sale.ID, u.ID, s.now())
	if err == nil && s.wait.records != nil {
		err = s.wait.records.RecordUse(ctx, sale.ID, u.ID)
	}
	if err != nil && !errors.Is(err, flashsale.ErrNotAdmitted) {
		s.log.Warn("waiting room: mark an admission used", "sale_id", sale.ID, "err", err)
	}
}
