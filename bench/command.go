package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/app"
)

const benchUsage = `usage: flashsale bench (--self | --target URL) [flags]
       flashsale bench --compare (--self | --target PATH=URL ...) [flags]
       flashsale bench --waiting-room N (--self | --target URL) [flags]

Creates a sale, sends guests at it on a schedule (open loop: each
request's latency runs from when it was due, so a slow server cannot hide
behind a slow generator), waits for the orders to settle, then checks the
invariants: the server's audit cross-checked against the client's own
record of every 202. Exits non-zero when an invariant breaks.

Two --shape values are closed loops, for throughput: --conns workers, each
sending its next request as soon as its last is answered, for --duration
(latency then runs from each send; no mix):
  soldout            one guest buying from a sale of no rooms (32 workers):
                     every answer must be 409 sold_out; a 202 (an oversell),
                     a 5xx or a lost answer breaks the "answers" invariant
  accepted           a new guest each time, a token then a purchase of a sale
                     of 1000000 rooms (256 workers); the holds outlast the run
                     and the check, nobody pays: the figure is accepted/s
With --ceiling each round runs the loop against the ceiling first (every
answer 409; an accepted "guest" still sends a token and a purchase), and
the report quotes each round's ratios and those of the medians.
With --parts as well (--shape accepted, a distributed --target and the
Redis and RabbitMQ it uses, --redis-url and --amqp-url), each round also
runs, after the ceiling's round, as long and with as many workers, the
parts an accepted purchase cannot avoid, each alone: reserve (the Redis
stock engine's reserve and confirm, a new guest each call, on a sale and
keys of its own) and publish (a publisher-confirmed persistent message of
an order, to a queue of its own); both are removed after the round. With
http, the ceiling's guests/s, they bound the accepted rate at
1/(1/http + 1/reserve + 1/publish): on one machine the parts share the
CPU, so their costs per purchase add. The report quotes accepted/s as a
ratio to that bound, round by round and the median.

  --self             start the embedded server in a process of its own
                     (this binary's serve, a free port, a temporary data dir)
  --target URL       a running server; the admin token and the JWT secret
                     from --admin-token/--jwt-secret or FLASHSALE_ADMIN_TOKEN
                     and FLASHSALE_JWT_SECRET
  --ceiling          also run every round against the trivial handler of
                     ../shared/bench/ceiling (built from --ceiling-src, or this
                     binary's copy of it), each in its own process, just
                     before the target's round, and quote ratios to it
  --json FILE        the report as JSON, every round second by second
  --html FILE        the report as one HTML page with its charts (requests
                     and latency per second, the funnel, the database's
                     calls): inline SVG, nothing fetched, opens offline

  --compare          the same shape against each path in turn, then the
                     source's table (latency, database peak QPS, oversold,
                     completion rate), a column per path:
                       embedded     SQLite, the in-process engine
                       distributed  Redis + RabbitMQ + MySQL/PostgreSQL
                       dbmode       the distributed shape with its breaker
                                    forced open: the database's conditional
                                    update (the source's optimistic lock)
                     With --self each path is a server of its own, started
                     for it; the distributed ones need --database-url,
                     --redis-url and --amqp-url (or FLASHSALE_DATABASE_URL,
                     FLASHSALE_REDIS_URL, FLASHSALE_AMQP_URL) and are skipped
                     without them. With --target, one --target PATH=URL per
                     path (a path without one is skipped); dbmode may be the
                     distributed server itself if it runs with
                     FLASHSALE_BREAKER_MODE=db: the bench forces its breaker
                     open for the load and hands it back after.

--waiting-room N is the waiting room's scenario (issue 24): a sale of
--stock rooms with a waiting room admitting --admit-rate guests a second;
N guests join it before the start, --conns at a time; --streams of them
(all when N is smaller) follow their place on its event stream, each on
a connection of its own, the others poll it as poll_after_ms says; at the
start the admitted take a token and buy. It reports the joins' rate and
latency, for the guests without a room the time from the last 202 to
their sold_out (p50, p99, max), whether an ETA ever rose, the server's
memory (--self, or a target whose /metrics it can read), and checks the
books: exits non-zero on an oversell, a 202 without an order, an admitted
guest refused, or a streamer not told sold_out within 10 s. Every stream
is a file descriptor in the bench and in the server: raise ulimit -n past
--streams in both (Go raises the soft limit to the hard one by itself),
and a --target must allow a client address that many streams
(FLASHSALE_EVENTS_PER_CLIENT=0; --self sets it); a refused stream polls.

--kind slot makes every sale (the loops' too) a time-slot sale (issue
25) of the same places in all: up to 4 slots of one day a month ahead
(12:00, 13:30, 19:00, 20:30 in Europe/Paris, 90 minutes), the places
spread evenly over them; every purchase names its slot, the sessions
spread evenly over the slots, quantity 1; the check adds up the slots
and wants each 202's order of its own slot. Not with --waiting-room.

--kind seats makes every sale a shuttle's seats sale of the same places:
a departure at each of those times, 2 vehicles each (fewer departures
and one vehicle each with fewer seats), the seats spread evenly over
them; every purchase names its departure, seats 1, and the check is
the slot's with a departure's places its vehicles' sum. Not with
--waiting-room.

The database's load is read from the server's own metrics (/metrics, or
--metrics URL) once a second. The source's pulse at full size is
--peak 8000 --duration 52s; the defaults are that pulse scaled to a
small machine.

flags:
`

// ServeCeilingFlag is the hidden flag with which bench runs its own copy
// of the ceiling in a child process when ../shared/bench/ceiling is absent.
const ServeCeilingFlag = "--serve-ceiling"

// flags are bench's settings.
type flags struct {
	targets, metrics       []string // URL, or path=URL with --compare
	admin, secret          string
	issuer, audience       string // the guests' tokens' iss and aud
	self, ceiling, compare bool
	parts                  bool // the parts of an accepted purchase, alone
	// realSales makes the sales real ones (not test sales); cleanup
	// deletes each round's test sale after its check.
	realSales, cleanup     bool
	given                  map[string]bool // the flags set on the command line
	ceilingSrc             string
	paths                  string
	databaseURL, redisURL  string
	amqpURL                string
	shape                  string
	peak                   float64
	duration, think, drain time.Duration
	guests, stock, hold    int
	rounds, difficulty     int
	conns, hammer          int
	mix                    string
	pay                    float64
	jsonFile, htmlFile     string
	progress               string
	// waitingRoom is the waiting room's scenario's waiters (0: not it),
	// streams how many of them follow the stream, admitRate the sale's
	// admit_per_second.
	waitingRoom, streams int
	admitRate            float64
	// kind is what the bench's sales sell: stay (one night of rooms),
	// slot (Sale.AsSlots: the same places as a venue's slots) or seats
	// (Sale.AsSeats: as a shuttle's departures).
	kind string
}

// Command is `flashsale bench`.
func Command(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 2 && args[0] == ServeCeilingFlag {
		ln, err := net.Listen("tcp", args[1])
		if err != nil {
			return err
		}
		return ServeCeiling(ln)
	}
	fset := app.NewFlagSet("bench", args, stdout, stderr)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), benchUsage)
		app.PrintFlags(fset, nil)
	}
	var f flags
	fset.Func("target", "base URL of a running server, e.g. http://127.0.0.1:8080; with --compare, PATH=URL, once per path", func(v string) error {
		f.targets = append(f.targets, v)
		return nil
	})
	fset.Func("metrics", "the target's /metrics URL when it is not at the target's own /metrics (FLASHSALE_METRICS_ADDR); with --compare, PATH=URL", func(v string) error {
		f.metrics = append(f.metrics, v)
		return nil
	})
	fset.StringVar(&f.admin, "admin-token", getenv("FLASHSALE_ADMIN_TOKEN"), "the target's admin token (FLASHSALE_ADMIN_TOKEN)")
	fset.StringVar(&f.secret, "jwt-secret", getenv("FLASHSALE_JWT_SECRET"), "the target's JWT secret, to sign guests' tokens (FLASHSALE_JWT_SECRET)")
	fset.StringVar(&f.issuer, "jwt-issuer", getenv("FLASHSALE_JWT_ISSUER"), "iss of the guests' tokens, when the target requires one (FLASHSALE_JWT_ISSUER)")
	fset.StringVar(&f.audience, "jwt-audience", getenv("FLASHSALE_JWT_AUDIENCE"), "aud of the guests' tokens, when the target requires one (FLASHSALE_JWT_AUDIENCE)")
	fset.BoolVar(&f.self, "self", false, "start the embedded server in its own process and bench it")
	fset.BoolVar(&f.ceiling, "ceiling", false, "run each round against the ceiling handler too and quote ratios to it")
	fset.StringVar(&f.ceilingSrc, "ceiling-src", "../shared/bench/ceiling", "directory of the ceiling's main.go (absent: this binary's copy)")
	fset.BoolVar(&f.parts, "parts", false, "with --shape accepted --ceiling against a distributed --target: each round, also run the parts an accepted purchase cannot avoid alone (Redis reserve, confirmed publish) and quote the bound they imply")
	fset.BoolVar(&f.realSales, "real-sales", false, "create real sales instead of test sales (test sales are hidden from the public list, marked in metrics and events, and deletable)")
	fset.BoolVar(&f.cleanup, "cleanup", false, "delete each round's test sale with its orders after its check (DELETE /api/admin/sales/{id})")
	fset.BoolVar(&f.compare, "compare", false, "run the shape against each path (embedded, distributed, dbmode) and print them side by side")
	fset.StringVar(&f.paths, "paths", strings.Join(Paths, ","), "with --compare: the paths to run")
	fset.StringVar(&f.databaseURL, "database-url", getenv("FLASHSALE_DATABASE_URL"), "with --compare --self: the MySQL or PostgreSQL database of the distributed and dbmode servers (FLASHSALE_DATABASE_URL)")
	fset.StringVar(&f.redisURL, "redis-url", getenv("FLASHSALE_REDIS_URL"), "with --compare --self: their Redis; with --parts: the target's (FLASHSALE_REDIS_URL)")
	fset.StringVar(&f.amqpURL, "amqp-url", getenv("FLASHSALE_AMQP_URL"), "with --compare --self: their RabbitMQ; with --parts: the target's (FLASHSALE_AMQP_URL)")
	fset.StringVar(&f.shape, "shape", "pulse", "arrivals: pulse, burst, constant or ramp; closed loops: soldout or accepted")
	fset.Float64Var(&f.peak, "peak", 1000, "peak arrivals (guest sessions) per second: pulse, constant, ramp")
	fset.DurationVar(&f.duration, "duration", 20*time.Second, "length of the shape: pulse, constant, ramp, soldout, accepted")
	fset.IntVar(&f.guests, "guests", 2000, "guests arriving at once: burst")
	fset.StringVar(&f.mix, "mix", DefaultMix.String(), "shares of guests: normal, scalper, broken")
	fset.IntVar(&f.stock, "stock", 100, "rooms in the sale (one night; with --kind slot or seats, places spread over its slots or departures); soldout and accepted choose their own")
	fset.StringVar(&f.kind, "kind", string(flashsale.KindStay), "what the sale sells: stay (one night of rooms) slot (the same places as up to 4 time slots of one day, each purchase naming its slot, quantity 1) or seats (a shuttle: up to 4 departures of 2 vehicles, each purchase naming its departure, seats 1)")
	fset.IntVar(&f.hold, "hold", 10, "the sale's hold_seconds")
	fset.IntVar(&f.difficulty, "difficulty", 0, "the sale's proof-of-work difficulty (0: none)")
	fset.DurationVar(&f.think, "think", ThinkDefault, "mean time a guest with a 202 takes to pay")
	fset.Float64Var(&f.pay, "pay", PayDefault, "share of guests with a 202 who pay (half the rest cancel, the others let the hold expire)")
	fset.IntVar(&f.hammer, "hammer", HammerDefault, "purchases a scalper fires with one token")
	fset.IntVar(&f.rounds, "rounds", 1, "rounds (the report quotes medians)")
	fset.IntVar(&f.conns, "conns", 512, "connections the client keeps to the server (soldout: 32 and accepted: 256 workers, one connection each, unless given)")
	fset.DurationVar(&f.drain, "drain", 30*time.Second, "how long to wait for orders to settle before the check gives up")
	fset.StringVar(&f.jsonFile, "json", "", "write the report as JSON to this file")
	fset.StringVar(&f.htmlFile, "html", "", "write the report as one self-contained HTML page (charts inline, nothing fetched) to this file")
	fset.StringVar(&f.progress, "progress", "auto", "live progress on stderr: auto (a terminal, not CI), on or off")
	fset.IntVar(&f.waitingRoom, "waiting-room", 0, "the waiting room's scenario with this many waiters (0: the other shapes)")
	fset.IntVar(&f.streams, "streams", WaitStreamsDefault, "--waiting-room: waiters who follow the event stream (a connection each); the rest poll")
	fset.Float64Var(&f.admitRate, "admit-rate", WaitRateDefault, "--waiting-room: the sale's admit_per_second")
	if err := app.ParseFlags(fset, args); err != nil {
		return err
	}
	f.given = map[string]bool{}
	fset.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	if fset.NArg() > 0 {
		return app.UsageErrorf(fset, stderr, "unexpected arguments %q", fset.Args())
	}
	shape, mix, err := f.validate()
	if err != nil {
		return err
	}
	var progress io.Writer
	if f.progress == "on" || f.progress == "auto" && isTerminal(stderr) && getenv("CI") != "true" {
		progress = stderr
	}
	if f.compare {
		return runCompare(ctx, &f, shape, mix, stdout, progress)
	}
	if f.waitingRoom > 0 {
		return runWaitingRoom(ctx, &f, stdout, progress)
	}

	var procs []*child
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	var t benchTarget
	if f.self {
		p, base, admin, secret, err := spawnSelf(ctx, embeddedEnv)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		t.base, f.admin, f.secret = base, admin, secret
		t.notes = append(t.notes, "The server (embedded shape) ran on this machine beside the load generator, in a process of its own (--self).")
	} else {
		t.base = strings.TrimRight(f.targets[0], "/")
	}
	t.metrics = t.base + "/metrics"
	if len(f.metrics) > 0 {
		t.metrics = f.metrics[0]
	}
	var ceiling *Client
	var ceilingWhat string
	if f.ceiling {
		p, base, what, err := spawnCeiling(ctx, f.ceilingSrc)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		ceilingWhat = what
		ceiling = NewClient(base, "", f.secret, f.conns)
		defer ceiling.CloseIdle()
	}
	rep, err := benchRounds(ctx, &f, shape, mix, t, ceiling, ceilingWhat, progress)
	if err != nil {
		return err
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if err := writeReports(&f, rep, rep.WriteHTML); err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("bench: invariant broken: %s", strings.Join(brokenOf(rep), ", "))
	}
	return nil
}

// validate checks the flags that go together and builds the shape and the mix.
func (f *flags) validate() (Shape, Mix, error) {
	mix, err := ParseMix(f.mix)
	if err != nil {
		return nil, mix, fmt.Errorf("bench: --%w", err)
	}
	switch {
	case f.self == (len(f.targets) > 0):
		return nil, mix, errors.New("bench: give exactly one of --self and --target")
	case !f.compare && len(f.targets) > 1:
		return nil, mix, errors.New("bench: one --target, or --compare with one --target PATH=URL per path")
	case !f.compare && len(f.metrics) > 1:
		return nil, mix, errors.New("bench: one --metrics, or --compare with one --metrics PATH=URL per path")
	case !f.self && (f.admin == "" || f.secret == ""):
		return nil, mix, errors.New("bench: --target needs the admin token and the JWT secret (--admin-token, --jwt-secret or FLASHSALE_ADMIN_TOKEN, FLASHSALE_JWT_SECRET)")
	case f.rounds < 1 || f.stock < 0 || f.hold < 1 || f.conns < 1 || f.hammer < 1 || f.difficulty < 0 || f.difficulty > 32:
		return nil, mix, errors.New("bench: --rounds, --hold, --conns and --hammer must be positive, --stock not negative, --difficulty 0 to 32")
	case f.pay < 0 || f.pay > 1:
		return nil, mix, errors.New("bench: --pay is a share from 0 to 1")
	case f.progress != "auto" && f.progress != "on" && f.progress != "off":
		return nil, mix, errors.New("bench: --progress is auto, on or off")
	case f.kind != string(flashsale.KindStay) && f.kind != string(flashsale.KindSlot) && f.kind != string(flashsale.KindSeats):
		return nil, mix, fmt.Errorf("bench: unknown --kind %q (%s, %s, %s)", f.kind, flashsale.KindStay, flashsale.KindSlot, flashsale.KindSeats)
	}
	if err := f.validateWaitingRoom(); err != nil {
		return nil, mix, err
	}
	if f.compare {
		if _, err := f.comparePaths(); err != nil {
			return nil, mix, err
		}
	}
	if err := f.validateParts(); err != nil {
		return nil, mix, err
	}
	switch f.shape {
	case LoopSoldOut, LoopAccepted:
		l := Loop{Path: f.shape, Conns: f.conns, Duration: f.duration}
		if !f.given["conns"] {
			l.Conns = SoldOutConnsDefault
			if l.Path == LoopAccepted {
				l.Conns = AcceptedConnsDefault
			}
			f.conns = l.Conns
		}
		switch {
		case f.duration <= 0:
			return nil, mix, errors.New("bench: --duration must be positive")
		case f.given["stock"]:
			return nil, mix, fmt.Errorf("bench: --stock: the %s loop's sale has %d rooms", l.Path, l.Sale(1, 0).Nights[0].Stock)
		}
		return l, mix, nil
	case "burst":
		if f.guests < 1 {
			return nil, mix, errors.New("bench: --guests must be positive")
		}
		return Burst(f.guests), mix, nil
	}
	if f.peak <= 0 || f.duration <= 0 {
		return nil, mix, errors.New("bench: --peak and --duration must be positive")
	}
	switch f.shape {
	case "pulse":
		return Pulse(f.peak, f.duration), mix, nil
	case "constant":
		return Constant(f.peak, f.duration), mix, nil
	case "ramp":
		return Ramp(f.peak, f.duration), mix, nil
	}
	return nil, mix, fmt.Errorf("bench: unknown --shape %q (pulse, burst, constant, ramp, soldout, accepted)", f.shape)
}

// pathSpec is one path --compare runs: where it is (with --target), or
// why it does not run.
type pathSpec struct {
	name, url, metrics string
	skip               string
}

// comparePaths reads --paths, --target PATH=URL and --metrics PATH=URL.
// With --self, the distributed paths need the three services' URLs; a
// path without them (or, with --target, without a URL) is skipped.
func (f *flags) comparePaths() ([]pathSpec, error) {
	urls := map[string]string{}
	metrics := map[string]string{}
	for _, list := range []struct {
		flag string
		in   []string
		out  map[string]string
	}{{"--target", f.targets, urls}, {"--metrics", f.metrics, metrics}} {
		for _, v := range list.in {
			name, u, ok := strings.Cut(v, "=")
			if !ok || !slices.Contains(Paths, name) || !strings.HasPrefix(u, "http") {
				return nil, fmt.Errorf("bench: --compare %s %q: want PATH=URL, PATH one of %s", list.flag, v, strings.Join(Paths, ", "))
			}
			if _, dup := list.out[name]; dup {
				return nil, fmt.Errorf("bench: --compare %s %s given twice", list.flag, name)
			}
			list.out[name] = strings.TrimRight(u, "/")
		}
	}
	var specs []pathSpec
	for name := range strings.SplitSeq(f.paths, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(Paths, name) {
			return nil, fmt.Errorf("bench: --paths: unknown path %q (%s)", name, strings.Join(Paths, ", "))
		}
		if slices.ContainsFunc(specs, func(s pathSpec) bool { return s.name == name }) {
			return nil, fmt.Errorf("bench: --paths: %s given twice", name)
		}
		sp := pathSpec{name: name, url: urls[name], metrics: metrics[name]}
		switch {
		case !f.self && sp.url == "":
			sp.skip = fmt.Sprintf("no --target %s=URL given", name)
		case f.self && name != PathEmbedded && (f.redisURL == "" || f.amqpURL == "" ||
			!(strings.HasPrefix(f.databaseURL, "mysql://") || strings.HasPrefix(f.databaseURL, "postgres://"))):
			sp.skip = "needs --database-url (MySQL or PostgreSQL), --redis-url and --amqp-url (or FLASHSALE_DATABASE_URL, FLASHSALE_REDIS_URL, FLASHSALE_AMQP_URL)"
		}
		specs = append(specs, sp)
	}
	if len(specs) == 0 {
		return nil, errors.New("bench: --paths names no path")
	}
	return specs, nil
}

// validateParts refuses --parts where it cannot run: it measures the
// accepted loop's parts beside a distributed server's ceiling round.
func (f *flags) validateParts() error {
	switch {
	case !f.parts:
		return nil
	case f.shape != LoopAccepted:
		return errors.New("bench: --parts is for --shape accepted: the parts are an accepted purchase's")
	case f.self || f.compare:
		return errors.New("bench: --parts measures a distributed server's parts: give it --target, not --self or --compare")
	case !f.ceiling:
		return errors.New("bench: --parts needs --ceiling: the ceiling's round is the HTTP part")
	case !strings.HasPrefix(f.redisURL, "redis://") && !strings.HasPrefix(f.redisURL, "rediss://"),
		!strings.HasPrefix(f.amqpURL, "amqp://") && !strings.HasPrefix(f.amqpURL, "amqps://"):
		return errors.New("bench: --parts needs the target's Redis and RabbitMQ: --redis-url redis://… and --amqp-url amqp://… (or FLASHSALE_REDIS_URL, FLASHSALE_AMQP_URL)")
	}
	return nil
}

// validateWaitingRoom refuses what the waiting room's scenario does not
// take: it is one run of its own shape against one server.
func (f *flags) validateWaitingRoom() error {
	if f.waitingRoom == 0 {
		if f.given["streams"] || f.given["admit-rate"] {
			return errors.New("bench: --streams and --admit-rate are --waiting-room's")
		}
		return nil
	}
	for _, name := range []string{"compare", "ceiling", "parts", "shape", "rounds", "html", "mix", "peak", "duration", "guests", "difficulty", "think", "pay", "hammer"} {
		if f.given[name] {
			return fmt.Errorf("bench: --%s does not go with --waiting-room", name)
		}
	}
	switch {
	case f.kind == string(flashsale.KindSlot) || f.kind == string(flashsale.KindSeats):
		// Its queue admits guests against the sale's places in all, and
		// admitted_could_buy wants every one admitted to buy: of a sale of
		// several slots or departures, a guest admitted for a full one cannot.
		return fmt.Errorf("bench: --kind %s does not go with --waiting-room: its scenario sells a night of rooms (the queue admits against the places in all, and every guest admitted must be able to buy)", f.kind)
	case f.waitingRoom < 0 || f.streams < 0:
		return errors.New("bench: --waiting-room and --streams must not be negative")
	case f.stock < 1:
		return errors.New("bench: --waiting-room needs --stock of at least one room")
	case f.admitRate < 0.1 || f.admitRate > 100000:
		return errors.New("bench: --admit-rate is 0.1 to 100000 (the sale's admit_per_second)")
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device that is
// not /dev/null), the only place live progress belongs.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}
