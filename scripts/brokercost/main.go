// Command brokercost measures what one order's publish costs the RabbitMQ
// broker at a given rate: the order path's own publish (bench.PublishPart,
// package amqp's confirmed publisher), paced at each rate for a while, and
// the broker's CPU over it (utime + stime of its beam.smp, read from /proc,
// so the broker must run on this machine). It exists because that cost is
// not a constant: the broker pays per wake-up more than per message, so a
// publish costs it several times more at a sale's accepted rate than at
// the saturated rate bench --parts measures (docs/benchmarks.md).
//
//	go run ./scripts/brokercost -amqp amqp://guest:guest@127.0.0.1:5672/ -rates 1000,2600,8000,0
//
// A rate of 0 publishes as fast as the workers can. Each rate publishes to
// a quorum queue of its own, deleted after.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/bench"
	"github.com/flashsale/flashsale/internal/procstat"
)

func main() {
	url := flag.String("amqp", os.Getenv("FLASHSALE_AMQP_URL"), "the broker (FLASHSALE_AMQP_URL)")
	rates := flag.String("rates", "250,1000,2600,5000,8000,0", "publishes per second to measure, comma-separated (0: as fast as the workers go)")
	duration := flag.Duration("duration", 10*time.Second, "how long each rate runs")
	workers := flag.Int("workers", 256, "concurrent publishers, as bench's accepted loop has workers")
	pid := flag.Int("pid", 0, "the broker's process (0: the one beam.smp running here)")
	flag.Parse()
	if err := run(*url, *rates, *duration, *workers, *pid); err != nil {
		fmt.Fprintln(os.Stderr, "brokercost:", err)
		os.Exit(1)
	}
}

func run(url, rates string, duration time.Duration, workers, pid int) error {
	if url == "" {
		return errors.New("-amqp (or FLASHSALE_AMQP_URL) is needed")
	}
	if pid == 0 {
		var err error
		if pid, err = onlyBeam(); err != nil {
			return err
		}
	}
	fmt.Printf("%10s %10s %12s %14s\n", "rate", "published/s", "broker cores", "broker µs/msg")
	for i, field := range strings.Split(rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
		if err != nil || r < 0 {
			return fmt.Errorf("-rates: %q is not a rate", field)
		}
		name := fmt.Sprintf("flashsale-brokercost-%s-%d", bench.RunID(), i)
		got, cores, err := measure(url, name, r, duration, workers, pid)
		if err != nil {
			return err
		}
		fmt.Printf("%10s %11.0f %12.2f %14.0f\n", field, got, cores, cores/got*1e6)
	}
	return nil
}

// measure publishes at r a second (0: unpaced) to the queue name for d,
// from workers as bench --parts runs its parts (bench.RunPart), and
// returns the publishes confirmed a second and the broker's cores busy
// meanwhile.
func measure(url, name string, r float64, d time.Duration, workers, pid int) (float64, float64, error) {
	ctx := context.Background()
	cfg := amqp.Config{URL: url, Name: name}
	defer amqp.DeleteTopology(ctx, cfg)
	p, err := amqp.NewPublisher(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return 0, 0, err
	}
	defer p.Close()
	limit := rate.Inf
	if r > 0 {
		limit = rate.Limit(r)
	}
	pace := rate.NewLimiter(limit, 1)
	publish := bench.PublishPart(name+"-", p)
	paced := func(ctx context.Context, i int) error {
		if err := pace.Wait(ctx); err != nil {
			return err
		}
		return publish(ctx, i)
	}
	before, err := procstat.CPU(pid)
	if err != nil {
		return 0, 0, err
	}
	res := bench.RunPart(ctx, bench.Loop{Conns: workers, Duration: d}, "publish", paced)
	after, err := procstat.CPU(pid)
	if err != nil {
		return 0, 0, err
	}
	if res.Calls == 0 {
		return 0, 0, fmt.Errorf("no publish was confirmed in %.1f s, the first error: %s", res.Seconds, res.FirstError)
	}
	return res.Rate, (after - before).Seconds() / res.Seconds, nil
}

// onlyBeam finds the one Erlang VM (beam.smp) running on this machine.
func onlyBeam() (int, error) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var found []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), "(beam.smp)") {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d beam.smp processes here (%v): name the broker's with -pid", len(found), found)
	}
	return found[0], nil
}
