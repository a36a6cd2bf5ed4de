package main

import (
	"bytes"
	"errors"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flashsale/flashsale/bench"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestBenchParts runs bench --parts against a distributed server (one
// instance on Redis, RabbitMQ and MariaDB): the round has its three parts,
// each with a rate and no failed call, the bound they imply (below the
// slowest part's rate, 1/Σ 1/rate), the target's accepted rate as a ratio
// to it, in the JSON and the text; and the parts leave no key or queue of
// their own behind.
func TestBenchParts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a distributed server and loads it for seconds")
	}
	redisURL, amqpURL := testenv.URL(t, testenv.Redis), testenv.URL(t, testenv.AMQP)
	c := startCluster(t, 1, testenv.MySQLDatabase(t))
	jsonFile := filepath.Join(t.TempDir(), "parts.json")
	var out bytes.Buffer
	err := run(t.Context(), []string{"bench", "--target", "http://" + c.addrs[0], "--admin-token", testAdminToken, "--jwt-secret", testJWTSecret,
		"--ceiling", "--ceiling-src", sharedCeiling, "--shape", "accepted", "--parts", "--conns", "32", "--duration", "1s", "--rounds", "1",
		"--redis-url", redisURL, "--amqp-url", amqpURL, "--json", jsonFile, "--cleanup"},
		func(string) string { return "" }, &out, io.Discard)
	t.Logf("%s", out.String())
	if err != nil {
		t.Fatal(err)
	}

	rep := readJSON[bench.Report](t, jsonFile)
	if len(rep.PartsRounds) != 1 || rep.PartsMedian == nil || len(rep.Rounds) != 1 {
		t.Fatalf("%d parts rounds (median %v) for %d rounds: want one", len(rep.PartsRounds), rep.PartsMedian, len(rep.Rounds))
	}
	p := rep.PartsRounds[0]
	var names []string
	cost, slowest := 0.0, math.Inf(1)
	for _, x := range p.Parts {
		names = append(names, x.Name)
		if x.Rate <= 0 || x.Calls <= 0 || x.Errors != 0 {
			t.Errorf("part %s: %d calls, %.0f/s, %d errors (%s): want calls, all of them succeeding", x.Name, x.Calls, x.Rate, x.Errors, x.FirstError)
		}
		cost += 1 / x.Rate
		slowest = min(slowest, x.Rate)
	}
	if got := strings.Join(names, ","); got != "http,reserve,publish" {
		t.Fatalf("parts %s, want http,reserve,publish", got)
	}
	if http := p.Parts[0]; http.Rate != rep.Ceilings[0].SessionRate {
		t.Errorf("http part %.0f/s, want the ceiling's guests %.0f/s", http.Rate, rep.Ceilings[0].SessionRate)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*b }
	if !near(p.Bound, 1/cost) || p.Bound >= slowest {
		t.Errorf("bound %.1f/s, want 1/Σ(1/rate) = %.1f/s, below the slowest part's %.0f/s", p.Bound, 1/cost, slowest)
	}
	if acc := rep.Rounds[0].AcceptedRate; acc <= 0 || p.Accepted != acc || !near(p.Ratio, acc/p.Bound) {
		t.Errorf("accepted %.0f/s, ratio %.3f; want the round's %.0f/s over the bound %.0f/s", p.Accepted, p.Ratio, acc, p.Bound)
	}
	if m := rep.PartsMedian; !near(m.Bound, p.Bound) || !near(m.Ratio, p.Ratio) || len(m.Parts) != 3 {
		t.Errorf("median of one round %+v, want the round's own", m)
	}
	for _, want := range []string{"bound = 1/(1/http + 1/reserve + 1/publish): on one machine the parts share the CPU",
		"×bound", "× the bound its parts imply", "Parts (--parts)", "every invariant held"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}

	name := "flashsale-bench-" + bench.RunID() + "-parts-r0"
	if n := countKeys(t, redisURL, name+":"); n != 0 {
		t.Errorf("%d Redis keys %s:* left behind", n, name)
	}
	conn, ch, err := dialBroker(t)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var amqpErr *amqp091.Error
	if _, err := ch.QueueDeclarePassive(name+".orders", true, false, false, false, nil); !errors.As(err, &amqpErr) || amqpErr.Code != amqp091.NotFound {
		t.Errorf("queue %s.orders after the bench: %v, want it deleted (404)", name, err)
	}
}

// TestBenchPartsFlags: --parts where it cannot run is refused before
// anything starts, saying what it needs.
func TestBenchPartsFlags(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"FLASHSALE_ADMIN_TOKEN": "a", "FLASHSALE_JWT_SECRET": "s"}[k]
	}
	ok := []string{"--target", "http://127.0.0.1:1", "--ceiling", "--shape", "accepted", "--parts"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{append(ok, "--amqp-url", "amqp://x"), "--parts needs the target's Redis and RabbitMQ: --redis-url"},
		{append(ok, "--redis-url", "redis://x"), "--parts needs the target's Redis and RabbitMQ: --redis-url redis://… and --amqp-url"},
		{append(ok, "--redis-url", "http://x", "--amqp-url", "amqp://x"), "--redis-url redis://…"},
		{[]string{"--target", "http://x", "--shape", "accepted", "--parts", "--redis-url", "redis://x", "--amqp-url", "amqp://x"}, "--parts needs --ceiling"},
		{[]string{"--target", "http://x", "--ceiling", "--shape", "soldout", "--parts"}, "--parts is for --shape accepted"},
		{[]string{"--target", "http://x", "--ceiling", "--parts"}, "--parts is for --shape accepted"},
		{[]string{"--self", "--ceiling", "--shape", "accepted", "--parts"}, "give it --target, not --self"},
	} {
		err := run(t.Context(), append([]string{"bench"}, tt.args...), env, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("bench %q: %v, want an error saying %q", tt.args, err, tt.want)
		}
	}
}
