package redis

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
)

// QueueTTL is how long a queue's keys outlive its last join or draw (an
// admission refreshes it too), so a queue nobody dropped still goes.
const QueueTTL = 7 * 24 * time.Hour

var (
	//go:embed queue.lua
	queueLua string
	//go:embed queue_join.lua
	queueJoinLua string
	//go:embed queue_place.lua
	queuePlaceLua string
	//go:embed queue_draw.lua
	queueDrawLua string
	//go:embed queue_admit.lua
	queueAdmitLua string
	//go:embed queue_use.lua
	queueUseLua string
	//go:embed queue_stats.lua
	queueStatsLua string
	//go:embed queue_restore.lua
	queueRestoreLua string

	queueJoinScript    = goredis.NewScript(queueSource(queueJoinLua))
	queuePlaceScript   = goredis.NewScript(queueSource(queuePlaceLua))
	queueDrawScript    = goredis.NewScript(queueSource(queueDrawLua))
	queueAdmitScript   = goredis.NewScript(queueSource(queueAdmitLua))
	queueUseScript     = goredis.NewScript(queueSource(queueUseLua))
	queueStatsScript   = goredis.NewScript(queueSource(queueStatsLua))
	queueRestoreScript = goredis.NewScript(queueSource(queueRestoreLua))
)

// queueSource is body behind queue.lua's shared functions and the reply
// names (scriptSource), all on body's first line so that Redis's line
// numbers in an error still match body's file.
func queueSource(body string) string {
	var lib []string
	for line := range strings.Lines(queueLua) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
			lib = append(lib, line)
		}
	}
	return scriptSource(strings.Join(lib, " ") + " " + body)
}

// Queue is the distributed shape's flashsale.Queue: each sale's waiting
// room in Redis, every instance reading and stepping the same one. Each
// method is one script (Draw and Restore a read and a write that checks
// the read still holds), so it is atomic however
// many instances call at once, and the admission clock lives with the
// queue. The keys of a sale share its hash tag, so each script touches one
// Cluster slot:
//
//	<prefix>{<sale>}:queue         hash: epoch, tail, drawn, seed, head, used, expired, soldout, owed, last
//	<prefix>{<sale>}:queue:places  hash: user id -> place (queue.lua: state, index, seen, until, ticket)
//	<prefix>{<sale>}:queue:line    list: the user ids still waiting, in order, from index head on ('' a slot passed)
//	<prefix>{<sale>}:queue:live    sorted set: user id of each live admission, scored by its end (ms)
//	<prefix>{<sale>}:queue:draw    string: the draw's order, tickets separated by spaces
//	<prefix>{<sale>}:queue:ranks   string: 4 bytes a drawn place, its index in the order at its arrival index
//
// As in inmem.Queue, a place keeps its index in the order and the queue
// the index of its first waiting place (head), so a guest's Ahead is one
// subtraction; admission pops the line from the front (O(1) a place), a
// place that joins again after it expired is pushed at the back, and
// lapsing reads only the live admissions that ended. A place drawn keeps
// its arrival index, which the ranks string maps to its index in the
// order, so the draw writes a few keys rather than every place: drawn is
// how many places it ranked that way (0 after a Restore, which writes
// every index out). Times are the ones the callers give, to the
// millisecond, never Redis's clock.
type Queue struct {
	client goredis.UniversalClient
	prefix string
	ttl    string // QueueTTL in ms, as the scripts take it
	// between, when set, runs between the read and the write of a Draw
	// or a Restore (tests).
	between func()
}

var _ flashsale.Queue = (*Queue)(nil)

// ErrQueueStale is the answer of a queue that another Redis process kept
// (a restart from a snapshot or an AOF, a replica promoted): its places may
// be behind the database's, so it refuses everything (queue.lua's fence)
// until the funnel's rebuild restores it from its records (Restore).
var ErrQueueStale = flashsale.Errorf(flashsale.EUnavailable,
	"the waiting room is being restored after a Redis restart; try again in a few seconds")

// queueErr is a queue script's error: ErrQueueStale for the fence's
// refusal, else Redis unavailable.
func queueErr(op, saleID string, err error) error {
	if strings.HasPrefix(err.Error(), "STALE ") {
		return fmt.Errorf("%s: sale=%s: %w", op, saleID, ErrQueueStale)
	}
	return unavailable(op+": sale="+saleID, err)
}

// NewQueue returns the queues under prefix (default PrefixDefault) on the
// Redis or Cluster that c talks to.
func NewQueue(c goredis.UniversalClient, prefix string) *Queue {
	return &Queue{client: c, prefix: cmp.Or(prefix, PrefixDefault), ttl: strconv.FormatInt(QueueTTL.Milliseconds(), 10)}
}

// Queue returns the waiting rooms' queues on the engine's Redis, their
// keys under the engine's prefix.
func (e *Engine) Queue() *Queue { return NewQueue(e.client, e.prefix) }

// keys are saleID's queue keys in the order the scripts take them.
func (q *Queue) keys(saleID string) []string {
	base := q.prefix + "{" + saleID + "}:queue"
	return []string{base, base + ":places", base + ":line", base + ":live", base + ":draw", base + ":ranks"}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Join implements flashsale.Queue.
func (q *Queue) Join(ctx context.Context, saleID, userID string, at time.Time) (flashsale.Place, bool, error) {
	r, err := queueJoinScript.Run(ctx, q.client, q.keys(saleID), userID, ms(at), ulid.Make().String(), q.ttl).Slice()
	if err != nil {
		return flashsale.Place{}, false, queueErr("queue join", saleID, err)
	}
	switch code(r) {
	case replyOK, replyExisting:
		p, err := placeOf(r[1:])
		if err != nil {
			return flashsale.Place{}, false, fmt.Errorf("queue join: sale=%s: %w", saleID, err)
		}
		return p, code(r) == replyOK, nil
	case replySoldOut:
		return flashsale.Place{}, false, flashsale.ErrSoldOut
	}
	return flashsale.Place{}, false, fmt.Errorf("queue join: sale=%s: unexpected reply %v", saleID, r)
}

// Place implements flashsale.Queue.
func (q *Queue) Place(ctx context.Context, saleID, userID string, at time.Time) (flashsale.Place, error) {
	r, err := queuePlaceScript.Run(ctx, q.client, q.keys(saleID), userID, ms(at)).Slice()
	if err != nil {
		return flashsale.Place{}, queueErr("queue place", saleID, err)
	}
	if len(r) == 0 {
		return flashsale.Place{}, flashsale.ErrNotFound
	}
	p, err := placeOf(r[1:])
	if err != nil {
		return flashsale.Place{}, fmt.Errorf("queue place: sale=%s: %w", saleID, err)
	}
	return p, nil
}

// placeStates are the scripts' one-letter states (queue.lua).
var placeStates = map[string]flashsale.QueueState{
	"w": flashsale.QueueWaiting, "a": flashsale.QueueAdmitted, "u": flashsale.QueueAdmitted,
	"e": flashsale.QueueExpired, "s": flashsale.QueueSoldOut,
}

// placeOf reads a script's view of a place: {ticket, state, rank, ahead,
// until ms}.
func placeOf(v []any) (flashsale.Place, error) {
	if len(v) != 5 {
		return flashsale.Place{}, fmt.Errorf("place reply %v", v)
	}
	ticket, _ := v[0].(string)
	s, _ := v[1].(string)
	state, ok := placeStates[s]
	rank, _ := v[2].(int64)
	ahead, _ := v[3].(int64)
	until, _ := v[4].(int64)
	if ticket == "" || !ok {
		return flashsale.Place{}, fmt.Errorf("place reply %v", v)
	}
	p := flashsale.Place{Ticket: ticket, State: state, Rank: int(rank), Ahead: int(ahead), Used: s == "u"}
	if until > 0 {
		p.AdmittedUntil = time.UnixMilli(until).UTC()
	}
	return p, nil
}

// drawTries bounds Draw's read-and-write rounds; only a Drop between the
// two makes one fail, so a second round all but always succeeds.
const drawTries = 5

// Draw implements flashsale.Queue. The shuffle is computed here, between
// a read of the places taken (prequeue) and a write that only
// the first draw makes (queue_draw.lua); joins between the two go behind
// the drawn places, in arrival order, like every join after the draw. The
// write is the new line and two strings (the ranks and the order), not a
// write of every place, so Redis is busy with it briefly however many
// joined.
func (q *Queue) Draw(ctx context.Context, saleID, seedHex string) (flashsale.Draw, error) {
	keys := q.keys(saleID)
	for range drawTries {
		drawn, tail, epoch, pre, err := q.prequeue(ctx, keys)
		if err != nil {
			return flashsale.Draw{}, fmt.Errorf("queue draw: sale=%s: %w", saleID, err)
		}
		if drawn {
			return q.drawn(ctx, saleID)
		}
		tickets := make([]string, len(pre))
		for i, p := range pre {
			tickets[i] = p.ticket
		}
		order, err := flashsale.DrawOrder(seedHex, tickets)
		if err != nil {
			return flashsale.Draw{}, err
		}
		commitment, err := flashsale.DrawCommitment(saleID, seedHex)
		if err != nil {
			return flashsale.Draw{}, err
		}
		if q.between != nil {
			q.between()
		}
		byTicket := make(map[string]int, len(pre)) // ticket -> arrival index
		for i, p := range pre {
			byTicket[p.ticket] = i
		}
		ranks := make([]byte, 4*len(pre))
		args := make([]any, 0, 6+len(order))
		args = append(args, seedHex, epoch, tail, ranks, strings.Join(order, " "), q.ttl)
		for rank, t := range order {
			i := byTicket[t]
			binary.BigEndian.PutUint32(ranks[4*i:], uint32(rank))
			args = append(args, pre[i].user)
		}
		w, err := queueDrawScript.Run(ctx, q.client, keys, args...).Slice()
		if err != nil {
			return flashsale.Draw{}, queueErr("queue draw", saleID, err)
		}
		switch code(w) {
		case replyOK:
			slices.Sort(tickets)
			return flashsale.Draw{SaleID: saleID, Commitment: commitment, Seed: seedHex, Tickets: tickets, Order: order}, nil
		case replyExisting:
			return q.drawn(ctx, saleID)
		}
	}
	return flashsale.Draw{}, fmt.Errorf("queue draw: sale=%s: the queue changed under %d draws: %w", saleID, drawTries, flashsale.ErrUnavailable)
}

// prequeue reads what the draw shuffles: whether the queue is drawn and,
// if not, the joins so far (the tail), the queue's epoch (queue_join.lua)
// and its places (all waiting, since nobody is admitted before the draw)
// in arrival order. The places are read only while the queue is not
// drawn (a later Draw does not fetch them all), in one MULTI with the
// tail, so they are the tail's.
func (q *Queue) prequeue(ctx context.Context, keys []string) (drawn bool, tail int, epoch string, pre []prequeued, err error) {
	if drawn, err := q.client.HExists(ctx, keys[0], "drawn").Result(); err != nil || drawn {
		if err != nil {
			err = unavailable("prequeue", err)
		}
		return drawn, 0, "", nil, err
	}
	var head *goredis.SliceCmd
	var places *goredis.MapStringStringCmd
	if _, err := q.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		head = p.HMGet(ctx, keys[0], "drawn", "tail", "epoch")
		places = p.HGetAll(ctx, keys[1])
		return nil
	}); err != nil {
		return false, 0, "", nil, unavailable("prequeue", err)
	}
	h := head.Val()
	if h[0] != nil {
		return true, 0, "", nil, nil
	}
	if t, ok := h[1].(string); ok {
		if tail, err = strconv.Atoi(t); err != nil {
			return false, 0, "", nil, fmt.Errorf("prequeue: tail %q", t)
		}
	}
	epoch, _ = h[2].(string)
	pre, err = prequeueOf(places.Val(), tail)
	return false, tail, epoch, pre, err
}

// prequeued is a place joined before the draw.
type prequeued struct{ user, ticket string }

// prequeueOf puts places (user -> place) in arrival order: before the
// draw their indices are 0 to tail-1, each once.
func prequeueOf(places map[string]string, tail int) ([]prequeued, error) {
	if len(places) != tail {
		return nil, fmt.Errorf("prequeue: %d places for %d joins", len(places), tail)
	}
	pre := make([]prequeued, tail)
	for user, rec := range places {
		p, ok := parsePlace(user, rec)
		if !ok || p.state != 'w' || p.index < 0 || p.index >= tail || pre[p.index].user != "" {
			return nil, fmt.Errorf("prequeue: place %q of %q", rec, user)
		}
		pre[p.index] = prequeued{user: user, ticket: p.ticket}
	}
	return pre, nil
}

// drawn is the draw the queue stored.
func (q *Queue) drawn(ctx context.Context, saleID string) (flashsale.Draw, error) {
	keys := q.keys(saleID)
	var seed *goredis.StringCmd
	var order *goredis.StringCmd
	if _, err := q.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		seed = p.HGet(ctx, keys[0], "seed")
		order = p.Get(ctx, keys[4])
		return nil
	}); err != nil {
		return flashsale.Draw{}, queueErr("queue draw", saleID, err)
	}
	d := flashsale.Draw{SaleID: saleID, Seed: seed.Val(), Order: strings.Fields(order.Val())}
	commitment, err := flashsale.DrawCommitment(saleID, d.Seed)
	if err != nil {
		return flashsale.Draw{}, fmt.Errorf("queue draw: sale=%s: the stored seed: %w", saleID, err)
	}
	d.Commitment = commitment
	d.Tickets = slices.Sorted(slices.Values(d.Order))
	return d, nil
}

// Admit implements flashsale.Queue.
func (q *Queue) Admit(ctx context.Context, saleID string, at time.Time, rule flashsale.AdmitRule) (flashsale.Admission, error) {
	r, err := queueAdmitScript.Run(ctx, q.client, q.keys(saleID), ms(at), rule.For.Milliseconds(), rule.IdleAfter.Milliseconds(),
		strconv.FormatFloat(rule.Rate, 'g', -1, 64), rule.Left, q.ttl, rule.Used).Slice()
	if err != nil {
		return flashsale.Admission{}, queueErr("queue admit", saleID, err)
	}
	if len(r) == 3 {
		stats, ok1 := r[0].([]any)
		admitted, ok2 := stringsOf(r[1])
		skipped, ok3 := stringsOf(r[2])
		if st, ok := statsOf(stats); ok && ok1 && ok2 && ok3 {
			return flashsale.Admission{Admitted: admitted, Skipped: skipped, Stats: st}, nil
		}
	}
	return flashsale.Admission{}, fmt.Errorf("queue admit: sale=%s: unexpected reply %v", saleID, r)
}

// stringsOf reads a script's array of strings.
func stringsOf(v any) ([]string, bool) {
	a, ok := v.([]any)
	if !ok {
		return nil, false
	}
	s := make([]string, len(a))
	for i, e := range a {
		if s[i], ok = e.(string); !ok {
			return nil, false
		}
	}
	return s, true
}

// statsOf reads queue.lua's stats(): {drawn, joined, live, used, expired,
// sold out}.
func statsOf(r []any) (flashsale.QueueStats, bool) {
	if len(r) != 6 {
		return flashsale.QueueStats{}, false
	}
	var n [6]int
	for i, v := range r {
		x, ok := v.(int64)
		if !ok {
			return flashsale.QueueStats{}, false
		}
		n[i] = int(x)
	}
	joined, live, used, expired := n[1], n[2], n[3], n[4]
	return flashsale.QueueStats{
		Drawn: n[0] == 1, Joined: joined, Waiting: joined - live - used - expired,
		Admitted: live, Used: used, Expired: expired, SoldOut: n[5] == 1,
	}, true
}

// Use implements flashsale.Queue.
func (q *Queue) Use(ctx context.Context, saleID, userID string, at time.Time) error {
	n, err := queueUseScript.Run(ctx, q.client, q.keys(saleID), userID, ms(at)).Int()
	if err != nil {
		return queueErr("queue use", saleID, err)
	}
	if n != 1 {
		return flashsale.ErrNotAdmitted
	}
	return nil
}

// Stats implements flashsale.Queue.
func (q *Queue) Stats(ctx context.Context, saleID string, at time.Time) (flashsale.QueueStats, error) {
	r, err := queueStatsScript.Run(ctx, q.client, q.keys(saleID), ms(at)).Slice()
	if err != nil {
		return flashsale.QueueStats{}, queueErr("queue stats", saleID, err)
	}
	st, ok := statsOf(r)
	if !ok {
		return flashsale.QueueStats{}, fmt.Errorf("queue stats: sale=%s: unexpected reply %v", saleID, r)
	}
	return st, nil
}

// Drop implements flashsale.Queue. The keys share a slot, so one UNLINK
// takes them all, on a Cluster too, and frees a long queue's memory off
// Redis's main thread.
func (q *Queue) Drop(ctx context.Context, saleID string) error {
	if err := q.client.Unlink(ctx, q.keys(saleID)...).Err(); err != nil {
		return unavailable("queue drop: sale="+saleID, err)
	}
	return nil
}

// restoreTries bounds Restore's read-and-write rounds: a round fails only
// if the queue moved between its read and its write.
const restoreTries = 5

// Restore implements flashsale.Queue. It is the recovery path, rare and
// O(places): it reads the whole queue in one MULTI, merges it with the
// records in Go as inmem.Queue does (the same rules: ranks stand, a slot
// nobody holds stays passed, of a place and a record the higher rank
// wins, of one place the further progress), and writes the queue back
// with one script (queue_restore.lua) that refuses if the queue moved in
// between (a join, a step, a use, a lapse), and then reads again. A read
// of a place (its seen mark) in between is not seen and may be undone.
func (q *Queue) Restore(ctx context.Context, saleID string, d *flashsale.Draw, recs []flashsale.PlaceRecord, at time.Time) error {
	keys := q.keys(saleID)
	for range restoreTries {
		cur, err := q.read(ctx, keys)
		if err != nil {
			return fmt.Errorf("queue restore: sale=%s: %w", saleID, err)
		}
		if q.between != nil {
			q.between()
		}
		args := restored(cur, d, recs, at)
		args = append([]any{cur.fingerprint, ms(at), q.ttl, ulid.Make().String()}, args...)
		r, err := queueRestoreScript.Run(ctx, q.client, keys, args...).Slice()
		if err != nil {
			return unavailable("queue restore: sale="+saleID, err)
		}
		if code(r) == replyOK {
			return nil
		}
	}
	return fmt.Errorf("queue restore: sale=%s: the queue moved under %d restores: %w", saleID, restoreTries, flashsale.ErrUnavailable)
}

// qplace is a place as Restore handles it (queue.lua's fields, the index
// the place's in the order).
type qplace struct {
	user, ticket string
	state        byte // w, a, u, e (queue.lua)
	index        int
	seen, until  int64 // unix ms
}

// queueState is a whole queue as Restore reads it.
type queueState struct {
	drawn       bool
	seed, order string
	places      []*qplace // in index order
	fingerprint string    // what queue_restore.lua compares
}

// read is the whole queue, with each place's index in the order.
func (q *Queue) read(ctx context.Context, keys []string) (*queueState, error) {
	var (
		head         *goredis.MapStringStringCmd
		places       *goredis.MapStringStringCmd
		ranks, order *goredis.StringCmd
		live         *goredis.IntCmd
	)
	if _, err := q.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		head = p.HGetAll(ctx, keys[0])
		places = p.HGetAll(ctx, keys[1])
		live = p.ZCard(ctx, keys[3])
		order = p.Get(ctx, keys[4])
		ranks = p.Get(ctx, keys[5])
		return nil
	}); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, unavailable("read", err)
	}
	h := head.Val()
	drawnField, drawn := h["drawn"]
	st := &queueState{drawn: drawn, seed: h["seed"], order: order.Val()}
	st.fingerprint = strings.Join([]string{h["tail"], h["head"], h["used"], h["expired"], drawnField,
		strconv.Itoa(len(places.Val())), strconv.FormatInt(live.Val(), 10)}, ",")
	mapped, _ := strconv.Atoi(drawnField)
	r := []byte(ranks.Val())
	for user, rec := range places.Val() {
		p, ok := parsePlace(user, rec)
		if !ok {
			return nil, fmt.Errorf("read: place %q of %q", rec, user)
		}
		if drawn && p.index < mapped {
			if 4*p.index+4 > len(r) {
				return nil, fmt.Errorf("read: no rank for arrival %d", p.index)
			}
			p.index = int(binary.BigEndian.Uint32(r[4*p.index:]))
		}
		st.places = append(st.places, p)
	}
	slices.SortFunc(st.places, func(a, b *qplace) int { return cmp.Compare(a.index, b.index) })
	return st, nil
}

// parsePlace reads queue.lua's place: <state><index>,<seen>,<until>,<ticket>.
func parsePlace(user, rec string) (*qplace, bool) {
	f := strings.SplitN(rec, ",", 4)
	if len(f) != 4 || len(f[0]) < 2 || f[3] == "" {
		return nil, false
	}
	index, err1 := strconv.Atoi(f[0][1:])
	seen, err2 := strconv.ParseInt(f[1], 10, 64)
	until, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, false
	}
	return &qplace{user: user, ticket: f[3], state: f[0][0], index: index, seen: seen, until: until}, true
}

// restored merges cur with the records as inmem.Queue's Restore does and
// returns queue_restore.lua's ARGV from its fifth on.
func restored(cur *queueState, d *flashsale.Draw, recs []flashsale.PlaceRecord, at time.Time) []any {
	drawn, seed, order := cur.drawn, cur.seed, cur.order
	if d != nil && !drawn {
		drawn, seed, order = true, d.Seed, strings.Join(d.Order, " ")
	}
	rankIn := map[string]int{} // ticket -> rank in the draw
	if drawn {
		for i, t := range strings.Fields(order) {
			rankIn[t] = i + 1
		}
	}
	type keyed struct {
		p      *qplace
		rank   int
		back   int64 // for places without a rank: the join (ns), or the old index
		record bool
	}
	all := map[string]*keyed{}
	for _, p := range cur.places {
		k := &keyed{p: p, back: int64(p.index)}
		if cur.drawn {
			k.rank = p.index + 1
		} else {
			k.rank = rankIn[p.ticket]
		}
		all[p.user] = k
	}
	progress := func(p *qplace) int {
		switch p.state {
		case 'u':
			return 2
		case 'w':
			return 0
		}
		return 1
	}
	for _, rec := range recs {
		rp := &qplace{user: rec.UserID, ticket: rec.Ticket, state: 'w', seen: ms(at)}
		switch {
		case rec.Used:
			rp.state, rp.until = 'u', ms(rec.AdmittedUntil)
		case !rec.AdmittedUntil.IsZero():
			rp.state, rp.until = 'a', ms(rec.AdmittedUntil)
		case rec.Skipped:
			rp.state = 'e'
		}
		rank := rec.Rank
		if rank == 0 {
			rank = rankIn[rec.Ticket] // 0 if not in the draw
		}
		k := &keyed{p: rp, rank: rank, back: rec.JoinedAt.UnixNano(), record: true}
		switch c := all[rec.UserID]; {
		case c == nil || k.rank > c.rank:
			all[rec.UserID] = k
		case k.rank == c.rank && c.p.ticket == rp.ticket && progress(rp) > progress(c.p):
			c.p.state, c.p.until = rp.state, rp.until
		}
	}
	ks := slices.Collect(maps.Values(all))
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(ks, func(a, b *keyed) int {
		// By rank; then the unranked: those the queue had, in its order,
		// before the records', by their joins.
		return cmp.Or(cmp.Compare(b2i(a.rank == 0), b2i(b.rank == 0)), cmp.Compare(a.rank, b.rank),
			cmp.Compare(b2i(a.record), b2i(b.record)), cmp.Compare(a.back, b.back), cmp.Compare(a.p.user, b.p.user))
	})
	// A ranked place goes back to its slot (rank - 1), so ranks stand; a
	// slot nobody holds stays passed (nil); the unranked, and a second
	// claim on a slot, go to the back.
	var slots, back []*qplace
	for _, k := range ks {
		if k.rank == 0 || k.rank <= len(slots) {
			back = append(back, k.p)
			continue
		}
		for len(slots) < k.rank-1 {
			slots = append(slots, nil)
		}
		slots = append(slots, k.p)
	}
	slots = append(slots, back...)
	head, used, expired := -1, 0, 0
	var places, live []any
	for i, p := range slots {
		if p == nil {
			continue
		}
		p.index = i
		places = append(places, p.user, fmt.Sprintf("%c%d,%d,%d,%s", p.state, p.index, p.seen, p.until, p.ticket))
		switch p.state {
		case 'w':
			if head < 0 {
				head = i
			}
		case 'e':
			expired++
		case 'u':
			used++
		default:
			live = append(live, p.until, p.user)
		}
	}
	switch {
	case !drawn:
		head = 0 // the prequeue: nobody has left it
	case head < 0:
		head = len(slots) // nobody waits
	}
	var line []any
	for _, p := range slots[head:] {
		if p == nil {
			line = append(line, "")
		} else {
			line = append(line, p.user)
		}
	}
	if !drawn {
		seed, order = "", ""
	}
	args := []any{head, len(slots), used, expired, seed, order, len(places) / 2, len(line), len(live) / 2}
	args = append(args, places...)
	args = append(args, line...)
	return append(args, live...)
}
