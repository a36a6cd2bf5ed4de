package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/bench"
)

const benchUsage = `usage: flashsale bench (--self | --target URL) [flags]
       flashsale bench --compare (--self | --target PATH=URL ...) [flags]

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

The database's load is read from the server's own metrics (/metrics, or
--metrics URL) once a second. The source's pulse at full size is
--peak 8000 --duration 52s; the defaults are that pulse scaled to a
small machine.

flags:
`

// benchServeCeiling is the hidden flag with which bench runs its own copy
// of the ceiling in a child process when ../shared/bench/ceiling is absent.
const benchServeCeiling = "--serve-ceiling"

// benchFlags are bench's settings.
type benchFlags struct {
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
}

// runBench is `flashsale bench`.
func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 2 && args[0] == benchServeCeiling {
		ln, err := net.Listen("tcp", args[1])
		if err != nil {
			return err
		}
		return bench.ServeCeiling(ln)
	}
	fset := newFlagSet("bench", args, stdout, stderr)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), benchUsage)
		printFlags(fset, nil)
	}
	var f benchFlags
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
	fset.StringVar(&f.paths, "paths", strings.Join(bench.Paths, ","), "with --compare: the paths to run")
	fset.StringVar(&f.databaseURL, "database-url", getenv("FLASHSALE_DATABASE_URL"), "with --compare --self: the MySQL or PostgreSQL database of the distributed and dbmode servers (FLASHSALE_DATABASE_URL)")
	fset.StringVar(&f.redisURL, "redis-url", getenv("FLASHSALE_REDIS_URL"), "with --compare --self: their Redis; with --parts: the target's (FLASHSALE_REDIS_URL)")
	fset.StringVar(&f.amqpURL, "amqp-url", getenv("FLASHSALE_AMQP_URL"), "with --compare --self: their RabbitMQ; with --parts: the target's (FLASHSALE_AMQP_URL)")
	fset.StringVar(&f.shape, "shape", "pulse", "arrivals: pulse, burst, constant or ramp; closed loops: soldout or accepted")
	fset.Float64Var(&f.peak, "peak", 1000, "peak arrivals (guest sessions) per second: pulse, constant, ramp")
	fset.DurationVar(&f.duration, "duration", 20*time.Second, "length of the shape: pulse, constant, ramp, soldout, accepted")
	fset.IntVar(&f.guests, "guests", 2000, "guests arriving at once: burst")
	fset.StringVar(&f.mix, "mix", bench.DefaultMix.String(), "shares of guests: normal, scalper, broken")
	fset.IntVar(&f.stock, "stock", 100, "rooms in the sale (one night); soldout and accepted choose their own")
	fset.IntVar(&f.hold, "hold", 10, "the sale's hold_seconds")
	fset.IntVar(&f.difficulty, "difficulty", 0, "the sale's proof-of-work difficulty (0: none)")
	fset.DurationVar(&f.think, "think", bench.ThinkDefault, "mean time a guest with a 202 takes to pay")
	fset.Float64Var(&f.pay, "pay", bench.PayDefault, "share of guests with a 202 who pay (half the rest cancel, the others let the hold expire)")
	fset.IntVar(&f.hammer, "hammer", bench.HammerDefault, "purchases a scalper fires with one token")
	fset.IntVar(&f.rounds, "rounds", 1, "rounds (the report quotes medians)")
	fset.IntVar(&f.conns, "conns", 512, "connections the client keeps to the server (soldout: 32 and accepted: 256 workers, one connection each, unless given)")
	fset.DurationVar(&f.drain, "drain", 30*time.Second, "how long to wait for orders to settle before the check gives up")
	fset.StringVar(&f.jsonFile, "json", "", "write the report as JSON to this file")
	fset.StringVar(&f.htmlFile, "html", "", "write the report as one self-contained HTML page (charts inline, nothing fetched) to this file")
	fset.StringVar(&f.progress, "progress", "auto", "live progress on stderr: auto (a terminal, not CI), on or off")
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	f.given = map[string]bool{}
	fset.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	if fset.NArg() > 0 {
		return usageErrorf(fset, stderr, "unexpected arguments %q", fset.Args())
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
	var ceiling *bench.Client
	var ceilingWhat string
	if f.ceiling {
		p, base, what, err := spawnCeiling(ctx, f.ceilingSrc)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		ceilingWhat = what
		ceiling = bench.NewClient(base, "", f.secret, f.conns)
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

// benchTarget is one server to bench: its URL, its metrics, what the
// report must say of it, and what to do around each round's load (the
// dbmode path forces the breaker open for it).
type benchTarget struct {
	name          string // "" or the path's, with a dash: its guests' prefix
	base, metrics string
	notes         []string
	// around, when set, runs before each round's load with the round's
	// sale created, and returns what to run once the load is over,
	// before the check, which says what it did for the report's notes.
	around func(ctx context.Context, c *bench.Client) (after func(context.Context) (string, error), err error)
}

// benchRounds runs f.rounds rounds against t (each after the ceiling's
// round, when there is a ceiling) and checks each, into a report.
func benchRounds(ctx context.Context, f *benchFlags, shape bench.Shape, mix bench.Mix, t benchTarget,
	ceiling *bench.Client, ceilingWhat string, progress io.Writer) (*bench.Report, error) {
	target := bench.NewClient(t.base, f.admin, f.secret, f.conns)
	target.Issuer, target.Audience = f.issuer, f.audience
	defer target.CloseIdle()
	rep := &bench.Report{Target: t.base, Shape: shape.String(), Mix: mix.String(), Ceiling: ceilingWhat, Notes: t.notes}
	loop, isLoop := shape.(bench.Loop)
	if isLoop {
		rep.Mix = ""
	}
	if f.parts {
		rep.Notes = append(rep.Notes, partsNote(loop))
	}
	for round := range f.rounds {
		cfg := bench.Config{Shape: shape, Mix: mix, Think: f.think, Pay: f.pay, Hammer: f.hammer,
			Progress: progress, Seed: uint64(round), Users: fmt.Sprintf("b%s-%sr%d-", runID(), t.name, round)}
		if ceiling != nil {
			cfg.Client, cfg.SaleID = ceiling, "x"
			if progress != nil {
				fmt.Fprintf(progress, "round %d/%d, ceiling\n", round+1, f.rounds)
			}
			res, err := bench.Run(ctx, cfg)
			if err != nil {
				return nil, fmt.Errorf("bench: ceiling round %d: %w", round+1, err)
			}
			rep.Ceilings = append(rep.Ceilings, res)
			if f.parts {
				if progress != nil {
					fmt.Fprintf(progress, "round %d/%d, parts\n", round+1, f.rounds)
				}
				p, err := benchParts(ctx, f, loop, round, res)
				if err != nil {
					return nil, fmt.Errorf("bench: parts round %d: %w", round+1, err)
				}
				rep.PartsRounds = append(rep.PartsRounds, p)
			}
		}
		sale := bench.NewSale(f.stock, f.hold)
		if isLoop {
			sale = loop.Sale(f.hold, f.drain)
		}
		sale.Test = !f.realSales
		if f.difficulty > 0 {
			sale.Challenge = &struct {
				Difficulty int `json:"difficulty"`
			}{f.difficulty}
		}
		id, err := target.CreateSale(ctx, sale)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		after := func(context.Context) (string, error) { return "", nil }
		if t.around != nil {
			if after, err = t.around(ctx, target); err != nil {
				return nil, fmt.Errorf("bench: round %d: %w", round+1, err)
			}
		}
		cfg.Client, cfg.SaleID, cfg.Difficulty, cfg.Metrics = target, id, f.difficulty, t.metrics
		if progress != nil {
			fmt.Fprintf(progress, "round %d/%d, sale %s\n", round+1, f.rounds, id)
		}
		res, err := bench.Run(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("bench: round %d: %w", round+1, err)
		}
		rep.Rounds = append(rep.Rounds, res)
		note, err := after(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench: round %d: %w", round+1, err)
		}
		if note != "" {
			rep.Notes = append(rep.Notes, fmt.Sprintf("Round %d: %s", round+1, note))
		}
		ck, err := bench.Verify(ctx, target, id, sale.PerUserLimit, res, f.drain)
		if err != nil {
			return nil, fmt.Errorf("bench: check round %d: %w", round+1, err)
		}
		rep.Checks = append(rep.Checks, ck)
		if f.cleanup && sale.Test {
			if err := target.DeleteSale(ctx, id); err != nil {
				return nil, fmt.Errorf("bench: cleanup of round %d: %w", round+1, err)
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("Round %d: test sale %s deleted with its orders (--cleanup).", round+1, id))
		}
	}
	rep.Summarize()
	return rep, nil
}

// writeReports writes --json (v) and --html (with html) when asked.
func writeReports(f *benchFlags, v any, html func(io.Writer) error) error {
	if f.jsonFile != "" {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.jsonFile, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if f.htmlFile != "" {
		var b bytes.Buffer
		if err := html(&b); err != nil {
			return fmt.Errorf("bench: html report: %w", err)
		}
		if err := os.WriteFile(f.htmlFile, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

func brokenOf(rep *bench.Report) []string {
	var broken []string
	for _, c := range rep.Checks {
		for _, b := range c.Broken() {
			if !slices.Contains(broken, b) {
				broken = append(broken, b)
			}
		}
	}
	return broken
}

// validate checks the flags that go together and builds the shape and the mix.
func (f *benchFlags) validate() (bench.Shape, bench.Mix, error) {
	mix, err := bench.ParseMix(f.mix)
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
	case bench.LoopSoldOut, bench.LoopAccepted:
		l := bench.Loop{Path: f.shape, Conns: f.conns, Duration: f.duration}
		if !f.given["conns"] {
			l.Conns = bench.SoldOutConnsDefault
			if l.Path == bench.LoopAccepted {
				l.Conns = bench.AcceptedConnsDefault
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
		return bench.Burst(f.guests), mix, nil
	}
	if f.peak <= 0 || f.duration <= 0 {
		return nil, mix, errors.New("bench: --peak and --duration must be positive")
	}
	switch f.shape {
	case "pulse":
		return bench.Pulse(f.peak, f.duration), mix, nil
	case "constant":
		return bench.Constant(f.peak, f.duration), mix, nil
	case "ramp":
		return bench.Ramp(f.peak, f.duration), mix, nil
	}
	return nil, mix, fmt.Errorf("bench: unknown --shape %q (pulse, burst, constant, ramp, soldout, accepted)", f.shape)
}

// child is a process bench started, and the temporary path it leaves.
type child struct {
	cmd  *exec.Cmd
	temp string
	done chan struct{} // closed once the process has exited
}

// startChild starts cmd; the child's done closes when it exits.
func startChild(cmd *exec.Cmd, temp string) (*child, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, temp: temp, done: make(chan struct{})}
	go func() { cmd.Wait(); close(c.done) }()
	return c, nil
}

func (c *child) stop() {
	c.cmd.Process.Kill()
	<-c.done
	if c.temp != "" {
		os.RemoveAll(c.temp)
	}
}

// spawnSelf runs this binary's serve in a process of its own on a free
// port with a temporary data dir and fresh secrets, and waits until it is
// ready. env(dir) is the shape's settings, after the inherited
// environment's (so they win); the data dir goes with the process.
func spawnSelf(ctx context.Context, env func(dir string) []string) (*child, string, string, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", "", "", fmt.Errorf("bench --self: %w", err)
	}
	dir, err := os.MkdirTemp("", "flashsale-bench-")
	if err != nil {
		return nil, "", "", "", fmt.Errorf("bench --self: %w", err)
	}
	addr, err := freePort()
	if err != nil {
		return nil, "", "", "", err
	}
	admin, secret := randomHex(), randomHex()
	cmd := exec.Command(exe, "serve")
	cmd.Env = append(append(os.Environ(), env(dir)...), "FLASHSALE_ADDR="+addr, "FLASHSALE_DATA_DIR="+dir,
		"FLASHSALE_ADMIN_TOKEN="+admin, "FLASHSALE_JWT_SECRET="+secret, "FLASHSALE_LOG_LEVEL=error", "FLASHSALE_METRICS_ADDR=")
	var log bytes.Buffer // the server's errors (FLASHSALE_LOG_LEVEL=error), read should it not start
	cmd.Stdout, cmd.Stderr = io.Discard, &log
	base := "http://" + addr
	c, err := serveChild(ctx, cmd, dir, base+"/readyz", http.StatusOK, &log)
	if err != nil {
		return nil, "", "", "", fmt.Errorf("bench --self: the server did not start: %w", err)
	}
	return c, base, admin, secret, nil
}

// embeddedEnv is the embedded shape in dir: SQLite there, and none of the
// distributed shape's settings the environment may hold.
func embeddedEnv(dir string) []string {
	return []string{"FLASHSALE_DATABASE_URL=sqlite://" + filepath.Join(dir, "flashsale.db"),
		"FLASHSALE_REDIS_URL=", "FLASHSALE_AMQP_URL=", "FLASHSALE_BREAKER_MODE="}
}

// spawnCeiling builds ../shared/bench/ceiling (src) and runs it in a
// process of its own, or, when src has no main.go or the go tool is
// missing, runs this binary's copy of it as a child. It says which. A
// ceiling that exits before it answers is reported at once, with what it
// printed.
func spawnCeiling(ctx context.Context, src string) (*child, string, string, error) {
	addr, err := freePort()
	if err != nil {
		return nil, "", "", err
	}
	var cmd *exec.Cmd
	what, temp := "", ""
	if _, err := os.Stat(filepath.Join(src, "main.go")); err == nil {
		if gobin, err := exec.LookPath("go"); err == nil {
			if temp, err = os.MkdirTemp("", "flashsale-ceiling-"); err != nil {
				return nil, "", "", fmt.Errorf("bench --ceiling: %w", err)
			}
			bin := filepath.Join(temp, "ceiling")
			if out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, filepath.Join(src, "main.go")).CombinedOutput(); err != nil {
				os.RemoveAll(temp)
				return nil, "", "", fmt.Errorf("bench --ceiling: build %s: %w\n%s", src, err, out)
			}
			cmd, what = exec.Command(bin, "-addr", addr), src+" (built, own process)"
		}
	}
	if cmd == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, "", "", fmt.Errorf("bench --ceiling: %w", err)
		}
		cmd, what = exec.Command(exe, "bench", benchServeCeiling, addr), "this binary's copy of the ceiling handler (own process; "+src+" not found)"
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	base := "http://" + addr
	c, err := serveChild(ctx, cmd, temp, base+"/", http.StatusConflict, &out)
	if err != nil {
		return nil, "", "", fmt.Errorf("bench --ceiling: %w", err)
	}
	return c, base, what, nil
}

// serveChild starts cmd, whose output goes to out, and waits until url
// answers want. On failure it stops the process, removes temp, and ends
// its error with the last of what the process printed (out is read only
// once the process has exited).
func serveChild(ctx context.Context, cmd *exec.Cmd, temp, url string, want int, out *bytes.Buffer) (*child, error) {
	c, err := startChild(cmd, temp)
	if err != nil {
		os.RemoveAll(temp)
		return nil, err
	}
	if err := waitHTTP(ctx, url, want, c.done); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w\n%s", err, out.Bytes()[max(0, out.Len()-2000):])
	}
	return c, nil
}

// errExited is waitHTTP's answer when the process it waits for exits first.
var errExited = errors.New("the process exited before it answered")

// waitHTTP polls url until it answers want, for up to 30 s, or until
// exited closes: then errExited.
func waitHTTP(ctx context.Context, url string, want int, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %d within 30s (last: %v)", url, want, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("%s: %w", url, errExited)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("bench: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runID tells this bench's users and files from another's on the same server.
var runID = sync.OnceValue(func() string { return randomHex()[:8] })

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

// pathSpec is one path --compare runs: where it is (with --target), or
// why it does not run.
type pathSpec struct {
	name, url, metrics string
	skip               string
}

// comparePaths reads --paths, --target PATH=URL and --metrics PATH=URL.
// With --self, the distributed paths need the three services' URLs; a
// path without them (or, with --target, without a URL) is skipped.
func (f *benchFlags) comparePaths() ([]pathSpec, error) {
	urls := map[string]string{}
	metrics := map[string]string{}
	for _, list := range []struct {
		flag string
		in   []string
		out  map[string]string
	}{{"--target", f.targets, urls}, {"--metrics", f.metrics, metrics}} {
		for _, v := range list.in {
			name, u, ok := strings.Cut(v, "=")
			if !ok || !slices.Contains(bench.Paths, name) || !strings.HasPrefix(u, "http") {
				return nil, fmt.Errorf("bench: --compare %s %q: want PATH=URL, PATH one of %s", list.flag, v, strings.Join(bench.Paths, ", "))
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
		if !slices.Contains(bench.Paths, name) {
			return nil, fmt.Errorf("bench: --paths: unknown path %q (%s)", name, strings.Join(bench.Paths, ", "))
		}
		if slices.ContainsFunc(specs, func(s pathSpec) bool { return s.name == name }) {
			return nil, fmt.Errorf("bench: --paths: %s given twice", name)
		}
		sp := pathSpec{name: name, url: urls[name], metrics: metrics[name]}
		switch {
		case !f.self && sp.url == "":
			sp.skip = fmt.Sprintf("no --target %s=URL given", name)
		case f.self && name != bench.PathEmbedded && (f.redisURL == "" || f.amqpURL == "" ||
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

// runCompare is `flashsale bench --compare`: the same shape against each
// path in turn, each (with --self) a server of its own started for it and
// stopped after it, then the table.
func runCompare(ctx context.Context, f *benchFlags, shape bench.Shape, mix bench.Mix, stdout, progress io.Writer) error {
	specs, err := f.comparePaths()
	if err != nil {
		return err
	}
	c := &bench.Comparison{Shape: shape.String(), Mix: mix.String()}
	if _, closed := shape.(bench.Loop); closed {
		c.Mix, c.Closed = "", true
	}
	var failed []string
	for _, sp := range specs {
		pr := &bench.PathResult{Name: sp.name, Title: bench.PathTitle(sp.name), Skipped: sp.skip}
		c.Paths = append(c.Paths, pr)
		if sp.skip != "" {
			continue
		}
		if progress != nil {
			fmt.Fprintf(progress, "path %s\n", sp.name)
		}
		if pr.Report, pr.Target, err = comparePath(ctx, f, shape, mix, sp, progress); err != nil {
			pr.Skipped = "failed: " + err.Error()
			failed = append(failed, sp.name)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	c.Summarize()
	if err := c.WriteText(stdout); err != nil {
		return err
	}
	if err := writeReports(f, c, c.WriteHTML); err != nil {
		return err
	}
	var broken []string
	for _, p := range c.Paths {
		if p.Report != nil && !p.Report.OK {
			broken = append(broken, p.Name+": "+strings.Join(brokenOf(p.Report), ", "))
		}
	}
	switch {
	case len(broken) > 0:
		return fmt.Errorf("bench --compare: invariant broken: %s", strings.Join(broken, "; "))
	case len(failed) > 0:
		return fmt.Errorf("bench --compare: %s did not run to the end (the table says why)", strings.Join(failed, ", "))
	}
	return nil
}

// comparePath benches one path: starts its server (--self) or takes its
// URL, forces the breaker open around each round's load for dbmode, and
// returns the report and where the server was.
func comparePath(ctx context.Context, f *benchFlags, shape bench.Shape, mix bench.Mix, sp pathSpec, progress io.Writer) (*bench.Report, string, error) {
	var procs []*child
	var cleanup func() // after the servers stop: a live one writes its keys again
	defer func() {
		for _, p := range procs {
			p.stop()
		}
		if cleanup != nil {
			cleanup()
		}
	}()
	fp := *f
	t := benchTarget{name: sp.name + "-", base: sp.url}
	if f.self {
		env := embeddedEnv
		if sp.name != bench.PathEmbedded {
			name := fmt.Sprintf("flashsale-bench-%s-%s", runID(), sp.name)
			env = f.distributedEnv(name, sp.name == bench.PathDBMode)
			cleanup = func() { cleanupDistributed(f.redisURL, f.amqpURL, name) }
		}
		p, base, admin, secret, err := spawnSelf(ctx, env)
		if err != nil {
			return nil, "", err
		}
		procs = append(procs, p)
		t.base, fp.admin, fp.secret = base, admin, secret
		t.notes = append(t.notes, "The server ran on this machine beside the load generator, in a process of its own started for this path alone (--self).")
		if sp.name != bench.PathEmbedded {
			t.notes = append(t.notes, "One instance, on the database "+maskURL(f.databaseURL)+", Redis "+maskURL(f.redisURL)+" and RabbitMQ "+maskURL(f.amqpURL)+
				", with its own Redis key prefix and queue, removed afterwards.")
		}
	}
	t.metrics = cmp.Or(sp.metrics, t.base+"/metrics")
	if sp.name == bench.PathDBMode {
		t.around = dbModeAround(t.metrics)
		t.notes = append(t.notes, "Db mode: once each round's sale was created, the breaker was forced open (POST /api/admin/breaker {\"force\":\"open\"}) "+
			"and the load began when the server's flashsale_selling said db; after the load the breaker was handed back (auto) and the check "+
			"waited for the server to sell from the engine again.")
	}
	var ceiling *bench.Client
	var ceilingWhat string
	if f.ceiling {
		p, base, what, err := spawnCeiling(ctx, f.ceilingSrc)
		if err != nil {
			return nil, "", err
		}
		procs = append(procs, p)
		ceilingWhat = what
		ceiling = bench.NewClient(base, "", fp.secret, f.conns)
		defer ceiling.CloseIdle()
	}
	rep, err := benchRounds(ctx, &fp, shape, mix, t, ceiling, ceilingWhat, progress)
	return rep, t.base, err
}

// distributedEnv is one instance of the distributed shape on the given
// services, under name (its Redis prefix and queue), in db mode or not.
func (f *benchFlags) distributedEnv(name string, dbMode bool) func(string) []string {
	mode := BreakerReject
	if dbMode {
		mode = BreakerDB
	}
	return func(string) []string {
		return []string{"FLASHSALE_DATABASE_URL=" + f.databaseURL, "FLASHSALE_REDIS_URL=" + f.redisURL, "FLASHSALE_AMQP_URL=" + f.amqpURL,
			"FLASHSALE_REDIS_PREFIX=" + name + ":", "FLASHSALE_QUEUE_NAME=" + name, "FLASHSALE_BREAKER_MODE=" + mode}
	}
}

// dbModeAround forces the breaker open once a round's sale exists and
// waits for the server to sell from the database; what it returns hands
// the breaker back, waits for the server to sell from the engine, and
// says how long each switch took.
func dbModeAround(metrics string) func(context.Context, *bench.Client) (func(context.Context) (string, error), error) {
	return func(ctx context.Context, c *bench.Client) (func(context.Context) (string, error), error) {
		forced := time.Now()
		if err := c.ForceBreaker(ctx, "open"); err != nil {
			return nil, fmt.Errorf("db mode: %w (the distributed shape has a breaker; the embedded one has none)", err)
		}
		if err := waitSelling(ctx, metrics, "db", 30*time.Second); err != nil {
			c.ForceBreaker(ctx, "auto")
			return nil, fmt.Errorf("db mode: the breaker is open but %w (is the server started with FLASHSALE_BREAKER_MODE=db?)", err)
		}
		in := time.Since(forced)
		return func(ctx context.Context) (string, error) {
			back := time.Now()
			if err := c.ForceBreaker(ctx, "auto"); err != nil {
				return "", fmt.Errorf("db mode: %w", err)
			}
			if err := waitSelling(ctx, metrics, "engine", 60*time.Second); err != nil {
				return "", fmt.Errorf("db mode: the breaker is handed back but %w", err)
			}
			return fmt.Sprintf("the server sold from the database (flashsale_selling{from=\"db\"}) %.1f s after the breaker was forced open, "+
				"before the load began, and from the engine again %.1f s after it was handed back.", in.Seconds(), time.Since(back).Seconds()), nil
		}, nil
	}
}

// waitSelling polls the server's metrics until it sells from `from`.
func waitSelling(ctx context.Context, metrics, from string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		got, err := bench.Selling(ctx, metrics)
		if err == nil && got == from {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("its metrics do not say what it sells from after %s: %w", within, err)
			}
			return fmt.Errorf("it still sells from %q, not %q, after %s", got, from, within)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// cleanupDistributed removes what a --self distributed server left under
// name: its Redis keys and its queues and exchanges. The database's rows
// stay: the database is the caller's.
func cleanupDistributed(redisURL, amqpURL, name string) {
	if o, err := goredis.ParseURL(redisURL); err == nil {
		rc := goredis.NewClient(o)
		// A thousand keys a round trip: a round of --parts leaves
		// hundreds of thousands, and one UNLINK each outran any timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		iter := rc.Scan(ctx, 0, name+":*", 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 1000 {
				rc.Unlink(ctx, batch...)
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			rc.Unlink(ctx, batch...)
		}
		cancel()
		rc.Close()
	}
	if conn, err := amqp091.Dial(amqpURL); err == nil {
		if ch, err := conn.Channel(); err == nil {
			ch.QueueDelete(name+".orders", false, false, false)
			ch.QueueDelete(name+".orders.dead", false, false, false)
			ch.ExchangeDelete(name+".orders", false, false)
			ch.ExchangeDelete(name+".orders.dlx", false, false)
		}
		conn.Close()
	}
}
