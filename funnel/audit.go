package funnel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// The audit (I6) compares what the database says with what the stock
// engine says, per sale, and repairs what drifted without ever touching
// the database's counters: the database is the truth.
//
// A finding counts only when two reads auditSettle apart both show it: an
// order caught between its database step and its engine step (the engine
// learns of a release a moment after the database committed it) is not
// reported, nor repaired.
//
// A repair does only what is safe and idempotent, order by order, and reads
// each order again just before acting on it:
//
//   - db_active_engine_inactive: Retake in the engine (first, and always:
//     if the engine's counts had kept the rooms, the retake makes it
//     undersell until a rebuild, never oversell);
//   - engine_active_db_final: Release in the engine, but only where the
//     night's units show the engine short of the rooms (after the retakes):
//     where the database's counters still count them, a release would let
//     the engine sell rooms the database refuses;
//   - stranded: publish again through Config.Republish; the order ID is the
//     primary key, so a second delivery is harmless;
//   - whatever else the engine has wrong (units_drift, engine_negative,
//     engine_not_loaded, an order the engine does not know, an order a rule
//     above left alone): rebuild the sale from the database, fenced; but
//     never while a stranded 202 remains (its republish failed, or there is
//     no republish path): the rebuild would drop its rooms and sell them
//     again, so the repair waits for the next audit instead.
//
// The database's own findings (db_oversold, db_counters_drift,
// user_over_limit, duplicate_key) are reported and left to an operator.

// Defaults of the audit.
const (
	// AuditIntervalDefault is how often the scheduled audit runs.
	AuditIntervalDefault = time.Minute
	// AuditGraceDefault is how long a reservation may go without its order
	// row before it is stranded rather than in flight, once the queue has
	// no backlog (while it has one, nothing is stranded: see
	// flashsale.AuditInput.Backlog). It covers a publish that is confirmed
	// but not yet consumed; a truly stranded order is rare (the relay
	// republishes what was never confirmed), so finding it late costs
	// little.
	AuditGraceDefault = 5 * time.Minute
	// PhantomIntervalDefault is how often the phantom watch compares
	// every live sale's engine figure with the database's: a phantom room
	// or a stranded unit is repaired within about two of them (issue 21
	// asks for 10 s).
	PhantomIntervalDefault = 4 * time.Second
	// auditSettle is how far apart an audit's two reads are.
	auditSettle = 200 * time.Millisecond
	// auditOutboxMax bounds the outbox entries one audit reads.
	auditOutboxMax = 100_000
	// auditTimeout bounds one sale's scheduled audit and repair (a rebuild
	// drains the queue first).
	auditTimeout = 3 * time.Minute
)

var (
	errReleaseUnsafe = errors.New("not released: the database's counters still count its rooms, so the engine would sell rooms the database refuses; left for a rebuild")
	errNoRepublish   = errors.New("no republish path is configured (Config.Republish): left in the engine")
	errStrandedLeft  = errors.New("not rebuilt: a stranded 202 is still in the engine alone, and a rebuild would sell its rooms again; left for the next audit")
	errEnded         = errors.New("the sale has ended: nothing left to sell, not rebuilt")
)

// auditor audits sales and repairs them: on demand (Audit, Repair) and on
// its own (run: the scheduled audit and the phantom watch, its two
// goroutines). It has no lock: a repair's rebuild goes through the healer.
type auditor struct {
	*parts
	sales      *catalog
	healing    *healer     // rebuilds, and the queue's backlog
	engineMode func() bool // whether the deployment sells from the engine

	interval, grace, phantom time.Duration
	republish                flashsale.OrderWriter
	// retained is, per current sale, the last hold's end this auditor
	// has told the engine to keep the sale for (see retain); auditAll's
	// goroutine's alone.
	retained map[string]time.Time
}

func newAuditor(cfg Config, p *parts, sales *catalog, healing *healer, engineMode func() bool) *auditor {
	return &auditor{parts: p, sales: sales, healing: healing, engineMode: engineMode,
		interval:  cmp.Or(cfg.AuditInterval, AuditIntervalDefault),
		grace:     cmp.Or(cfg.AuditGrace, AuditGraceDefault),
		phantom:   cmp.Or(cfg.PhantomInterval, PhantomIntervalDefault),
		republish: cfg.Republish,
		retained:  map[string]time.Time{},
	}
}

// Audit compares a sale's database and engine views and reports every
// finding that holds across two reads; ErrNotFound for an unknown sale.
func (s *Service) Audit(ctx context.Context, saleID string) (*flashsale.Audit, error) {
	return s.audit.checkBooks(ctx, saleID, false, nil)
}

// AuditDatabase audits the database's own rules alone (db_oversold,
// db_counters_drift, user_over_limit, duplicate_key), for a process that
// cannot see the engine: the embedded shape's engine lives in the memory
// of the process that serves.
func (s *Service) AuditDatabase(ctx context.Context, saleID string) (*flashsale.Audit, error) {
	return s.audit.checkBooks(ctx, saleID, true, nil)
}

// checkBooks reads twice, auditSettle apart, and keeps what both reads found.
// sent are reservations just published again, in flight from now.
func (a *auditor) checkBooks(ctx context.Context, saleID string, dbOnly bool, sent []flashsale.Reservation) (*flashsale.Audit, error) {
	first, err := a.auditOnce(ctx, saleID, dbOnly, sent)
	if err != nil || first.Balanced() || dbOnly {
		return first, err // the database's snapshot is one consistent read
	}
	t := time.NewTimer(auditSettle)
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, fmt.Errorf("audit sale=%s: %w", saleID, ctx.Err())
	case <-t.C:
	}
	second, err := a.auditOnce(ctx, saleID, dbOnly, sent)
	if err != nil {
		return nil, err
	}
	seen := make(map[findingKey]bool, len(first.Findings))
	for _, f := range first.Findings {
		seen[keyOf(f)] = true
	}
	kept := second.Findings[:0]
	for _, f := range second.Findings {
		if seen[keyOf(f)] {
			kept = append(kept, f)
		}
	}
	second.Findings = kept
	return second, nil
}

type findingKey struct {
	kind                   flashsale.FindingKind
	night, orderID, userID string
}

func keyOf(f flashsale.Finding) findingKey { return findingKey{f.Kind, f.Night, f.OrderID, f.UserID} }

// auditOnce takes the database's snapshot, then the engine's and the
// outbox's (in that order: an order placed in between is then young and in
// flight in the engine, never missing from it), and compares them.
func (a *auditor) auditOnce(ctx context.Context, saleID string, dbOnly bool, sent []flashsale.Reservation) (*flashsale.Audit, error) {
	if _, err := a.sales.get(ctx, saleID); err != nil {
		return nil, err
	}
	db, err := a.store.Snapshot(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("audit sale=%s: %w", saleID, err)
	}
	in := flashsale.AuditInput{DB: db, DatabaseOnly: dbOnly, Grace: a.grace, Sent: sent}
	if !dbOnly {
		eng, err := a.engine.Snapshot(ctx, saleID)
		switch {
		case errors.Is(err, flashsale.ErrNotLoaded):
		case err != nil:
			return nil, fmt.Errorf("audit sale=%s: engine: %w", saleID, err)
		default:
			in.Engine = eng
		}
		if ob := a.engine.Outbox; ob != nil && in.Engine != nil {
			un, err := ob.Unconfirmed(ctx, a.now(), auditOutboxMax)
			if err != nil {
				return nil, fmt.Errorf("audit sale=%s: outbox: %w", saleID, err)
			}
			in.Unconfirmed = un
		}
		if n, err := a.healing.drainer.Backlog(ctx); n > 0 || err != nil {
			in.Backlog = true
			if err != nil {
				a.log.Warn("audit: queue depth unknown; orders without their row count as in flight", "sale_id", saleID, "err", err)
			}
		}
	}
	in.Now = a.now()
	return flashsale.AuditSale(in), nil
}

// Repair audits a sale, does what is safe about its findings (see the top
// of this file), and returns a new audit with the steps it took. A step
// that failed, a rebuild among them, is in the report's Repairs with its
// error; the error returned is for an audit that could not run.
func (s *Service) Repair(ctx context.Context, saleID string) (*flashsale.Audit, error) {
	_, after, err := s.audit.repair(ctx, saleID)
	return after, err
}

func (a *auditor) repair(ctx context.Context, saleID string) (before, after *flashsale.Audit, err error) {
	before, err = a.checkBooks(ctx, saleID, false, nil)
	if err != nil {
		return nil, nil, err
	}
	if before.Balanced() {
		return before, before, nil
	}
	r := &repairer{a: a, saleID: saleID, drift: make([]int, len(before.Nights))}
	if before.Engine {
		for i, n := range before.Nights {
			r.drift[i] = n.Drift()
		}
	}
	// Retakes first: they can only make the engine undersell, and they tell
	// the releases after them which shortfalls are left.
	for _, kind := range []flashsale.FindingKind{flashsale.FindingDBActiveEngineInactive,
		flashsale.FindingEngineActiveDBFinal, flashsale.FindingStranded} {
		for _, f := range before.Findings {
			if f.Kind == kind {
				r.fix(ctx, f)
			}
		}
	}
	if after, err = a.checkBooks(ctx, saleID, false, r.sent); err != nil {
		return nil, nil, err
	}
	if engineWrong(after) {
		sale, serr := a.sales.get(ctx, saleID)
		switch {
		case a.engine.Outbox != nil && has(after, flashsale.FindingStranded):
			r.step(flashsale.RepairRebuild, "", errStrandedLeft)
		case serr != nil:
			r.step(flashsale.RepairRebuild, "", serr)
		case !a.now().Before(sale.EndsAt):
			r.step(flashsale.RepairRebuild, "", errEnded)
		default:
			r.step(flashsale.RepairRebuild, "", a.healing.rebuild(ctx, saleID))
			// Audit again even after a rebuild that failed: it may have
			// closed the sale before it gave up.
			if after, err = a.checkBooks(ctx, saleID, false, r.sent); err != nil {
				return nil, nil, err
			}
		}
	}
	after.Repairs = r.steps
	return before, after, nil
}

// engineWrong reports whether a finding is one a rebuild of the engine from
// the database would settle.
func engineWrong(a *flashsale.Audit) bool {
	for _, f := range a.Findings {
		switch f.Kind {
		case flashsale.FindingDBOversold, flashsale.FindingDBCountersDrift,
			flashsale.FindingUserOverLimit, flashsale.FindingDuplicateKey:
		default:
			return true
		}
	}
	return false
}

// has reports whether a has a finding of kind.
func has(a *flashsale.Audit, kind flashsale.FindingKind) bool {
	for _, f := range a.Findings {
		if f.Kind == kind {
			return true
		}
	}
	return false
}

// repairer is one repair's state: the steps so far, the drift per night as
// the repairs so far left it, and what was published again.
type repairer struct {
	a      *auditor
	saleID string
	drift  []int
	steps  []flashsale.RepairStep
	sent   []flashsale.Reservation
}

func (r *repairer) step(action flashsale.RepairAction, orderID string, err error) {
	r.steps = append(r.steps, flashsale.RepairStep{Action: action, OrderID: orderID, Err: err})
}

// shift records that the engine's units of res's stay changed by delta.
func (r *repairer) shift(res *flashsale.Reservation, delta int) {
	for i := max(res.FirstNight, 0); i < min(res.FirstNight+res.Nights, len(r.drift)); i++ {
		r.drift[i] += delta
	}
}

// short reports whether the engine is short of at least res's rooms on
// every night of its stay.
func (r *repairer) short(res *flashsale.Reservation) bool {
	for i := max(res.FirstNight, 0); i < min(res.FirstNight+res.Nights, len(r.drift)); i++ {
		if r.drift[i] > -res.Rooms {
			return false
		}
	}
	return true
}

func (r *repairer) fix(ctx context.Context, f flashsale.Finding) {
	switch f.Kind {
	case flashsale.FindingDBActiveEngineInactive:
		r.retake(ctx, f.OrderID)
	case flashsale.FindingEngineActiveDBFinal:
		r.release(ctx, f.OrderID)
	case flashsale.FindingStranded:
		r.republish(ctx, f.OrderID)
	}
}

// reservation reads an order's engine record; nil when the engine has none
// or it belongs to another sale.
func (r *repairer) reservation(ctx context.Context, action flashsale.RepairAction, orderID string) *flashsale.Reservation {
	res, err := r.a.engine.Reservation(ctx, orderID)
	if err != nil {
		if !errors.Is(err, flashsale.ErrNotFound) {
			r.step(action, orderID, err)
		}
		return nil
	}
	if res.SaleID != r.saleID {
		return nil
	}
	return res
}

// retake makes the engine count an order the database has active.
func (r *repairer) retake(ctx context.Context, id string) {
	a := r.a
	o, err := a.store.Order(ctx, id)
	if err != nil {
		r.step(flashsale.RepairRetake, id, err)
		return
	}
	if !o.Status.Active() {
		return // it ended meanwhile
	}
	res := r.reservation(ctx, flashsale.RepairRetake, id)
	if res == nil || res.Active {
		return // unknown to the engine (the rebuild's), or taken again meanwhile
	}
	if err := a.engine.Retake(ctx, r.saleID, id); err != nil {
		r.step(flashsale.RepairRetake, id, err)
		return
	}
	r.shift(res, -res.Rooms)
	// The mirror of release's recheck: if the hold ended while we retook
	// it, give the units back.
	if now, err := a.store.Order(ctx, id); err == nil && !now.Status.Active() {
		if err := a.engine.Release(ctx, r.saleID, id); err == nil {
			r.shift(res, res.Rooms)
		}
		return
	}
	r.step(flashsale.RepairRetake, id, nil)
}

// release gives the engine back the rooms of an order the database ended.
func (r *repairer) release(ctx context.Context, id string) {
	a := r.a
	o, err := a.store.Order(ctx, id)
	if err != nil {
		r.step(flashsale.RepairRelease, id, err)
		return
	}
	if o.Status.Active() {
		return // paid meanwhile
	}
	res := r.reservation(ctx, flashsale.RepairRelease, id)
	if res == nil || !res.Active {
		return
	}
	if !r.short(res) {
		r.step(flashsale.RepairRelease, id, errReleaseUnsafe)
		return
	}
	if err := a.engine.Release(ctx, r.saleID, id); err != nil {
		r.step(flashsale.RepairRelease, id, err)
		return
	}
	r.shift(res, res.Rooms)
	if now, err := a.store.Order(ctx, id); err == nil && now.Status.Active() {
		a.reactivate(ctx, now) // a late payment landed meanwhile
		r.shift(res, -res.Rooms)
		return
	}
	r.step(flashsale.RepairRelease, id, nil)
}

// republish sends a stranded reservation down the order path again.
func (r *repairer) republish(ctx context.Context, id string) {
	a := r.a
	if a.republish == nil {
		if a.engine.Outbox != nil {
			// The engine sits in front of a queue: the reservation is a 202.
			r.step(flashsale.RepairRepublish, id, errNoRepublish)
		}
		// Otherwise a 202 is a database row: this reservation never got
		// one, and the rebuild drops it.
		return
	}
	if _, err := a.store.Order(ctx, id); !errors.Is(err, flashsale.ErrNotFound) {
		if err != nil {
			r.step(flashsale.RepairRepublish, id, err)
		}
		return // landed meanwhile
	}
	res := r.reservation(ctx, flashsale.RepairRepublish, id)
	if res == nil || !res.Active {
		return
	}
	status, err := a.republish.Write(ctx, res)
	switch {
	case err == nil, errors.Is(err, flashsale.ErrIndeterminate):
		r.sent = append(r.sent, *res)
	case status == flashsale.OrderFailed:
		// The database refused it and recorded it failed: its units go back.
		if rerr := a.engine.Release(ctx, r.saleID, id); rerr != nil {
			err = errors.Join(err, rerr)
		} else {
			err = fmt.Errorf("the database refused it (recorded failed, units released): %w", err)
		}
	}
	r.step(flashsale.RepairRepublish, id, err)
}

// run runs the scheduled audit and the phantom watch until ctx ends, and
// returns once both have; at once if AuditInterval is negative.
func (a *auditor) run(ctx context.Context) {
	if a.interval < 0 {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { every(ctx, a.interval, nil, a.auditAll) })
	if a.phantom >= 0 {
		seen := map[string][]int{} // the watch's goroutine's alone
		wg.Go(func() { every(ctx, a.phantom, nil, func(ctx context.Context) { a.watchPhantoms(ctx, seen) }) })
	}
	wg.Wait()
}

// watchPhantoms is the cheap half of the audit, run often: for each live
// sale, the engine's units left against the database's (stock − held −
// sold), one read each. Every change keeps the engine at or below the
// database (a purchase takes from the engine before the database counts
// it; a release and added rooms reach the database first), and the engine
// is read first, so an engine figure above the database's is a phantom
// room, certain, that the engine would sell and the database refuse (a
// 202 ending failed): it is logged at warn, and the sale gets the full
// audit and its repair (a fenced rebuild) at once.
//
// An engine figure below the database's is what a purchase in flight
// looks like, and also what stranded units look like (a hold the database
// expired whose release never reached the engine: the instance died in
// between; units taken in the engine by hand). Only the full audit tells
// them apart, order by order, and it reads every order of the sale, too
// much to run every interval of a storm. So the shortfall per night is
// remembered (short, per sale), and the sale gets the full audit, quietly
// (a balanced audit logs nothing; a finding is logged and repaired as the
// scheduled audit's are), when the same shortfall is seen at two watches
// in a row: purchases in flight come and go and move it, stranded units
// stay. A storm hides stranded units until it pauses or sells out; then
// they are repaired within about two intervals.
//
// The engine is read for every live sale in one call (AvailableOf), then
// the database in one query (NightStocksOf), still engine first: a read
// per sale each made an idle instance's cost grow with the number of
// sales nobody buys (issue 26).
func (a *auditor) watchPhantoms(ctx context.Context, short map[string][]int) {
	if !a.engineMode() {
		return
	}
	live := a.sales.live()
	for id := range short {
		if !slices.Contains(live, id) {
			delete(short, id)
		}
	}
	if len(live) == 0 {
		return
	}
	// An error leaves out the sales the engine did not answer for (a
	// shard down: the breaker's); the others are watched all the same.
	engines, _ := a.engine.AvailableOf(ctx, live)
	loaded := make([]string, 0, len(engines))
	for _, id := range live {
		if _, ok := engines[id]; ok {
			loaded = append(loaded, id) // the others are not loaded (the heal loop's) or not answering
		}
	}
	if len(loaded) == 0 {
		return
	}
	stocks, err := a.store.NightStocksOf(ctx, loaded)
	if err != nil {
		return
	}
	for _, id := range loaded {
		if ctx.Err() != nil {
			return
		}
		engine, nights := engines[id], stocks[id]
		if nights == nil {
			continue // deleted meanwhile
		}
		phantom := false
		var gap []int // the engine's shortfall per night, nil when it has none
		for i, n := range nights {
			if i >= len(engine) {
				break
			}
			if engine[i] > n.Available {
				a.log.Warn("phantom rooms: the stock engine has more rooms left than the database allows; auditing and repairing now",
					"sale_id", id, "night", n.Date, "engine_available", engine[i], "database_available", n.Available)
				phantom = true
				break
			}
			if d := n.Available - engine[i]; d > 0 {
				if gap == nil {
					gap = make([]int, len(nights))
				}
				gap[i] = d
			}
		}
		switch {
		case phantom:
			delete(short, id)
			a.auditAndRepair(ctx, id)
		case gap == nil:
			delete(short, id)
		case slices.Equal(gap, short[id]):
			delete(short, id)
			a.auditAndRepair(ctx, id)
		default:
			short[id] = gap
		}
	}
}

// auditAll audits and repairs every current sale.
func (a *auditor) auditAll(ctx context.Context) {
	if !a.engineMode() {
		return // the engine is being left or rebuilt: its drift is expected
	}
	sales, err := a.store.Sales(ctx, a.now())
	if err != nil {
		a.log.Error("audit: list sales", "err", err)
		return
	}
	current := make(map[string]bool, len(sales))
	for _, sale := range sales {
		if ctx.Err() != nil {
			return
		}
		current[sale.ID] = true
		a.sales.put(sale)
		a.retain(ctx, sale)
		a.auditAndRepair(ctx, sale.ID)
	}
	for id := range a.retained {
		if !current[id] {
			delete(a.retained, id)
		}
	}
}

// retain tells the engine to keep sale until its last hold can end
// (StockKeeper.Retain), once per end this auditor has not yet seen. It is
// the retry of UpdateSale's: a later end whose Retain failed there (the
// engine unreachable at that moment) is saved all the same, and repeating
// the edit changes nothing, so nothing else would extend the keys before
// they expired on the old day mid-sale. Every instance's first audit does
// it for every current sale, then only for a later end.
func (a *auditor) retain(ctx context.Context, sale *flashsale.Sale) {
	until := sale.EndsAt.Add(sale.HoldDuration())
	if done, ok := a.retained[sale.ID]; ok && !until.After(done) {
		return
	}
	// Not loaded: a load (the heal loop's) takes the end it reads then.
	if err := a.engine.Retain(ctx, sale); err != nil && !errors.Is(err, flashsale.ErrNotLoaded) {
		a.log.Warn("audit: the stock engine did not take the sale's end; retrying at the next audit", "sale_id", sale.ID, "ends_at", sale.EndsAt, "err", err)
		return
	}
	a.retained[sale.ID] = until
}

// auditAndRepair is one sale's scheduled audit: every finding is logged at
// warn, then what the repair did, then what it left.
func (a *auditor) auditAndRepair(ctx context.Context, saleID string) {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	before, after, err := a.repair(ctx, saleID)
	if err != nil {
		a.obs.Audited(saleID, 0, 0, err)
		a.log.Error("audit", "sale_id", saleID, "err", err)
		return
	}
	a.obs.Audited(saleID, len(before.Findings), len(after.Findings), nil)
	if before.Balanced() {
		a.log.Debug("audit: balanced", "sale_id", saleID)
		return
	}
	for _, f := range before.Findings {
		a.log.Warn("audit finding", findingAttrs(saleID, f)...)
	}
	for _, st := range after.Repairs {
		if st.Err != nil {
			a.log.Warn("audit repair failed", "sale_id", saleID, "action", st.Action, "order_id", st.OrderID, "err", st.Err)
		} else {
			a.log.Info("audit repaired", "sale_id", saleID, "action", st.Action, "order_id", st.OrderID)
		}
	}
	for _, f := range after.Findings {
		a.log.Warn("audit finding remains after repair", findingAttrs(saleID, f)...)
	}
}

func findingAttrs(saleID string, f flashsale.Finding) []any {
	attrs := []any{slog.String("sale_id", saleID), slog.String("kind", string(f.Kind))}
	if f.Night != "" {
		attrs = append(attrs, slog.String("night", f.Night))
	}
	if f.OrderID != "" {
		attrs = append(attrs, slog.String("order_id", f.OrderID))
	}
	if f.UserID != "" {
		attrs = append(attrs, slog.String("user_id", f.UserID))
	}
	return append(attrs, slog.String("detail", f.Detail))
}
