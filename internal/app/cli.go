package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/flashsale/flashsale"
)

// ErrUsage is a command line the binary cannot run (no command, an unknown
// one, a flag that does not parse): what was wrong and the usage are
// printed already, once, and the exit status is 2.
var ErrUsage = errors.New("usage")

// NewFlagSet is a command's flag set. Its help, when args ask for it (-h,
// -help, --help), goes to stdout like every other answer asked for; a
// mistake and the usage after it go to stderr.
func NewFlagSet(name string, args []string, stdout, stderr io.Writer) *flag.FlagSet {
	fset := flag.NewFlagSet(name, flag.ContinueOnError)
	fset.SetOutput(stderr)
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			fset.SetOutput(stdout)
			break
		}
	}
	return fset
}

// PrintFlags lists fset's flags (those keep reports true for) in the
// --flag style serve --help uses, so every command's help reads the same
// (flag.PrintDefaults writes -flag).
func PrintFlags(fset *flag.FlagSet, keep func(name string) bool) {
	w := fset.Output()
	fset.VisitAll(func(f *flag.Flag) {
		if keep != nil && !keep(f.Name) {
			return
		}
		kind, usage := flag.UnquoteUsage(f)
		if kind != "" {
			kind = " " + kind
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s%s\n", f.Name, kind, usage, def)
	})
}

// ParseFlags parses args into fset: flag.ErrHelp for a help (printed), and
// ErrUsage for a mistake, which the flag package printed with the usage.
func ParseFlags(fset *flag.FlagSet, args []string) error {
	err := fset.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUsage, err)
}

// UsageErrorf prints a mistake in a command line and the command's usage
// to stderr, and returns ErrUsage (exit 2, nothing printed again).
func UsageErrorf(fset *flag.FlagSet, stderr io.Writer, format string, args ...any) error {
	fset.SetOutput(stderr)
	fmt.Fprintf(stderr, "flashsale %s: %s\n\n", fset.Name(), fmt.Sprintf(format, args...))
	fset.Usage()
	return ErrUsage
}

// Version is the build's version: the one -ldflags set, else the module
// version and the commit `go build` recorded from the checkout (with
// "+dirty" when it had uncommitted changes), else "dev".
func Version() string {
	if flashsale.Version != "dev" {
		return flashsale.Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v, rev, dirty, at := bi.Main.Version, "", false, ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		case "vcs.time":
			at = s.Value
		}
	}
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, rev, at)
}

// Serve is `flashsale serve`: it runs the service until ctx ends, then
// drains and closes it.
func Serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, logger, err := command("serve", args, getenv, stdout, stderr)
	if err != nil || logger == nil {
		return err
	}
	tuneGC(getenv, logger)
	limitMemory(memlimit.FromCgroup, logger)
	m := NewMain(cfg, logger, stdout)
	if err := m.Open(ctx); err != nil {
		m.Close()
		return err
	}
	<-ctx.Done()
	// The signal that ended ctx is spent. A second one cuts the drain
	// short; once it has, a third gets the default action (the process
	// ends at once) rather than being swallowed while Close waits.
	again, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m.Drain(again, cfg.ShutdownDelay)
	stop()
	logger.Info("shutting down")
	return m.Close()
}

// Migrate is `flashsale migrate`: it applies the database's migrations.
func Migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, logger, err := command("migrate", args, getenv, stdout, stderr)
	if err != nil || logger == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	store, err := OpenStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer store.Close()
	// Each migration applied now was logged; this is true either way.
	fmt.Fprintln(stdout, "database schema up to date:", MaskURL(cfg.DatabaseURL))
	return nil
}

// command reads serve's or migrate's configuration from args and the
// environment. A nil logger and a nil error mean the command is done:
// --print-config printed the configuration.
func command(name string, args []string, getenv func(string) string, stdout, stderr io.Writer) (Config, *slog.Logger, error) {
	fset := NewFlagSet(name, args, stdout, stderr)
	cfg, err := ParseConfig(fset, args, getenv)
	if errors.Is(err, errPrintConfig) {
		printConfig(stdout, cfg)
		return cfg, nil, nil
	}
	if err != nil {
		return cfg, nil, err
	}
	return cfg, newLogger(cfg, stderr), nil
}

// gcPercentDefault is the collector's target when GOGC is not set. The
// service's live heap is a few MB while a flood of sold-out answers
// allocates some 180 MB a second, so at Go's default of 100 the collector
// runs about seventy times a second; at 400 the heap peaks at five times
// the live one (tens of MB) and a sold-out answer costs 15-20% less CPU
// (docs/benchmarks.md). GOGC and GOMEMLIMIT, when set, are the runtime's
// as usual.
const gcPercentDefault = 400

func tuneGC(getenv func(string) string, log *slog.Logger) {
	if getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(gcPercentDefault)
	log.Debug("garbage collector target", "gogc", gcPercentDefault)
}

// memoryRatio is the share of the container's memory limit the heap may
// reach before the collector gives up GOGC's headroom: the rest is the
// runtime's own, goroutine stacks and the SQLite driver's C-side memory.
const memoryRatio = 0.9

// limitMemory sets the runtime's memory limit to memoryRatio of the
// container's (cgroup) limit. With GOGC at 400 the heap may grow to five
// times what is live: 880 MB of RSS after 140 000 accepted orders in 15 s,
// so an instance under the shipped 512 Mi pod limit would be killed
// mid-sale (issue 26). With the limit the collector runs harder as the
// heap nears it instead. GOMEMLIMIT, when set, is the runtime's as usual,
// and AUTOMEMLIMIT=off (or a ratio) is automemlimit's; without a cgroup
// limit nothing changes.
func limitMemory(provider memlimit.Provider, log *slog.Logger) {
	limit, err := memlimit.Set(memlimit.WithProvider(provider), memlimit.WithRatio(memoryRatio))
	switch {
	case err != nil:
		log.Warn("memory limit: the container's could not be read; the runtime has none", "err", err)
	case limit > 0 && limit < math.MaxInt64:
		log.Info("memory limit", "bytes", limit, "of_container", memoryRatio)
	}
}

// newLogger is every line's logger: one stream, text or JSON
// (FLASHSALE_LOG_FORMAT), at FLASHSALE_LOG_LEVEL.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
