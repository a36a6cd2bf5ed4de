package inmem

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/oklog/ulid/v2"
)

// Queue is the embedded shape's flashsale.Queue: every sale's waiting room
// in this process's memory, behind one lock per sale.
//
// A sale's places are one slice in the queue's order (the draw's, then
// arrival); head is the first still waiting. Every place between head and
// a waiting guest is waiting too (admission and skipping move head past a
// place, and a place that joins again is appended anew), so a guest's
// Ahead is their index minus head: one subtraction per read, however long
// the queue.
type Queue struct {
	mu    sync.Mutex // over rooms
	rooms map[string]*room
}

// NewQueue returns an empty Queue.
func NewQueue() *Queue { return &Queue{rooms: map[string]*room{}} }

type room struct {
	mu      sync.Mutex
	drawn   bool
	draw    flashsale.Draw
	order   []*place // the queue's order; before the draw, arrival order
	head    int      // index in order of the first place not yet admitted or skipped
	byUser  map[string]*place
	soldOut bool
	// low is set by a step that found no room for those waiting, with the
	// used count it saw (lowUsed): the flag turns sold out at the next
	// such step only if no admission was used in between (queuetest
	// SoldOutSettles).
	low     bool
	lowUsed int
	// live are the admissions not yet used or lapsed, in admission order:
	// few (the funnel admits no more than the rooms left), so lapsing
	// walks them, never the queue.
	live          []*place
	used, expired int // places in those states
	// owed is the admissions the rate owes as of last (the clock).
	owed float64
	last time.Time
}

type place struct {
	ticket, user string
	index        int // in room.order
	state        flashsale.QueueState
	seen         time.Time
	until        time.Time
	used         bool
}

func (q *Queue) room(saleID string, create bool) *room {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.rooms[saleID]
	if r == nil && create {
		r = &room{byUser: map[string]*place{}}
		q.rooms[saleID] = r
	}
	return r
}

// Join implements flashsale.Queue.
func (q *Queue) Join(_ context.Context, saleID, userID string, at time.Time) (flashsale.Place, bool, error) {
	r := q.room(saleID, true)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lapse(at)
	p := r.byUser[userID]
	if p != nil && p.state != flashsale.QueueExpired {
		p.seen = at
		return r.view(p), false, nil
	}
	if r.soldOut {
		return flashsale.Place{}, false, flashsale.ErrSoldOut
	}
	if p != nil { // expired: to the back, under the same ticket
		r.expired--
		r.order[p.index] = &place{state: flashsale.QueueExpired} // its old slot stays passed
		p = &place{ticket: p.ticket, user: userID}
	} else {
		p = &place{ticket: ulid.Make().String(), user: userID}
	}
	p.index, p.state, p.seen = len(r.order), flashsale.QueueWaiting, at
	r.order = append(r.order, p)
	r.byUser[userID] = p
	return r.view(p), true, nil
}

// Place implements flashsale.Queue.
func (q *Queue) Place(_ context.Context, saleID, userID string, at time.Time) (flashsale.Place, error) {
	r := q.room(saleID, false)
	if r == nil {
		return flashsale.Place{}, flashsale.ErrNotFound
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lapse(at)
	p := r.byUser[userID]
	if p == nil {
		return flashsale.Place{}, flashsale.ErrNotFound
	}
	p.seen = at
	return r.view(p), nil
}

// Draw implements flashsale.Queue.
func (q *Queue) Draw(_ context.Context, saleID, seedHex string) (flashsale.Draw, error) {
	r := q.room(saleID, true)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drawn {
		return r.draw, nil
	}
	tickets := make([]string, 0, len(r.order))
	byTicket := make(map[string]*place, len(r.order))
	for _, p := range r.order[r.head:] {
		if p.state == flashsale.QueueWaiting {
			tickets = append(tickets, p.ticket)
			byTicket[p.ticket] = p
		}
	}
	order, err := flashsale.DrawOrder(seedHex, tickets)
	if err != nil {
		return flashsale.Draw{}, err
	}
	r.order = r.order[:0]
	for i, t := range order {
		p := byTicket[t]
		p.index = i
		r.order = append(r.order, p)
	}
	commitment, err := flashsale.DrawCommitment(saleID, seedHex)
	if err != nil {
		return flashsale.Draw{}, err
	}
	r.head = 0
	r.drawn = true
	r.draw = flashsale.Draw{SaleID: saleID, Commitment: commitment, Seed: seedHex, Tickets: slices.Sorted(slices.Values(tickets)), Order: order}
	return r.draw, nil
}

// Admit implements flashsale.Queue.
func (q *Queue) Admit(_ context.Context, saleID string, at time.Time, rule flashsale.AdmitRule) (flashsale.Admission, error) {
	r := q.room(saleID, false)
	if r == nil {
		return flashsale.Admission{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lapse(at)
	if !r.drawn {
		return flashsale.Admission{Stats: r.stats()}, nil
	}
	// room is what Left allows; sure is room less the admissions used
	// since Left was read, which may have taken their rooms after the read
	// (or before it: then sure counts them twice). Admissions go by sure
	// (never one too many); the flag opens only when sure says so, and
	// turns sold out only when room says so at two steps in a row with no
	// admission used between them: a purchase that took its room before
	// Left was read but spends its admission after this step is counted
	// twice by room too, and it has spent it by the next step.
	room := rule.Left - len(r.live)
	sure := room - max(r.used-rule.Used, 0)
	n := min(int(r.owe(at, rule.Rate)), sure)
	var a flashsale.Admission
	for len(a.Admitted) < n && r.head < len(r.order) {
		p := r.order[r.head]
		r.head++
		if p.state != flashsale.QueueWaiting {
			continue // joined again further back
		}
		if rule.IdleAfter > 0 && at.Sub(p.seen) > rule.IdleAfter {
			p.state = flashsale.QueueExpired
			r.expired++
			a.Skipped = append(a.Skipped, p.user)
			continue
		}
		p.state, p.until = flashsale.QueueAdmitted, at.Add(rule.For)
		r.live = append(r.live, p)
		a.Admitted = append(a.Admitted, p.user)
	}
	r.owed -= float64(len(a.Admitted))
	switch {
	case room-len(a.Admitted) > 0:
		r.low = false
		if sure-len(a.Admitted) > 0 {
			r.soldOut = false
		}
	case r.low && r.lowUsed == r.used:
		r.soldOut = true
	default:
		r.low, r.lowUsed = true, r.used
	}
	a.Stats = r.stats()
	return a, nil
}

// owe adds what rate owes since the last step to r.owed (nothing at the
// first step, and at most a second's worth) and returns it.
func (r *room) owe(at time.Time, rate float64) float64 {
	limit := max(rate, 1)
	switch {
	case r.last.IsZero(): // the first step starts the clock
	case at.After(r.last):
		r.owed = min(r.owed+rate*at.Sub(r.last).Seconds(), limit)
	default: // another instance's step was later (clocks differ a little)
		return r.owed
	}
	r.last = at
	return r.owed
}

// Use implements flashsale.Queue.
func (q *Queue) Use(_ context.Context, saleID, userID string, at time.Time) error {
	r := q.room(saleID, false)
	if r == nil {
		return flashsale.ErrNotAdmitted
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lapse(at)
	p := r.byUser[userID]
	switch {
	case p == nil || p.state != flashsale.QueueAdmitted:
		return flashsale.ErrNotAdmitted
	case !p.used:
		p.used = true
		r.used++
		r.live = slices.DeleteFunc(r.live, func(l *place) bool { return l == p })
	}
	return nil
}

// Stats implements flashsale.Queue.
func (q *Queue) Stats(_ context.Context, saleID string, at time.Time) (flashsale.QueueStats, error) {
	r := q.room(saleID, false)
	if r == nil {
		return flashsale.QueueStats{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lapse(at)
	return r.stats(), nil
}

func (r *room) stats() flashsale.QueueStats {
	return flashsale.QueueStats{
		Drawn: r.drawn, Joined: len(r.byUser),
		Waiting:  len(r.byUser) - len(r.live) - r.used - r.expired,
		Admitted: len(r.live), Used: r.used, Expired: r.expired, SoldOut: r.soldOut,
	}
}

// Drop implements flashsale.Queue.
func (q *Queue) Drop(_ context.Context, saleID string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.rooms, saleID)
	return nil
}

// Restore implements flashsale.Queue: it merges the records with the
// places the room has, then lays the order out again by rank.
func (q *Queue) Restore(_ context.Context, saleID string, d *flashsale.Draw, recs []flashsale.PlaceRecord, at time.Time) error {
	r := q.room(saleID, true)
	r.mu.Lock()
	defer r.mu.Unlock()
	wasDrawn := r.drawn
	if d != nil && !r.drawn {
		r.drawn, r.draw = true, *d
	}
	drawn := map[string]int{} // ticket → rank in the draw
	if r.drawn {
		for i, t := range r.draw.Order {
			drawn[t] = i + 1
		}
	}
	// key orders the places: by rank once drawn (the prequeue's from the
	// draw, one not in it at the back by its join), else by arrival.
	type keyed struct {
		p      *place
		rank   int
		back   int64 // for places without a rank: the join, in ns, or the old index
		record bool
	}
	rankOf := func(rank int, ticket string) int {
		if rank == 0 {
			return drawn[ticket] // 0 if not in the draw
		}
		return rank
	}
	all := map[string]*keyed{}
	for _, p := range r.order {
		if p.user == "" || r.byUser[p.user] != p {
			continue // a slot left behind by a guest who joined again
		}
		k := &keyed{p: p, back: int64(p.index)}
		if wasDrawn {
			k.rank = p.index + 1
		} else {
			k.rank = drawn[p.ticket]
		}
		all[p.user] = k
	}
	for _, rec := range recs {
		rp := &place{ticket: rec.Ticket, user: rec.UserID, state: flashsale.QueueWaiting, seen: at}
		switch {
		case rec.Used:
			rp.state, rp.until, rp.used = flashsale.QueueAdmitted, rec.AdmittedUntil, true
		case !rec.AdmittedUntil.IsZero():
			rp.state, rp.until = flashsale.QueueAdmitted, rec.AdmittedUntil
		case rec.Skipped:
			rp.state = flashsale.QueueExpired
		}
		k := &keyed{p: rp, rank: rankOf(rec.Rank, rec.Ticket), back: rec.JoinedAt.UnixNano(), record: true}
		cur := all[rec.UserID]
		switch {
		case cur == nil || k.rank > cur.rank:
			all[rec.UserID] = k
		case k.rank == cur.rank && cur.p.ticket == rp.ticket && progress(rp) > progress(cur.p):
			cur.p.state, cur.p.until, cur.p.used = rp.state, rp.until, rp.used
		}
	}
	ks := slices.Collect(maps.Values(all))
	slices.SortStableFunc(ks, func(a, b *keyed) int {
		// By rank; then the unranked: those the room had, in its order,
		// before the records', by their joins.
		if c := cmp.Compare(b2i(a.rank == 0), b2i(b.rank == 0)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		if c := cmp.Compare(b2i(a.record), b2i(b.record)); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.back, b.back), cmp.Compare(a.p.user, b.p.user))
	})
	// A ranked place goes back to its slot (rank - 1), so ranks stand; a
	// slot nobody holds (left by a guest who joined again) stays passed;
	// the unranked, and a second claim on a slot, go to the back.
	r.order, r.live, r.used, r.expired = r.order[:0], r.live[:0], 0, 0
	r.byUser = make(map[string]*place, len(ks))
	var back []*place
	for _, k := range ks {
		if k.rank == 0 || k.rank <= len(r.order) {
			back = append(back, k.p)
			continue
		}
		for len(r.order) < k.rank-1 {
			r.order = append(r.order, &place{state: flashsale.QueueExpired, index: len(r.order)})
		}
		r.order = append(r.order, k.p)
	}
	r.order = append(r.order, back...)
	r.head = -1
	for i, p := range r.order {
		p.index = i
		if p.user == "" {
			continue
		}
		r.byUser[p.user] = p
		switch {
		case p.state == flashsale.QueueWaiting:
			if r.head < 0 {
				r.head = i
			}
		case p.state == flashsale.QueueExpired:
			r.expired++
		case p.used:
			r.used++
		default:
			r.live = append(r.live, p)
		}
	}
	switch {
	case !r.drawn:
		r.head = 0 // the prequeue: nobody has left it
	case r.head < 0:
		r.head = len(r.order) // nobody waits
	}
	r.lapse(at)
	return nil
}

// progress orders a place's states: waiting, then admitted or skipped,
// then used.
func progress(p *place) int {
	switch {
	case p.used:
		return 2
	case p.state == flashsale.QueueWaiting:
		return 0
	}
	return 1
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lapse expires the admissions that ended by at unused.
func (r *room) lapse(at time.Time) {
	r.live = slices.DeleteFunc(r.live, func(p *place) bool {
		if !at.After(p.until) {
			return false
		}
		p.state = flashsale.QueueExpired
		r.expired++
		return true
	})
}

// view is p as the guest sees it.
func (r *room) view(p *place) flashsale.Place {
	v := flashsale.Place{Ticket: p.ticket, State: p.state, AdmittedUntil: p.until, Used: p.used}
	if r.drawn {
		v.Rank = p.index + 1
	}
	if p.state == flashsale.QueueWaiting {
		if r.drawn {
			v.Ahead = p.index - r.head
		}
		if r.soldOut {
			v.State = flashsale.QueueSoldOut
		}
	}
	return v
}
