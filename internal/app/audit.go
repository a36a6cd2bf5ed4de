package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/tracing"
)

const auditUsage = `usage: flashsale audit [--sale ID] [--repair] [--audit-grace 5m]

Proves each current sale's books balance (invariant I6), or only the sale
--sale names, and exits 0 only when every audited sale balances. It reads
the configuration serve reads (FLASHSALE_* variables).

In the distributed shape it compares the database with the Redis stock
engine and the outbox. --repair does what is safe (retake, release or
republish single orders; never touches the database's counters), then
prints the audit after the repair. A rebuild of a sale's stock is left to
the serving instances: this command has no order consumer to drain the
queue with first.

In the embedded shape the stock engine lives in the memory of the serving
process, so this command audits the database's own invariants only
(db_oversold, db_counters_drift, user_over_limit, duplicate_key), and
cannot repair: use GET /api/admin/sales/{id}/audit and
POST /api/admin/sales/{id}/audit/repair on the server for the rest.

flags:
`

// embeddedNote says what the embedded shape's audit leaves out.
const embeddedNote = "embedded shape: the stock engine lives in the memory of the serving process, so only the database's own " +
	"invariants are audited (db_oversold, db_counters_drift, user_over_limit, duplicate_key); " +
	"GET /api/admin/sales/{id}/audit on the server audits the engine too"

// errNoConsumer is the drainer's answer when a repair from this command
// would rebuild a sale: a rebuild must first drain the order queue, and
// only a serving instance consumes it.
var errNoConsumer = errors.New("flashsale audit has no order consumer to drain the queue with, so a serving instance must rebuild the sale: " +
	"its heal loop rebuilds a sale the engine lost")

// cliDrainer is the order consumer this command does not have. Pause holds
// nothing, as there is nothing to hold; Drain refuses, so a rebuild led
// from here never loads a sale while orders may still be in the queue. By
// then the rebuild has closed the sale (funnel's heal unloads a forced sale
// before it drains), so the serving instances find it lost and rebuild it
// with their own consumers; if the heal drained first, the refusal would
// leave the sale as it was.
// Backlog reads the queue's depth when there is a queue.
type cliDrainer struct{ queue *amqp.Config }

func (cliDrainer) Pause(context.Context) error { return nil }
func (cliDrainer) Resume()                     {}
func (cliDrainer) Drain(context.Context) error { return errNoConsumer }

func (d cliDrainer) Backlog(ctx context.Context) (int, error) {
	if d.queue == nil {
		return 0, nil
	}
	return amqp.Backlog(ctx, *d.queue)
}

// openRedis opens the Redis stock engine the configuration names, with the
// key prefix and timeout serve uses, and tr's command spans (nil: none).
func openRedis(ctx context.Context, cfg Config, logger *slog.Logger, tr *tracing.Tracing) (*redis.Engine, error) {
	return redis.Open(ctx, cfg.RedisURL, redis.Options{Prefix: cfg.RedisPrefix, Timeout: cfg.RedisTimeout, Hook: tr.RedisHook()}, logger)
}

// Audit is `flashsale audit`.
func Audit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fset := NewFlagSet("audit", args, stdout, stderr)
	saleID := fset.String("sale", "", "audit this sale only (default: every current sale)")
	repair := fset.Bool("repair", false, "repair what is safe, then print the audit after the repair (distributed shape)")
	// The command's own flags; the settings serve reads are flags too
	// (ParseConfig), listed by serve --help, not here.
	own := map[string]bool{"sale": true, "repair": true}
	fset.Usage = func() {
		w := fset.Output()
		fmt.Fprint(w, auditUsage)
		PrintFlags(fset, func(name string) bool { return own[name] })
		fmt.Fprintln(w, "\nand every setting of serve (flashsale serve --help), the database's and Redis's first;\n--audit-grace (FLASHSALE_AUDIT_GRACE) is how long a reservation may wait for its order row")
	}
	cfg, err := ParseConfig(fset, args, getenv)
	if err != nil {
		return err
	}
	if *repair && !cfg.Distributed() {
		return errors.New("audit --repair needs the stock engine, which the embedded shape keeps in the serving process: " +
			"POST /api/admin/sales/{id}/audit/repair on the server")
	}
	logger := newLogger(cfg, stderr)

	openCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	store, err := OpenStore(openCtx, cfg, logger)
	if err != nil {
		return err
	}
	defer store.Close()
	fc := funnel.Config{Store: store, AuditGrace: cfg.AuditGrace, AuditInterval: -1, Logger: logger}
	if cfg.Distributed() {
		e, err := openRedis(openCtx, cfg, logger, nil)
		if err != nil {
			return err
		}
		defer e.Close()
		d := cliDrainer{}
		if cfg.AMQPURL != "" {
			q := queueConfig(cfg)
			d.queue = &q
		}
		fc.Engine, fc.Fence, fc.Drainer = e.Roles(), e, d
		if *repair {
			if fc.Republish, err = openRepublish(openCtx, cfg, store, logger); err != nil {
				return err
			}
			if c, ok := fc.Republish.(io.Closer); ok {
				defer c.Close()
			}
		}
	} else {
		// Never consulted: AuditDatabase reads the database alone.
		fc.Engine = inmem.NewEngine().Roles()
		fmt.Fprintln(stdout, embeddedNote)
	}
	svc := funnel.New(fc)

	ids := []string{*saleID}
	if *saleID == "" {
		sales, err := store.Sales(ctx, time.Now())
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		ids = ids[:0]
		for _, s := range sales {
			ids = append(ids, s.ID)
		}
		if len(ids) == 0 {
			fmt.Fprintln(stdout, "no current sales")
			return nil
		}
	}
	unbalanced := 0
	for _, id := range ids {
		var a *flashsale.Audit
		switch {
		case !cfg.Distributed():
			a, err = svc.AuditDatabase(ctx, id)
		case *repair:
			a, err = svc.Repair(ctx, id)
		default:
			a, err = svc.Audit(ctx, id)
		}
		if errors.Is(err, flashsale.ErrNotFound) {
			return fmt.Errorf("audit: no sale %q", id)
		}
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		printAudit(stdout, a)
		if !a.Balanced() {
			unbalanced++
		}
	}
	if unbalanced > 0 {
		return fmt.Errorf("audit: %d of %d sales do not balance", unbalanced, len(ids))
	}
	return nil
}

// queueConfig is the broker and queue names the configuration gives,
// shared by serve and audit.
func queueConfig(cfg Config) amqp.Config { return amqp.Config{URL: cfg.AMQPURL, Name: cfg.QueueName} }

// openRepublish opens the order path a repair publishes stranded
// reservations down again: the queue when there is one, else the database
// writer serve uses without a queue.
func openRepublish(ctx context.Context, cfg Config, store flashsale.Store, logger *slog.Logger) (flashsale.OrderWriter, error) {
	if cfg.AMQPURL == "" {
		return inmem.NewWriter(store, inmem.WriterConfig{}, logger), nil
	}
	pub, err := amqp.NewPublisher(ctx, queueConfig(cfg), logger)
	if err != nil {
		return nil, fmt.Errorf("open amqp publisher: %w", err)
	}
	return pub, nil
}

// printAudit writes a report: a heading, one line per night with its
// figures, one per finding, one per repair step.
func printAudit(w io.Writer, a *flashsale.Audit) {
	switch {
	case a.Balanced():
		fmt.Fprintf(w, "sale %s: balanced\n", a.SaleID)
	case len(a.Findings) == 1:
		fmt.Fprintf(w, "sale %s: 1 finding\n", a.SaleID)
	default:
		fmt.Fprintf(w, "sale %s: %d findings\n", a.SaleID, len(a.Findings))
	}
	for _, n := range a.Nights {
		if a.Engine {
			fmt.Fprintf(w, "  night %s: stock %d, held %d, sold %d, in flight %d, engine available %d, drift %+d\n",
				n.Date, n.Stock, n.Held, n.Sold, n.InFlight, n.EngineAvailable, n.Drift())
		} else {
			fmt.Fprintf(w, "  night %s: stock %d, held %d, sold %d\n", n.Date, n.Stock, n.Held, n.Sold)
		}
	}
	for _, f := range a.Findings {
		fmt.Fprintf(w, "  %s", f.Kind)
		if f.Night != "" {
			fmt.Fprintf(w, " night %s", f.Night)
		}
		if f.OrderID != "" {
			fmt.Fprintf(w, " order %s", f.OrderID)
		}
		if f.UserID != "" {
			fmt.Fprintf(w, " user %s", f.UserID)
		}
		fmt.Fprintf(w, ": %s\n", f.Detail)
	}
	for _, st := range a.Repairs {
		fmt.Fprintf(w, "  repair: %s", st.Action)
		if st.OrderID != "" {
			fmt.Fprintf(w, " order %s", st.OrderID)
		}
		if st.Err != nil {
			fmt.Fprintf(w, ": not done: %v\n", st.Err)
		} else {
			fmt.Fprintln(w, ": done")
		}
	}
}
