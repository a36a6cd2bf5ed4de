package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/redis"
)

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
	around func(ctx context.Context, c *Client) (after func(context.Context) (string, error), err error)
}

// benchRounds runs f.rounds rounds against t (each after the ceiling's
// round, when there is a ceiling) and checks each, into a report.
func benchRounds(ctx context.Context, f *flags, shape Shape, mix Mix, t benchTarget,
	ceiling *Client, ceilingWhat string, progress io.Writer) (*Report, error) {
	target := NewClient(t.base, f.admin, f.secret, f.conns)
	target.Issuer, target.Audience = f.issuer, f.audience
	defer target.CloseIdle()
	rep := &Report{Target: t.base, Shape: shape.String(), Mix: mix.String(), Ceiling: ceilingWhat, Notes: t.notes}
	loop, isLoop := shape.(Loop)
	if isLoop {
		rep.Mix = ""
	}
	if f.parts {
		rep.Notes = append(rep.Notes, partsNote(loop))
	}
	if s := f.newSale(shape); s.Kind == flashsale.KindSlot || s.Kind == flashsale.KindSeats {
		rep.Kind = string(s.Kind)
		rep.Notes = append(rep.Notes, slotsNote(s))
	}
	for round := range f.rounds {
		sale := f.newSale(shape) // the ceiling's guests send the same bodies
		cfg := Config{Shape: shape, Mix: mix, Think: f.think, Pay: f.pay, Hammer: f.hammer,
			Progress: progress, Seed: uint64(round), Users: fmt.Sprintf("b%s-%sr%d-", RunID(), t.name, round),
			Slots: sale.SlotNames(), Vehicles: sale.Vehicles()}
		if ceiling != nil {
			cfg.Client, cfg.SaleID = ceiling, "x"
			if progress != nil {
				fmt.Fprintf(progress, "round %d/%d, ceiling\n", round+1, f.rounds)
			}
			res, err := Run(ctx, cfg)
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
		sale = f.newSale(shape)
		cfg.Slots, cfg.Vehicles = sale.SlotNames(), sale.Vehicles()
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
		res, err := Run(ctx, cfg)
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
		ck, err := Verify(ctx, target, id, sale.PerUserLimit, res, f.drain)
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

// newSale is a round's sale: --stock rooms of a night, or the loop's; a
// slot sale of as many places with --kind slot, a shuttle's seats with
// --kind seats.
func (f *flags) newSale(shape Shape) Sale {
	sale := NewSale(f.stock, f.hold)
	if l, ok := shape.(Loop); ok {
		sale = l.Sale(f.hold, f.drain)
	}
	switch flashsale.Kind(f.kind) {
	case flashsale.KindSlot:
		sale = sale.AsSlots()
	case flashsale.KindSeats:
		sale = sale.AsSeats()
	}
	sale.Test = !f.realSales
	if f.difficulty > 0 {
		sale.Challenge = &struct {
			Difficulty int `json:"difficulty"`
		}{f.difficulty}
	}
	return sale
}

// slotsNote says what a slot or seats sale the rounds sell is.
func slotsNote(s Sale) string {
	places := 0
	for _, n := range s.Nights {
		places += n.Stock
	}
	if s.Kind == flashsale.KindSeats {
		deps := s.SlotNames()
		return fmt.Sprintf("Seats sales (--kind seats): each round's sale is a shuttle's %d seats in %d departure(s) of %s (%s in %s) of %d vehicle(s) each; "+
			"each purchase names its departure (the sessions spread evenly over them), seats 1; the check adds up the departures, a departure's places its vehicles'.",
			places, len(deps), s.Nights[0].Date, strings.Join(SlotTimes[:len(deps)], ", "), s.TimeZone, s.Vehicles()[0])
	}
	return fmt.Sprintf("Slot sales (--kind slot): each round's sale is %d places in %d slot(s) of %s (%s in %s, %d min); "+
		"each purchase names its slot (the sessions spread evenly over them), quantity 1; the check adds up the slots.",
		places, len(s.Nights), s.Nights[0].Date, strings.Join(SlotTimes[:len(s.Nights)], ", "), s.TimeZone, SlotMinutes)
}

// writeReports writes --json (v) and --html (with html) when asked.
func writeReports(f *flags, v any, html func(io.Writer) error) error {
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

func brokenOf(rep *Report) []string {
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

// runCompare is `flashsale bench --compare`: the same shape against each
// path in turn, each (with --self) a server of its own started for it and
// stopped after it, then the table.
func runCompare(ctx context.Context, f *flags, shape Shape, mix Mix, stdout, progress io.Writer) error {
	specs, err := f.comparePaths()
	if err != nil {
		return err
	}
	c := &Comparison{Shape: shape.String(), Mix: mix.String()}
	if _, closed := shape.(Loop); closed {
		c.Mix, c.Closed = "", true
	}
	var failed []string
	for _, sp := range specs {
		pr := &PathResult{Name: sp.name, Title: PathTitle(sp.name), Skipped: sp.skip}
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
func comparePath(ctx context.Context, f *flags, shape Shape, mix Mix, sp pathSpec, progress io.Writer) (*Report, string, error) {
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
		if sp.name != PathEmbedded {
			name := fmt.Sprintf("flashsale-bench-%s-%s", RunID(), sp.name)
			env = f.distributedEnv(name, sp.name == PathDBMode)
			cleanup = func() { cleanupDistributed(f.redisURL, f.amqpURL, name) }
		}
		p, base, admin, secret, err := spawnSelf(ctx, env)
		if err != nil {
			return nil, "", err
		}
		procs = append(procs, p)
		t.base, fp.admin, fp.secret = base, admin, secret
		t.notes = append(t.notes, "The server ran on this machine beside the load generator, in a process of its own started for this path alone (--self).")
		if sp.name != PathEmbedded {
			t.notes = append(t.notes, "One instance, on the database "+app.MaskURL(f.databaseURL)+", Redis "+app.MaskURL(f.redisURL)+" and RabbitMQ "+app.MaskURL(f.amqpURL)+
				", with its own Redis key prefix and queue, removed afterwards.")
		}
	}
	t.metrics = cmp.Or(sp.metrics, t.base+"/metrics")
	if sp.name == PathDBMode {
		t.around = dbModeAround(t.metrics)
		t.notes = append(t.notes, "Db mode: once each round's sale was created, the breaker was forced open (POST /api/admin/breaker {\"force\":\"open\"}) "+
			"and the load began when the server's flashsale_selling said db; after the load the breaker was handed back (auto) and the check "+
			"waited for the server to sell from the engine again.")
	}
	var ceiling *Client
	var ceilingWhat string
	if f.ceiling {
		p, base, what, err := spawnCeiling(ctx, f.ceilingSrc)
		if err != nil {
			return nil, "", err
		}
		procs = append(procs, p)
		ceilingWhat = what
		ceiling = NewClient(base, "", fp.secret, f.conns)
		defer ceiling.CloseIdle()
	}
	rep, err := benchRounds(ctx, &fp, shape, mix, t, ceiling, ceilingWhat, progress)
	return rep, t.base, err
}

// distributedEnv is one instance of the distributed shape on the given
// services, under name (its Redis prefix and queue), in db mode or not.
func (f *flags) distributedEnv(name string, dbMode bool) func(string) []string {
	mode := app.BreakerReject
	if dbMode {
		mode = app.BreakerDB
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
func dbModeAround(metrics string) func(context.Context, *Client) (func(context.Context) (string, error), error) {
	return func(ctx context.Context, c *Client) (func(context.Context) (string, error), error) {
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
		got, err := Selling(ctx, metrics)
		if err == nil && got == from {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("its metrics do not say what it sells from after %s: %w", within, err)
			}
			return fmt.Errorf("it still sells from %q, not %q, after %s", got, from, within)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// cleanupDistributed removes what a --self distributed server (or a round
// of --parts) left under name: its Redis keys and its queues and
// exchanges. The database's rows stay: the database is the caller's.
func cleanupDistributed(redisURL, amqpURL, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	redis.DeletePrefix(ctx, redisURL, name+":")
	amqp.DeleteTopology(ctx, amqp.Config{URL: amqpURL, Name: name})
}
