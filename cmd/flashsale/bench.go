package main

import (
	"bytes"
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
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/bench"
)

const benchUsage = `usage: flashsale bench (--self | --target URL) [flags]

Creates a sale, sends guests at it on a schedule (open loop: each
request's latency runs from when it was due, so a slow server cannot hide
behind a slow generator), waits for the orders to settle, then checks the
invariants: the server's audit cross-checked against the client's own
record of every 202. Exits non-zero when an invariant breaks.

  --self             start the embedded server in a process of its own
                     (this binary's serve, a free port, a temporary data dir)
  --target URL       a running server; the admin token and the JWT secret
                     from --admin-token/--jwt-secret or FLASHSALE_ADMIN_TOKEN
                     and FLASHSALE_JWT_SECRET
  --ceiling          also run every round against the trivial handler of
                     ../shared/bench/ceiling (built from --ceiling-src, or this
                     binary's copy of it), each in its own process, just
                     before the target's round, and quote ratios to it

The source's pulse at full size is --peak 8000 --duration 52s; the
defaults are that pulse scaled to a small machine.

flags:
`

// benchServeCeiling is the hidden flag with which bench runs its own copy
// of the ceiling in a child process when ../shared/bench/ceiling is absent.
const benchServeCeiling = "--serve-ceiling"

// benchFlags are bench's settings.
type benchFlags struct {
	target, admin, secret  string
	self, ceiling          bool
	ceilingSrc             string
	shape                  string
	peak                   float64
	duration, think, drain time.Duration
	guests, stock, hold    int
	rounds, difficulty     int
	conns, hammer          int
	mix                    string
	pay                    float64
	jsonFile               string
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
	fset := flag.NewFlagSet("bench", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fset.PrintDefaults()
	}
	var f benchFlags
	fset.StringVar(&f.target, "target", "", "base URL of a running server, e.g. http://127.0.0.1:8080")
	fset.StringVar(&f.admin, "admin-token", getenv("FLASHSALE_ADMIN_TOKEN"), "the target's admin token (FLASHSALE_ADMIN_TOKEN)")
	fset.StringVar(&f.secret, "jwt-secret", getenv("FLASHSALE_JWT_SECRET"), "the target's JWT secret, to sign guests' tokens (FLASHSALE_JWT_SECRET)")
	fset.BoolVar(&f.self, "self", false, "start the embedded server in its own process and bench it")
	fset.BoolVar(&f.ceiling, "ceiling", false, "run each round against the ceiling handler too and quote ratios to it")
	fset.StringVar(&f.ceilingSrc, "ceiling-src", "../shared/bench/ceiling", "directory of the ceiling's main.go (absent: this binary's copy)")
	fset.StringVar(&f.shape, "shape", "pulse", "arrivals: pulse, burst, constant or ramp")
	fset.Float64Var(&f.peak, "peak", 1000, "peak arrivals (guest sessions) per second: pulse, constant, ramp")
	fset.DurationVar(&f.duration, "duration", 20*time.Second, "length of the shape: pulse, constant, ramp")
	fset.IntVar(&f.guests, "guests", 2000, "guests arriving at once: burst")
	fset.StringVar(&f.mix, "mix", bench.DefaultMix.String(), "shares of guests: normal, scalper, broken")
	fset.IntVar(&f.stock, "stock", 100, "rooms in the sale (one night)")
	fset.IntVar(&f.hold, "hold", 10, "the sale's hold_seconds")
	fset.IntVar(&f.difficulty, "difficulty", 0, "the sale's proof-of-work difficulty (0: none)")
	fset.DurationVar(&f.think, "think", bench.ThinkDefault, "mean time a guest with a 202 takes to pay")
	fset.Float64Var(&f.pay, "pay", bench.PayDefault, "share of guests with a 202 who pay (half the rest cancel, the others let the hold expire)")
	fset.IntVar(&f.hammer, "hammer", bench.HammerDefault, "purchases a scalper fires with one token")
	fset.IntVar(&f.rounds, "rounds", 1, "rounds (the report quotes medians)")
	fset.IntVar(&f.conns, "conns", 512, "connections the client keeps to the server")
	fset.DurationVar(&f.drain, "drain", 30*time.Second, "how long to wait for orders to settle before the check gives up")
	fset.StringVar(&f.jsonFile, "json", "", "write the report as JSON to this file")
	fset.StringVar(&f.progress, "progress", "auto", "live progress on stderr: auto (a terminal, not CI), on or off")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		fset.Usage()
		return fmt.Errorf("bench: unexpected arguments %q", fset.Args())
	}
	shape, mix, err := f.validate()
	if err != nil {
		return err
	}

	var procs []*child
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	if f.self {
		p, base, admin, secret, err := spawnSelf(ctx)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		f.target, f.admin, f.secret = base, admin, secret
	}
	target := bench.NewClient(strings.TrimRight(f.target, "/"), f.admin, f.secret, f.conns)
	defer target.CloseIdle()
	rep := &bench.Report{Target: f.target, Shape: shape.String(), Mix: mix.String()}
	var ceiling *bench.Client
	if f.ceiling {
		p, base, what, err := spawnCeiling(ctx, f.ceilingSrc)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		rep.Ceiling = what
		ceiling = bench.NewClient(base, "", f.secret, f.conns)
		defer ceiling.CloseIdle()
	}
	var progress io.Writer
	if f.progress == "on" || f.progress == "auto" && isTerminal(stderr) && getenv("CI") != "true" {
		progress = stderr
	}

	for round := range f.rounds {
		cfg := bench.Config{Shape: shape, Mix: mix, Think: f.think, Pay: f.pay, Hammer: f.hammer,
			Progress: progress, Seed: uint64(round), Users: fmt.Sprintf("b%s-r%d-", runID(), round)}
		if ceiling != nil {
			cfg.Client, cfg.SaleID = ceiling, "x"
			if progress != nil {
				fmt.Fprintf(progress, "round %d/%d, ceiling\n", round+1, f.rounds)
			}
			res, err := bench.Run(ctx, cfg)
			if err != nil {
				return fmt.Errorf("bench: ceiling round %d: %w", round+1, err)
			}
			rep.Ceilings = append(rep.Ceilings, res)
		}
		sale := bench.NewSale(f.stock, f.hold)
		if f.difficulty > 0 {
			sale.Challenge = &struct {
				Difficulty int `json:"difficulty"`
			}{f.difficulty}
		}
		id, err := target.CreateSale(ctx, sale)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		cfg.Client, cfg.SaleID, cfg.Difficulty = target, id, f.difficulty
		if progress != nil {
			fmt.Fprintf(progress, "round %d/%d, sale %s\n", round+1, f.rounds, id)
		}
		res, err := bench.Run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("bench: round %d: %w", round+1, err)
		}
		rep.Rounds = append(rep.Rounds, res)
		ck, err := bench.Verify(ctx, target, id, sale.PerUserLimit, res, f.drain)
		if err != nil {
			return fmt.Errorf("bench: check round %d: %w", round+1, err)
		}
		rep.Checks = append(rep.Checks, ck)
	}
	rep.Summarize()
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if f.jsonFile != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.jsonFile, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if !rep.OK {
		var broken []string
		for _, c := range rep.Checks {
			broken = append(broken, c.Broken()...)
		}
		return fmt.Errorf("bench: invariant broken: %s", strings.Join(broken, ", "))
	}
	return nil
}

// validate checks the flags that go together and builds the shape and the mix.
func (f *benchFlags) validate() (bench.Shape, bench.Mix, error) {
	mix, err := bench.ParseMix(f.mix)
	if err != nil {
		return nil, mix, fmt.Errorf("bench: --%w", err)
	}
	switch {
	case f.self == (f.target != ""):
		return nil, mix, errors.New("bench: give exactly one of --self and --target")
	case !f.self && (f.admin == "" || f.secret == ""):
		return nil, mix, errors.New("bench: --target needs the admin token and the JWT secret (--admin-token, --jwt-secret or FLASHSALE_ADMIN_TOKEN, FLASHSALE_JWT_SECRET)")
	case f.rounds < 1 || f.stock < 0 || f.hold < 1 || f.conns < 1 || f.hammer < 1 || f.difficulty < 0 || f.difficulty > 32:
		return nil, mix, errors.New("bench: --rounds, --hold, --conns and --hammer must be positive, --stock not negative, --difficulty 0 to 32")
	case f.pay < 0 || f.pay > 1:
		return nil, mix, errors.New("bench: --pay is a share from 0 to 1")
	case f.progress != "auto" && f.progress != "on" && f.progress != "off":
		return nil, mix, errors.New("bench: --progress is auto, on or off")
	}
	if f.shape == "burst" {
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
	return nil, mix, fmt.Errorf("bench: unknown --shape %q (pulse, burst, constant, ramp)", f.shape)
}

// child is a process bench started, and the temporary path it leaves.
type child struct {
	cmd  *exec.Cmd
	temp string
}

func (c *child) stop() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
	if c.temp != "" {
		os.RemoveAll(c.temp)
	}
}

// spawnSelf runs this binary's serve in a process of its own on a free
// port with a temporary data dir and fresh secrets, and waits until it is
// ready. The data dir goes with the process.
func spawnSelf(ctx context.Context) (*child, string, string, string, error) {
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
	cmd.Env = append(os.Environ(), "FLASHSALE_ADDR="+addr, "FLASHSALE_DATA_DIR="+dir,
		"FLASHSALE_DATABASE_URL=sqlite://"+filepath.Join(dir, "flashsale.db"),
		"FLASHSALE_ADMIN_TOKEN="+admin, "FLASHSALE_JWT_SECRET="+secret, "FLASHSALE_LOG_LEVEL=error")
	var log bytes.Buffer // the server's errors (FLASHSALE_LOG_LEVEL=error), read should it not start
	cmd.Stdout, cmd.Stderr = io.Discard, &log
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, "", "", "", fmt.Errorf("bench --self: %w", err)
	}
	c := &child{cmd: cmd, temp: dir}
	base := "http://" + addr
	if err := waitHTTP(ctx, base+"/readyz", http.StatusOK); err != nil {
		c.stop()
		return nil, "", "", "", fmt.Errorf("bench --self: the server did not start: %w\n%s", err, log.Bytes()[max(0, log.Len()-2000):])
	}
	return c, base, admin, secret, nil
}

// spawnCeiling builds ../shared/bench/ceiling (src) and runs it in a
// process of its own, or, when src has no main.go or the go tool is
// missing, runs this binary's copy of it as a child. It says which.
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
	if err := cmd.Start(); err != nil {
		os.RemoveAll(temp)
		return nil, "", "", fmt.Errorf("bench --ceiling: %w", err)
	}
	c := &child{cmd: cmd, temp: temp}
	base := "http://" + addr
	if err := waitHTTP(ctx, base+"/", http.StatusConflict); err != nil {
		c.stop()
		return nil, "", "", fmt.Errorf("bench --ceiling: %w", err)
	}
	return c, base, what, nil
}

// waitHTTP polls url until it answers want, for up to 30 s.
func waitHTTP(ctx context.Context, url string, want int) error {
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
