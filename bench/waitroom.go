package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The waiting-room scenario (issue 24, `flashsale bench --waiting-room N`):
// N guests join a sale's waiting room before its start; some follow their
// place on its event stream, the others poll it; at the start the queue
// admits them at the sale's rate and the admitted take a token and buy,
// until the rooms are gone and everyone still waiting is told sold_out.
// What it measures is what the issue asks of one instance: the joins'
// throughput and latency, how late each waiting guest hears sold_out
// after the last room was taken, that nothing is oversold and every
// admitted guest could buy, what the server's memory holds per waiter,
// and whether a guest's ETA ever rose while they waited.

// Defaults of the waiting-room scenario.
const (
	// WaitStreamsDefault is how many waiters follow the stream; the rest poll.
	WaitStreamsDefault = 10_000
	// WaitRateDefault is the sale's admit_per_second.
	WaitRateDefault = 50
	// WaitLeadDefault is how long after every stream is open the sale
	// starts: the streams' last moment before the draw.
	WaitLeadDefault = 2 * time.Second
	// WaitAdmissionSeconds is the sale's admission_seconds.
	WaitAdmissionSeconds = 30
	// SoldOutWithin is how long after the last room was taken every
	// waiting streamer must have heard sold_out, or the run fails.
	SoldOutWithin = 10 * time.Second
	// streamOpeners is how many streams are being opened at once: the
	// listen backlog is finite.
	streamOpeners = 128
	// pollAfterMax is the longest poll_after_ms the server asks for.
	pollAfterMax = 10 * time.Second
)

// The waiting room's invariants, beside Verify's.
const (
	InvJoined   = "joined"             // every guest got a place (201)
	InvAdmitted = "admitted_could_buy" // every admitted guest's token and purchase were accepted: none admitted beyond the stock
	InvSoldOut  = "sold_out_pushed"    // every streamer without a room heard sold_out within SoldOutWithin of the last room
)

// WaitRoom is one waiting-room run against a server.
type WaitRoom struct {
	Client  *Client
	Waiters int // guests who join before the start
	// Streams is how many of them follow the stream (a stream refused
	// with 429, the server's cap per address, polls instead); the rest
	// poll GET /api/sales/{id}/queue as poll_after_ms says.
	Streams int
	Stock   int     // rooms (one night)
	Rate    float64 // the sale's admit_per_second
	Conns   int     // joins and polls in flight at once
	Lead    time.Duration
	// FirstPoll bounds when each poller's first read after the start is
	// set comes (uniformly within it); 0: the pace its join was told, as
	// a page that has polled since it joined.
	FirstPoll time.Duration
	Users     string // prefixes every user ID
	Real      bool   // a real sale, not a test sale
	Drain     time.Duration
	// Metrics is the server's /metrics, read for its memory (empty: not read).
	Metrics  string
	Progress io.Writer // a line per phase (nil: none)
}

// WaitRoomReport is what a waiting-room run measured; --json writes it.
type WaitRoomReport struct {
	Target  string   `json:"target"`
	SaleID  string   `json:"sale_id"`
	Notes   []string `json:"notes,omitempty"`
	Waiters int      `json:"waiters"`
	Streams int      `json:"streams"` // streams that opened
	// StreamsRefused were refused (429) and polled instead; Pollers
	// counts them.
	StreamsRefused int     `json:"streams_refused"`
	Pollers        int     `json:"pollers"`
	Stock          int     `json:"stock"`
	Rate           float64 `json:"admit_per_second"`
	Conns          int     `json:"conns"`

	Join JoinStats `json:"join"`
	// StreamsOpenSeconds is how long opening the streams took.
	StreamsOpenSeconds float64 `json:"streams_open_s"`

	Admitted int `json:"admitted"` // guests who read "admitted"
	Bought   int `json:"bought"`   // purchases answered 202
	// Refused are admitted guests whose token or purchase was refused
	// (RefusedCodes says with what): admitted beyond what they could buy.
	Refused      int            `json:"refused"`
	RefusedCodes map[string]int `json:"refused_codes,omitempty"`
	Lost         int            `json:"lost"` // purchases whose answer was lost
	// LastRoomS is from the start to the last 202; RoomsLeftZeroS to the
	// first read of rooms_left 0 for good.
	LastRoomS      float64 `json:"last_room_s"`
	RoomsLeftZeroS float64 `json:"rooms_left_zero_s"`
	// RoomsLeftFlickers counts reads of rooms_left 0 that a read of more
	// came after.
	RoomsLeftFlickers int `json:"rooms_left_flickers"`

	// SoldOut is, for the streamers who did not buy, the time from the
	// last 202 to their sold_out (negative: told before it, as the queue
	// is sold out once every room left is promised to an admitted guest);
	// FanOut the same from the first streamer told; PollSoldOut the
	// pollers' SoldOut.
	SoldOut     Spread `json:"sold_out"`
	FanOut      Spread `json:"fan_out"`
	PollSoldOut Spread `json:"poll_sold_out"`
	// NeverTold counts streamers without a room who never heard sold_out;
	// Reopened the guests who heard it and then waited or were admitted
	// again; Failed the guests whose place ended otherwise (expired,
	// closed, a stream or poll that broke).
	NeverTold int `json:"never_told"`
	Reopened  int `json:"reopened"`
	Failed    int `json:"failed"`
	// Expired counts the places that expired: an admission that lapsed
	// before the guest read it, or a guest skipped as idle. Either means
	// the generator fell behind its guests.
	Expired    int `json:"expired"`
	Polls      int `json:"polls"`
	PollErrors int `json:"poll_errors"` // reads tried again: transport, 429, 5xx

	ETA ETAStats `json:"eta"`

	// Memory is the server's at each phase (when its metrics were read).
	Memory []MemSample `json:"memory,omitempty"`
	// PerWaiterKiB is the resident memory the joins added, per waiter;
	// PerStreamKiB what opening the streams added, per stream.
	PerWaiterKiB float64 `json:"per_waiter_kib,omitempty"`
	PerStreamKiB float64 `json:"per_stream_kib,omitempty"`
	MemMissing   string  `json:"memory_missing,omitempty"`

	// Queue is the server's own report of the queue at the end.
	Queue *QueueReport `json:"queue,omitempty"`

	Check      *Check      `json:"check"`
	Invariants []Invariant `json:"invariants"`
	OK         bool        `json:"ok"`
}

// JoinStats is the join phase: answers, rate and latency in milliseconds.
type JoinStats struct {
	Count     int            `json:"count"`
	Created   int            `json:"created"` // 201s
	Codes     map[string]int `json:"codes,omitempty"`
	Seconds   float64        `json:"seconds"`
	PerSecond float64        `json:"per_second"`
	P50       float64        `json:"p50_ms"`
	P90       float64        `json:"p90_ms"`
	P99       float64        `json:"p99_ms"`
	Max       float64        `json:"max_ms"`
}

// Spread is a distribution of signed times in milliseconds, exact (every
// value is kept: one per guest).
type Spread struct {
	Count int     `json:"count"`
	Early int     `json:"early,omitempty"` // below zero
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// ETAStats is eta_seconds as the guests read it.
type ETAStats struct {
	// Followed counts the guests who read their place after the draw
	// while waiting; Rose those whose ETA rose between two such reads.
	Followed     int     `json:"followed"`
	Rose         int     `json:"rose"`
	RoseFraction float64 `json:"rose_fraction"`
	// AtDraw counts the guests whose first ETA after the draw was above
	// their last before it (before the draw it counts to the start only);
	// its fraction is of the guests who read it on both sides.
	AtDraw         int     `json:"rose_at_draw"`
	AtDrawFraction float64 `json:"rose_at_draw_fraction"`
	// ErrorP50 and ErrorMax are, for admitted streamers, how far the
	// admission came from what their first ETA after the draw promised,
	// in seconds.
	ErrorP50 float64 `json:"error_p50_s"`
	ErrorMax float64 `json:"error_max_s"`
}

// MemSample is the server's memory at one phase.
type MemSample struct {
	Phase      string  `json:"phase"`
	RSSMiB     float64 `json:"rss_mib"`
	HeapMiB    float64 `json:"heap_inuse_mib"`
	Goroutines int     `json:"goroutines"`
}

// QueueReport is GET /api/admin/sales/{id}/queue.
type QueueReport struct {
	Drawn    bool `json:"drawn"`
	Joined   int  `json:"joined"`
	Waiting  int  `json:"waiting"`
	Admitted int  `json:"admitted"`
	Used     int  `json:"used"`
	Expired  int  `json:"expired"`
	SoldOut  bool `json:"sold_out"`
}

// place is a guest's place as the queue endpoints answer it.
type place struct {
	State       string `json:"state"`
	Position    int    `json:"position"`
	Ahead       int    `json:"ahead"`
	ETASeconds  int    `json:"eta_seconds"`
	PollAfterMS int    `json:"poll_after_ms"`
	RoomsLeft   int    `json:"rooms_left"`
	// AdmittedUntil is when an unused admission lapses.
	AdmittedUntil time.Time `json:"admitted_until"`
}

// waitingRoomSale is a Sale with a waiting room.
type waitingRoomSale struct {
	Sale
	WaitingRoom struct {
		PrequeueMinutes  int     `json:"prequeue_minutes"`
		AdmitPerSecond   float64 `json:"admit_per_second"`
		AdmissionSeconds int     `json:"admission_seconds"`
	} `json:"waiting_room"`
}

// waiter is one guest. Only the goroutine following the guest (stream or
// poll) writes it while the run lasts; the report reads it after.
type waiter struct {
	user   string
	stream bool
	failed bool
	// pollAfter is what the join answered: a page polls at that pace
	// from its join on. until is the admission's admitted_until.
	pollAfter time.Duration
	until     time.Time
	expired   bool // the place expired: skipped, or an admission lapsed unread
	// told is the first sold_out; admitted the first admission; bought
	// the 202.
	told, admitted, bought time.Time
	tried, reopened        bool
	decided                bool
	// ETA: the last read while waiting, whether one came after the draw,
	// and the first after it (when, and what it said).
	eta               int
	preDraw, drawn    bool
	etaRose, drawRose bool
	firstDrawnAt      time.Time
	firstDrawnETA     int
}

// dataPrefix starts an event's data line.
var dataPrefix = []byte("data: ")

// waitRun is one run's shared state.
type waitRun struct {
	cfg    WaitRoom
	saleID string
	// buyer is the admitted guests' client: its own connections, so a
	// purchase never queues in the generator behind other guests' polls.
	buyer   *Client
	streams *http.Client // one connection a stream, no timeout but the run's
	guests  []waiter
	decided atomic.Int64
	polls   atomic.Int64
	// pollErrors counts reads that failed and were tried again.
	pollErrors atomic.Int64
	start      time.Time // when the sale starts; the main goroutine's
	// startNS is start for the followers (Unix ns, 0 until set), and
	// knownNS when the edit that set it was answered.
	startNS, knownNS atomic.Int64

	mu        sync.Mutex
	accepted  []Accepted
	lost      int
	last202   time.Time
	zeroAt    time.Time // the first read of rooms_left 0 since lastRooms
	lastRooms time.Time // the last read of rooms_left above 0
	flickers  int       // reads of 0 followed by one of more
	refused   map[string]int
	failCodes map[string]int
}

// RunWaitingRoom runs the waiting-room scenario and checks its invariants.
func RunWaitingRoom(ctx context.Context, cfg WaitRoom) (*WaitRoomReport, error) {
	if cfg.Client == nil || cfg.Waiters < 1 || cfg.Stock < 1 || cfg.Streams < 0 || cfg.Rate <= 0 || cfg.Conns < 1 {
		return nil, fmt.Errorf("bench: waiting room %d waiters, %d rooms, %d streams, rate %g, %d conns: want waiters, rooms, a rate and conns",
			cfg.Waiters, cfg.Stock, cfg.Streams, cfg.Rate, cfg.Conns)
	}
	cfg.Streams = min(cfg.Streams, cfg.Waiters)
	cfg.Lead = cmp.Or(cfg.Lead, WaitLeadDefault)
	cfg.Drain = cmp.Or(cfg.Drain, 30*time.Second)
	c := cfg.Client
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = 1, 0
	w := &waitRun{cfg: cfg, streams: &http.Client{Transport: tr}, guests: make([]waiter, cfg.Waiters),
		refused: map[string]int{}, failCodes: map[string]int{},
		buyer: NewClient(c.Base, c.admin, string(c.key), 64)}
	w.buyer.Issuer, w.buyer.Audience = c.Issuer, c.Audience
	defer tr.CloseIdleConnections()
	defer w.buyer.CloseIdle()
	rep := &WaitRoomReport{Target: c.Base, Waiters: cfg.Waiters, Stock: cfg.Stock, Rate: cfg.Rate, Conns: cfg.Conns}
	say := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "waiting room: "+format+"\n", args...)
		}
	}
	mem := func(phase string) {
		if cfg.Metrics == "" || rep.MemMissing != "" {
			return
		}
		m, err := readMem(ctx, cfg.Metrics, phase)
		if err != nil {
			rep.MemMissing = err.Error()
			return
		}
		rep.Memory = append(rep.Memory, m)
	}

	// The platform signs the guests' tokens, before any clock runs.
	for i := range w.guests {
		g := &w.guests[i]
		g.user = fmt.Sprintf("%sw%d", cfg.Users, i)
		g.stream = i < cfg.Streams
		c.JWT(g.user)
	}
	mem("idle")

	// The sale opens its waiting room now and starts in an hour; once
	// everyone has joined and the streams are open, an edit brings the
	// start to Lead from then: however long the joins take, they are all
	// before it.
	now := time.Now().UTC().Truncate(time.Second)
	s := waitingRoomSale{Sale: NewSale(cfg.Stock, 3600)}
	s.Title, s.Test = "flashsale bench: waiting room", !cfg.Real
	s.StartsAt, s.EndsAt = now.Add(time.Hour), now.Add(2*time.Hour)
	s.WaitingRoom.PrequeueMinutes, s.WaitingRoom.AdmitPerSecond, s.WaitingRoom.AdmissionSeconds = 120, cfg.Rate, WaitAdmissionSeconds
	var out struct {
		ID string `json:"id"`
	}
	if err := c.adminJSON(ctx, "POST", "/api/admin/sales", s, &out, http.StatusCreated); err != nil {
		return nil, fmt.Errorf("bench: create the waiting room's sale: %w", err)
	}
	w.saleID, rep.SaleID = out.ID, out.ID
	say("sale %s, %d rooms, admitting %g/s; %d guests join", w.saleID, cfg.Stock, cfg.Rate, cfg.Waiters)

	rep.Join = w.joinAll(ctx)
	say("%d joined in %.1f s (%.0f/s, p99 %.0f ms)", rep.Join.Created, rep.Join.Seconds, rep.Join.PerSecond, rep.Join.P99)
	mem("joined")

	// Streams, then the start, then the pollers.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var follow sync.WaitGroup
	started := make(chan struct{})
	opened, refused := w.openStreams(runCtx, &follow, started)
	rep.StreamsRefused = refused
	rep.StreamsOpenSeconds = opened.Seconds()
	say("%d streams open in %.1f s (%d refused, polling instead)", cfg.Streams-refused, opened.Seconds(), refused)
	mem("streaming")
	w.start = time.Now().Add(cfg.Lead)
	w.startNS.Store(w.start.UnixNano())
	if err := c.adminJSON(ctx, "PATCH", "/api/admin/sales/"+w.saleID, map[string]any{"starts_at": w.start.UTC()}, nil, http.StatusOK); err != nil {
		cancel()
		follow.Wait()
		return nil, fmt.Errorf("bench: move the start: %w", err)
	}
	w.knownNS.Store(time.Now().UnixNano())
	close(started)
	for i := cfg.Streams; i < len(w.guests); i++ { // the streamers' own goroutines own theirs
		if g := &w.guests[i]; !g.decided {
			follow.Go(func() { w.poll(runCtx, g) })
		}
	}
	say("the sale starts in %s", cfg.Lead)
	w.await(runCtx, cancel)
	follow.Wait()
	mem("end")
	rep.PerWaiterKiB, rep.PerStreamKiB = perWaiter(rep.Memory, cfg.Waiters, cfg.Streams-refused)
	say("done: %d bought; checking the books", len(w.accepted))

	w.fill(rep)
	if q, err := w.queueReport(ctx); err == nil {
		rep.Queue = q
	} else {
		rep.Notes = append(rep.Notes, "the queue's report could not be read: "+err.Error())
	}
	ck, err := Verify(ctx, c, w.saleID, 1, &Result{Accepted: w.accepted, Unknown: w.lost}, cfg.Drain)
	if err != nil {
		return nil, err
	}
	rep.Check = ck
	rep.Invariants = append(slices.Clone(ck.Invariants), w.invariants(rep)...)
	rep.OK = true
	for _, inv := range rep.Invariants {
		rep.OK = rep.OK && inv.OK
	}
	return rep, nil
}

// joinAll has every guest join, Conns at a time, and measures it.
func (w *waitRun) joinAll(ctx context.Context) JoinStats {
	c, path := w.cfg.Client, "/api/sales/"+w.saleID+"/queue"
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	hist := newHist()
	st := JoinStats{Codes: map[string]int{}}
	begin := time.Now()
	for range min(w.cfg.Conns, len(w.guests)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(w.guests) || ctx.Err() != nil {
					return
				}
				g := &w.guests[i]
				t := time.Now()
				var p place
				r, err := c.doJSON(ctx, "POST", path, c.JWT(g.user), nil, &p)
				us := max(histMin, min(histMax, time.Since(t).Microseconds()))
				code := r.Code
				if err != nil {
					code = "transport"
				}
				mu.Lock()
				hist.RecordValue(us)
				st.Count++
				if err == nil && r.Status == http.StatusCreated {
					st.Created++
				} else {
					st.Codes[fmt.Sprintf("%d %s", r.Status, code)]++
				}
				mu.Unlock()
				if err != nil || r.Status != http.StatusCreated {
					g.failed = true
					w.decide(g)
				}
				g.pollAfter = time.Duration(p.PollAfterMS) * time.Millisecond
			}
		})
	}
	wg.Wait()
	st.Seconds = time.Since(begin).Seconds()
	if st.Seconds > 0 {
		st.PerSecond = float64(st.Count) / st.Seconds
	}
	st.P50, st.P90, st.P99, st.Max = quantileMS(hist, 50), quantileMS(hist, 90), quantileMS(hist, 99), float64(hist.Max())/1000
	return st
}

// quantileMS is h's quantile q (in percent) in milliseconds.
func quantileMS(h *hdrhistogram.Histogram, q float64) float64 {
	return float64(h.ValueAtQuantile(q)) / 1000
}

// openStreams opens the streamers' streams, streamOpeners at a time, each
// followed by a goroutine of follow, and returns once every one has read
// its first place (or was refused: those poll from started on).
func (w *waitRun) openStreams(ctx context.Context, follow *sync.WaitGroup, started <-chan struct{}) (time.Duration, int) {
	begin := time.Now()
	sem := make(chan struct{}, streamOpeners)
	var refused atomic.Int64
	var ready sync.WaitGroup
	for i := range w.guests {
		g := &w.guests[i]
		if !g.stream || g.decided {
			continue
		}
		sem <- struct{}{}
		ready.Add(1)
		follow.Go(func() {
			open := func() { <-sem; ready.Done() }
			if w.stream(ctx, g, open) {
				refused.Add(1)
				g.stream = false
				select {
				case <-started:
				case <-ctx.Done():
					return
				}
				w.poll(ctx, g)
			}
		})
	}
	ready.Wait()
	return time.Since(begin), int(refused.Load())
}

// stream follows g's place on its event stream until the run ends or g
// bought, and calls open once its first place came (or it failed). It
// reports whether the server refused the stream with 429 (poll instead).
func (w *waitRun) stream(ctx context.Context, g *waiter, open func()) (refused bool) {
	once := sync.OnceFunc(open)
	defer once()
	req, err := http.NewRequestWithContext(ctx, "GET", w.cfg.Client.Base+"/api/sales/"+w.saleID+"/queue/events", nil)
	if err != nil {
		w.fail(g, "request")
		return false
	}
	req.Header.Set("Authorization", "Bearer "+w.cfg.Client.JWT(g.user))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := w.streams.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			w.fail(g, "stream transport")
		}
		return false
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		io.Copy(io.Discard, resp.Body)
		return true
	default:
		w.fail(g, fmt.Sprintf("stream %d", resp.StatusCode))
		return false
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), dataPrefix)
		if !ok {
			continue
		}
		at := time.Now()
		var p place
		if err := json.Unmarshal(data, &p); err != nil {
			w.fail(g, "stream bad json")
			return false
		}
		once()
		if w.see(ctx, g, p, at) {
			return false // bought, or a place that ended: nothing more to hear
		}
	}
	if ctx.Err() == nil {
		w.fail(g, "stream ended")
	}
	return false
}

// poll reads g's place as poll_after_ms asks until g is done with the
// queue or the run ends: after sold_out too, since the queue opens again
// for those still in it when rooms come back. The page has polled at the pace its join was told since then,
// so its first read comes at a random moment within that pace. A read
// that fails (the connection, a 5xx, a 429) is tried again a second or
// the last pace later, as a page would.
func (w *waitRun) poll(ctx context.Context, g *waiter) {
	c, path := w.cfg.Client, "/api/sales/"+w.saleID+"/queue"
	pace := min(max(g.pollAfter, time.Second), pollAfterMax)
	if w.cfg.FirstPoll > 0 {
		pace = w.cfg.FirstPoll
	}
	wait := time.Duration(rand.Int64N(int64(pace)))
	for {
		if !sleep(ctx, wait) {
			return
		}
		var p place
		r, err := c.doJSON(ctx, "GET", path, c.JWT(g.user), nil, &p)
		w.polls.Add(1)
		at := time.Now()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil || r.Status == http.StatusTooManyRequests || r.Status >= 500:
			w.pollErrors.Add(1)
			wait = max(r.RetryAfter, time.Second, wait)
			continue
		case r.Status != http.StatusOK:
			w.fail(g, fmt.Sprintf("poll %d %s", r.Status, r.Code))
			return
		}
		if w.see(ctx, g, p, at) {
			return
		}
		wait = min(max(time.Duration(p.PollAfterMS)*time.Millisecond, 100*time.Millisecond), pollAfterMax)
	}
}

// see takes in a place g read at at: admitted, g buys; sold out, it is
// noted. It reports whether g is done with the queue (bought, refused,
// or a place that ended).
func (w *waitRun) see(ctx context.Context, g *waiter, p place, at time.Time) bool {
	w.roomsLeft(p.RoomsLeft, at)
	switch p.State {
	case "waiting":
		if !g.told.IsZero() {
			g.reopened = true
		}
		start, known := w.startNS.Load(), w.knownNS.Load()
		switch {
		case start == 0 || at.UnixNano() < start:
			// Before the draw nobody's place is known and the ETA counts
			// to the start, read from when the start was set (before it,
			// it was an hour away).
			if known != 0 && at.UnixNano() >= known {
				g.preDraw, g.eta = true, p.ETASeconds
			}
			return false
		case p.Ahead == 0:
			// The front of the queue, or a read after the start and before
			// the step that draws (it says the same): nothing to tell.
			return false
		case !g.drawn:
			g.drawn, g.firstDrawnAt, g.firstDrawnETA = true, at, p.ETASeconds
			g.drawRose = g.preDraw && p.ETASeconds > g.eta
		case p.ETASeconds > g.eta:
			g.etaRose = true
		}
		g.eta = p.ETASeconds
		return false
	case "sold_out":
		if g.told.IsZero() {
			g.told = at
			w.decide(g)
		}
		return false
	case "admitted":
		if !g.told.IsZero() {
			g.reopened = true
		}
		if g.admitted.IsZero() {
			g.admitted = at
		}
		g.until = p.AdmittedUntil
		if g.tried {
			return true
		}
		g.tried = true
		w.buy(ctx, g)
		w.decide(g)
		return true
	case "expired": // skipped, or an admission that lapsed before it was read
		g.expired = true
		w.decide(g)
		return true
	default: // closed
		w.fail(g, "place "+p.State)
		return true
	}
}

// roomsLeft notes a read of rooms_left n at at: zeroAt is the first read
// of 0 since the last read of more (a 0 followed by more is a flicker).
func (w *waitRun) roomsLeft(n int, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case n > 0:
		if !w.zeroAt.IsZero() && at.After(w.zeroAt) {
			w.zeroAt = time.Time{}
			w.flickers++
		}
		if at.After(w.lastRooms) {
			w.lastRooms = at
		}
	case w.zeroAt.IsZero() && at.After(w.lastRooms):
		w.zeroAt = at
	}
}

// buy takes a token and buys one room as g, waiting as a 429 or 503 asks
// (twice at most).
func (w *waitRun) buy(ctx context.Context, g *waiter) {
	c := w.buyer
	c.SetJWT(g.user, w.cfg.Client.JWT(g.user))
	sent := time.Now()
	tok, r, err := c.Token(ctx, w.saleID, g.user, "", "")
	if err == nil && r.Code == "not_admitted" && !g.until.IsZero() && sent.After(g.until) {
		g.expired = true // read too late: the admission had lapsed (the generator's fault)
		return
	}
	if err != nil || r.Status != http.StatusCreated {
		w.refuse("token", r, err)
		return
	}
	key := g.user + "-1"
	for attempt := 0; ; attempt++ {
		o, r, err := c.Purchase(ctx, w.saleID, g.user, tok, key)
		switch {
		case err != nil:
			w.mu.Lock()
			w.lost++
			w.mu.Unlock()
			return
		case r.Status == http.StatusAccepted:
			now := time.Now()
			g.bought = now
			w.mu.Lock()
			w.accepted = append(w.accepted, Accepted{OrderID: o.OrderID, User: g.user, Key: key, Kind: Normal})
			if now.After(w.last202) {
				w.last202 = now
			}
			w.mu.Unlock()
			return
		case (r.Status == 429 || r.Status == 503) && attempt < 2 && sleep(ctx, max(r.RetryAfter, 100*time.Millisecond)):
			continue
		}
		w.refuse("purchase", r, nil)
		return
	}
}

func (w *waitRun) refuse(what string, r Response, err error) {
	code := fmt.Sprintf("%s %d %s", what, r.Status, r.Code)
	if err != nil {
		code = what + " transport"
	}
	w.mu.Lock()
	w.refused[code]++
	w.mu.Unlock()
}

func (w *waitRun) fail(g *waiter, why string) {
	g.failed = true
	w.mu.Lock()
	w.failCodes[why]++
	w.mu.Unlock()
	w.decide(g)
}

// decide counts g as decided (bought, refused, told sold out or failed), once.
func (w *waitRun) decide(g *waiter) {
	if !g.decided {
		g.decided = true
		w.decided.Add(1)
	}
}

// await waits until every guest is decided and every room bought (then a
// moment more, for a queue that opens again) or until the streamers' time is up: SoldOutWithin
// after the last 202, and a poll interval more for the pollers; without
// a 202, long enough for the rooms at the sale's rate, and a minute more.
func (w *waitRun) await(ctx context.Context, cancel func()) {
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	fallback := w.start.Add(time.Minute + time.Duration(float64(w.cfg.Stock)/w.cfg.Rate*2*float64(time.Second)))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		last, sold := w.last202, len(w.accepted)
		w.mu.Unlock()
		if int(w.decided.Load()) == len(w.guests) && sold >= w.cfg.Stock {
			sleep(ctx, 500*time.Millisecond)
			return
		}
		deadline := fallback
		if !last.IsZero() {
			deadline = last.Add(SoldOutWithin + pollAfterMax)
		}
		if time.Now().After(deadline) {
			return
		}
	}
}

// fill sums up the guests into rep.
func (w *waitRun) fill(rep *WaitRoomReport) {
	rep.Lost, rep.Polls, rep.PollErrors = w.lost, int(w.polls.Load()), int(w.pollErrors.Load())
	if !w.last202.IsZero() {
		rep.LastRoomS = w.last202.Sub(w.start).Seconds()
	}
	if !w.zeroAt.IsZero() {
		rep.RoomsLeftZeroS = w.zeroAt.Sub(w.start).Seconds()
	}
	rep.RoomsLeftFlickers = w.flickers
	if len(w.refused) > 0 {
		rep.RefusedCodes = w.refused
	}
	for _, n := range w.refused {
		rep.Refused += n
	}
	var told, fan, polled []time.Duration
	var first time.Time
	var etaErr []time.Duration
	acrossDraw := 0 // guests who read their place before the draw and after it
	for i := range w.guests {
		g := &w.guests[i]
		if g.stream {
			rep.Streams++
			if !g.told.IsZero() && (first.IsZero() || g.told.Before(first)) {
				first = g.told
			}
		} else {
			rep.Pollers++
		}
		if g.failed {
			rep.Failed++
		}
		if g.expired {
			rep.Expired++
		}
		if g.reopened {
			rep.Reopened++
		}
		if !g.admitted.IsZero() {
			rep.Admitted++
			if g.stream && g.drawn {
				promised := g.firstDrawnAt.Add(time.Duration(g.firstDrawnETA) * time.Second)
				etaErr = append(etaErr, g.admitted.Sub(promised).Abs())
			}
		}
		if !g.bought.IsZero() {
			rep.Bought++
		}
		if g.drawn {
			rep.ETA.Followed++
			if g.preDraw {
				acrossDraw++
			}
			if g.drawRose {
				rep.ETA.AtDraw++
			}
			if g.etaRose {
				rep.ETA.Rose++
			}
		}
		if g.bought.IsZero() && g.admitted.IsZero() && !g.failed && !g.expired {
			switch {
			case g.told.IsZero() && g.stream:
				rep.NeverTold++
			case g.told.IsZero():
			case w.last202.IsZero():
			case g.stream:
				told = append(told, g.told.Sub(w.last202))
			default:
				polled = append(polled, g.told.Sub(w.last202))
			}
		}
	}
	for _, d := range told { // the same streamers, from the first told of all
		fan = append(fan, w.last202.Add(d).Sub(first))
	}
	rep.SoldOut, rep.FanOut, rep.PollSoldOut = spread(told), spread(fan), spread(polled)
	if acrossDraw > 0 {
		rep.ETA.AtDrawFraction = float64(rep.ETA.AtDraw) / float64(acrossDraw)
	}
	if rep.ETA.Followed > 0 {
		rep.ETA.RoseFraction = float64(rep.ETA.Rose) / float64(rep.ETA.Followed)
	}
	if e := spread(etaErr); e.Count > 0 {
		rep.ETA.ErrorP50, rep.ETA.ErrorMax = e.P50/1000, e.Max/1000
	}
	if rep.Expired > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d places expired (an admission read after it lapsed, or a guest skipped as idle): the generator fell behind its guests", rep.Expired))
	}
	if rep.StreamsRefused > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d streams were refused 429 (FLASHSALE_EVENTS_PER_CLIENT: the server's cap per client address) and polled instead", rep.StreamsRefused))
	}
	for _, why := range slices.Sorted(maps.Keys(w.failCodes)) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d guests failed: %s", w.failCodes[why], why))
	}
}

// spread is the distribution of ds.
func spread(ds []time.Duration) Spread {
	if len(ds) == 0 {
		return Spread{}
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		i := min(len(ds)-1, max(0, int(float64(len(ds))*p+0.999999)-1))
		return float64(ds[i].Microseconds()) / 1000
	}
	s := Spread{Count: len(ds), Min: q(0), P50: q(0.5), P99: q(0.99), Max: q(1)}
	for _, d := range ds {
		if d < 0 {
			s.Early++
		}
	}
	return s
}

// invariants are the waiting room's own rules.
func (w *waitRun) invariants(rep *WaitRoomReport) []Invariant {
	var joined, admitted, told []string
	if rep.Join.Created != rep.Waiters {
		joined = append(joined, fmt.Sprintf("%d of %d joins answered 201 (%v)", rep.Join.Created, rep.Waiters, rep.Join.Codes))
	}
	if rep.Refused > 0 {
		admitted = append(admitted, fmt.Sprintf("%d admitted guests were refused: %v", rep.Refused, rep.RefusedCodes))
	}
	if rep.Admitted > rep.Stock {
		admitted = append(admitted, fmt.Sprintf("%d guests admitted for %d rooms", rep.Admitted, rep.Stock))
	}
	if rep.Bought < rep.Stock {
		admitted = append(admitted, fmt.Sprintf("%d rooms bought of %d: the queue did not sell out", rep.Bought, rep.Stock))
	}
	if rep.NeverTold > 0 {
		told = append(told, fmt.Sprintf("%d streamers without a room never heard sold_out", rep.NeverTold))
	}
	if rep.SoldOut.Count > 0 && rep.SoldOut.Max > float64(SoldOutWithin/time.Millisecond) {
		told = append(told, fmt.Sprintf("a streamer heard sold_out %.0f ms after the last room", rep.SoldOut.Max))
	}
	if n := rep.Failed; n > 0 {
		told = append(told, fmt.Sprintf("%d guests' places or streams failed", n))
	}
	return []Invariant{
		{Name: InvJoined, OK: len(joined) == 0, Detail: summary(joined)},
		{Name: InvAdmitted, OK: len(admitted) == 0, Detail: summary(admitted)},
		{Name: InvSoldOut, OK: len(told) == 0, Detail: summary(told)},
	}
}

// queueReport reads the server's own report of the sale's queue.
func (w *waitRun) queueReport(ctx context.Context) (*QueueReport, error) {
	var q QueueReport
	if err := w.cfg.Client.adminJSON(ctx, "GET", "/api/admin/sales/"+w.saleID+"/queue", nil, &q, http.StatusOK); err != nil {
		return nil, err
	}
	return &q, nil
}

// readMem reads the server's resident memory, heap in use and goroutines
// from its metrics.
func readMem(ctx context.Context, url, phase string) (MemSample, error) {
	fams, err := scrape(ctx, &http.Client{Timeout: 5 * time.Second}, url)
	if err != nil {
		return MemSample{}, err
	}
	v := func(name string) (float64, bool) {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) == 0 {
			return 0, false
		}
		m := f.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue(), true
		}
		return m.GetUntyped().GetValue(), true
	}
	rss, ok := v("process_resident_memory_bytes")
	if !ok {
		return MemSample{}, fmt.Errorf("GET %s: no process_resident_memory_bytes", url)
	}
	heap, _ := v("go_memstats_heap_inuse_bytes")
	gs, _ := v("go_goroutines")
	return MemSample{Phase: phase, RSSMiB: rss / (1 << 20), HeapMiB: heap / (1 << 20), Goroutines: int(gs)}, nil
}

// perWaiter is the resident memory the joins added per waiter and the
// streams per stream, from the idle, joined and streaming samples.
func perWaiter(ms []MemSample, waiters, streams int) (waiter, stream float64) {
	at := map[string]float64{}
	for _, m := range ms {
		at[m.Phase] = m.RSSMiB
	}
	idle, ok1 := at["idle"]
	joined, ok2 := at["joined"]
	streaming, ok3 := at["streaming"]
	if ok1 && ok2 && waiters > 0 {
		waiter = (joined - idle) * 1024 / float64(waiters)
	}
	if ok2 && ok3 && streams > 0 {
		stream = (streaming - joined) * 1024 / float64(streams)
	}
	return waiter, stream
}

// WriteText writes the report for a reader.
func (r *WaitRoomReport) WriteText(out io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "flashsale bench --waiting-room: %d waiters (%d streaming, %d polling), %d rooms at %g admissions/s, target %s\n",
		r.Waiters, r.Streams, r.Pollers, r.Stock, r.Rate, r.Target)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	j := r.Join
	fmt.Fprintf(&b, "\njoin: %d of %d placed in %.1f s, %.0f joins/s at %d in flight; latency p50 %.1f ms, p90 %.1f, p99 %.1f, max %.1f\n",
		j.Created, r.Waiters, j.Seconds, j.PerSecond, r.Conns, j.P50, j.P90, j.P99, j.Max)
	fmt.Fprintf(&b, "streams: %d open in %.1f s (%d refused, polled instead); %d polls (%d failed and tried again)\n", r.Streams, r.StreamsOpenSeconds, r.StreamsRefused, r.Polls, r.PollErrors)
	fmt.Fprintf(&b, "rooms: %d admitted, %d bought, %d refused after admission, %d lost answers; last room %.2f s after the start (rooms_left 0 for good from %.2f s; %d reads of 0 before more)\n",
		r.Admitted, r.Bought, r.Refused, r.Lost, r.LastRoomS, r.RoomsLeftZeroS, r.RoomsLeftFlickers)
	sp := func(name string, s Spread) {
		if s.Count == 0 {
			fmt.Fprintf(&b, "%s: none\n", name)
			return
		}
		fmt.Fprintf(&b, "%s: %d guests, p50 %.0f ms, p99 %.0f ms, max %.0f ms, min %.0f ms (%d before it)\n", name, s.Count, s.P50, s.P99, s.Max, s.Min, s.Early)
	}
	sp("sold out, streamers, from the last 202", r.SoldOut)
	sp("sold out, streamers, from the first told (fan-out)", r.FanOut)
	sp("sold out, pollers, from the last 202", r.PollSoldOut)
	fmt.Fprintf(&b, "never told: %d; told sold out and then reopened: %d; expired: %d; failed: %d\n", r.NeverTold, r.Reopened, r.Expired, r.Failed)
	e := r.ETA
	fmt.Fprintf(&b, "eta: rose while waiting after the draw for %d of %d guests (%.2f %%); rose at the draw for %d (%.1f %%: before it the ETA counts to the start only); admitted streamers' ETA error p50 %.1f s, max %.1f s\n",
		e.Rose, e.Followed, 100*e.RoseFraction, e.AtDraw, 100*e.AtDrawFraction, e.ErrorP50, e.ErrorMax)
	switch {
	case len(r.Memory) > 0:
		fmt.Fprintf(&b, "server memory:")
		for _, m := range r.Memory {
			fmt.Fprintf(&b, " %s rss %.0f MiB heap %.0f MiB %d goroutines;", m.Phase, m.RSSMiB, m.HeapMiB, m.Goroutines)
		}
		fmt.Fprintf(&b, " per waiter %.2f KiB, per stream %.2f KiB (rss)\n", r.PerWaiterKiB, r.PerStreamKiB)
	case r.MemMissing != "":
		fmt.Fprintf(&b, "server memory: not read (%s)\n", r.MemMissing)
	}
	if q := r.Queue; q != nil {
		fmt.Fprintf(&b, "the server's queue: joined %d, waiting %d, admitted unused %d, used %d, expired %d, sold out %v\n",
			q.Joined, q.Waiting, q.Admitted, q.Used, q.Expired, q.SoldOut)
	}
	if c := r.Check; c != nil {
		fmt.Fprintf(&b, "books: stock %d, held %d, sold %d, oversold %d; orders %v\n", c.Stock, c.Held, c.Sold, c.Oversold, c.Orders)
	}
	b.WriteString("\ninvariants:\n")
	for _, inv := range r.Invariants {
		mark := "ok"
		if !inv.OK {
			mark = "BROKEN"
		}
		fmt.Fprintf(&b, "  %-20s %s %s\n", inv.Name, mark, inv.Detail)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// Broken names the invariants that do not hold.
func (r *WaitRoomReport) Broken() []string {
	var out []string
	for _, inv := range r.Invariants {
		if !inv.OK {
			out = append(out, inv.Name)
		}
	}
	return out
}

// runWaitingRoom is `flashsale bench --waiting-room N`.
func runWaitingRoom(ctx context.Context, f *flags, stdout, progress io.Writer) error {
	base, metrics := "", ""
	var notes []string
	if f.self {
		// Every stream comes from this one address: the server's cap per
		// address is lifted, as a load balancer's many addresses would.
		p, b, admin, secret, err := spawnSelf(ctx, func(dir string) []string {
			return append(embeddedEnv(dir), "FLASHSALE_EVENTS_PER_CLIENT=0")
		})
		if err != nil {
			return err
		}
		defer p.stop()
		base, f.admin, f.secret = b, admin, secret
		notes = append(notes, "The server (embedded shape) ran on this machine beside the load generator, in a process of its own (--self), with FLASHSALE_EVENTS_PER_CLIENT=0.")
	} else {
		base = strings.TrimRight(f.targets[0], "/")
	}
	metrics = base + "/metrics"
	if len(f.metrics) > 0 {
		metrics = f.metrics[0]
	}
	c := NewClient(base, f.admin, f.secret, f.conns)
	c.Issuer, c.Audience = f.issuer, f.audience
	defer c.CloseIdle()
	rep, err := RunWaitingRoom(ctx, WaitRoom{Client: c, Waiters: f.waitingRoom, Streams: min(f.streams, f.waitingRoom),
		Stock: f.stock, Rate: f.admitRate, Conns: f.conns, Users: fmt.Sprintf("b%s-", RunID()), Real: f.realSales,
		Drain: f.drain, Metrics: metrics, Progress: progress})
	if err != nil {
		return err
	}
	rep.Notes = append(notes, rep.Notes...)
	if f.cleanup && !f.realSales {
		if err := c.DeleteSale(ctx, rep.SaleID); err != nil {
			rep.Notes = append(rep.Notes, "--cleanup: "+err.Error())
		}
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if err := writeReports(f, rep, nil); err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("bench: invariant broken: %s", strings.Join(rep.Broken(), ", "))
	}
	return nil
}
