// Command flashsale runs limited-stock flash sales.
//
//	flashsale serve [--demo] [--addr :8080] [--data-dir ./data]
//	flashsale migrate
//	flashsale audit [--sale ID] [--repair]
//	flashsale bench (--self | --target URL) [--shape pulse] [--ceiling] [--json FILE]
//	flashsale queue verify (--file F | --url URL)
//	flashsale version
//
// It is wiring: each command is a package's (internal/app: serve,
// migrate, audit, token, queue; bench: bench), and this file holds only
// main and the table of commands. Every setting: docs/configuration.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/flashsale/flashsale/bench"
	"github.com/flashsale/flashsale/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal is the command's to handle (serve drains, then
	// closes); from then on this registration lets go, so a later signal
	// is not swallowed here (see app.Serve).
	context.AfterFunc(ctx, stop)
	if len(os.Args) > 1 && slices.Contains([]string{"serve", "migrate", "audit"}, os.Args[1]) {
		if err := app.UnknownSettings(os.Environ()); err != nil {
			fmt.Fprintln(os.Stderr, "flashsale:", strings.ReplaceAll(err.Error(), "\n", "\nflashsale: "))
			os.Exit(2)
		}
	}
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, app.ErrUsage) {
			os.Exit(2) // the usage is printed already
		}
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}

const usage = `usage: flashsale <command> [flags]

commands:
  serve     run the service (embedded shape unless FLASHSALE_REDIS_URL etc. are set)
  migrate   apply database migrations and exit
  audit     prove each sale's books balance: flashsale audit [--sale ID] [--repair];
            exits non-zero when one does not (embedded shape: the database's own
            invariants only, see flashsale audit --help)
  bench     load-test a server (--target URL) or the embedded one (--self), then
            check the invariants; exits non-zero when one breaks (flashsale bench --help)
  token     print a user JWT signed with this instance's secret, to try the API:
            flashsale token --user alice [--tier gold] [--ttl 1h]
  queue     the waiting room: flashsale queue verify (--file F | --url URL) checks a
            sale's published draw (docs/waiting-room.md); exits non-zero when it fails
  version   print the version
  help      this; flashsale help COMMAND (or COMMAND --help) lists that command's flags
`

// commands is the table of commands: each reads its own flags from args.
var commands = map[string]func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error{
	"serve":   app.Serve,
	"migrate": app.Migrate,
	"audit":   app.Audit,
	"bench":   bench.Command,
	"token":   app.Token,
	"queue":   app.Queue,
	"version": func(_ context.Context, _ []string, _ func(string) string, stdout, _ io.Writer) error {
		fmt.Fprintln(stdout, "flashsale", app.Version())
		return nil
	},
}

// run is the binary. help, -h and --help, alone or after any command,
// print that level's usage and succeed.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := runCommand(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the flag set printed the command's usage
	}
	return err
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return app.ErrUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 0 && args[0] != "help" && !strings.HasPrefix(args[0], "-") {
			return runCommand(ctx, []string{args[0], "--help"}, getenv, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "flashsale: unknown command %q\n\n%s", name, usage)
		return app.ErrUsage
	}
	return cmd(ctx, args, getenv, stdout, stderr)
}
