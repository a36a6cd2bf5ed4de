package main

import (
	"bytes"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/bench"
	"github.com/flashsale/flashsale/internal/testenv"
)

// compareRow is the row of figure in c (it fails the test without one).
func compareRow(t *testing.T, c bench.Comparison, figure string) bench.ComparisonRow {
	t.Helper()
	i := slices.IndexFunc(c.Rows, func(r bench.ComparisonRow) bool { return r.Figure == figure })
	if i < 0 {
		t.Fatalf("the table has no row %q: %+v", figure, c.Rows)
	}
	if len(c.Rows[i].Cells) != len(c.Paths) {
		t.Fatalf("row %q has %d cells for %d paths", figure, len(c.Rows[i].Cells), len(c.Paths))
	}
	return c.Rows[i]
}

// TestBenchCompare runs the built binary's bench --compare --self against
// this machine's Redis, RabbitMQ and MariaDB: the embedded, distributed
// and dbmode paths, each a server of its own, a short burst each. The
// table has a column per path with every figure measured (the database's
// peak from the server's counters, not n/a), nothing oversold, every 202
// written, every invariant held, and it exits 0; the bench leaves no
// Redis key or queue of its own behind.
func TestBenchCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts three servers")
	}
	db := testenv.MySQLDatabase(t)
	redisURL, amqpURL := testenv.URL(t, testenv.Redis), testenv.URL(t, testenv.AMQP)
	bin := buildBinary(t)
	jsonFile := filepath.Join(t.TempDir(), "compare.json")
	out := runBuiltBench(t, bin, "--self", "--compare", "--database-url", db, "--redis-url", redisURL, "--amqp-url", amqpURL,
		"--shape", "burst", "--guests", "300", "--stock", "30", "--hold", "2", "--think", "50ms", "--json", jsonFile)

	c := readJSON[bench.Comparison](t, jsonFile)
	if !c.OK || len(c.Paths) != 3 {
		t.Fatalf("comparison ok %v, %d paths", c.OK, len(c.Paths))
	}
	for i, name := range bench.Paths {
		p := c.Paths[i]
		if p.Name != name || p.Report == nil || p.Skipped != "" || len(p.Report.Checks) != 1 {
			t.Fatalf("path %d: %s, skipped %q, report %v; want %s run once", i, p.Name, p.Skipped, p.Report != nil, name)
		}
		sold := slices.ContainsFunc(p.Report.Notes, func(n string) bool {
			return strings.HasPrefix(n, "Round 1: the server sold from the database (flashsale_selling{from=\"db\"})")
		})
		if sold != (name == bench.PathDBMode) {
			t.Errorf("%s: notes %q: want the switch to the database said for dbmode alone", name, p.Report.Notes)
		}
		if res := p.Report.Rounds[0]; res.DB == nil || res.DB.PeakCalls <= 0 || res.DB.PeakOrders <= 0 {
			t.Errorf("%s: the server's database load %+v (%s): want its calls and orders read", name, res.DB, res.DBMissing)
		}
	}
	for _, want := range []struct {
		figure string
		cell   func(string) bool
	}{
		{bench.FigOversold, func(s string) bool { return s == "0" }},
		{bench.FigInvariants, func(s string) bool { return s == "all held" }},
		{bench.FigCompletion, func(s string) bool { return strings.HasPrefix(s, "100.0% (") }},
		{bench.FigMean, func(s string) bool { return strings.HasSuffix(s, " ms") && s != "0.0 ms" }},
		{bench.FigMax, func(s string) bool { return strings.HasSuffix(s, " ms") }},
		{bench.FigDBPeak, func(s string) bool { return s != "n/a" && s != "0" }},
	} {
		row := compareRow(t, c, want.figure)
		for i, cell := range row.Cells {
			if !want.cell(cell) {
				t.Errorf("%s, %s: %q (notes %q)", want.figure, c.Paths[i].Name, cell, row.Notes)
			}
		}
	}
	// The printed table: a header naming every path, and the oversold row.
	lines := strings.Split(out, "\n")
	header := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "figure ") })
	if header < 0 || !slices.Equal(strings.Fields(lines[header]), []string{"figure", "embedded", "distributed", "dbmode"}) {
		t.Fatalf("no table header naming the three paths:\n%s", out)
	}
	if !slices.ContainsFunc(lines, func(l string) bool {
		return slices.Equal(strings.Fields(l), []string{"oversold", "orders", "0", "0", "0"})
	}) {
		t.Errorf("no oversold row of three zeros:\n%s", out)
	}
	// What the --self servers left in Redis and RabbitMQ under their names.
	if n := countKeys(t, redisURL, "flashsale-bench-"); n != 0 {
		t.Errorf("%d Redis keys flashsale-bench-* left behind", n)
	}
}

// countKeys counts the keys under prefix on the Redis at url.
func countKeys(t *testing.T, url, prefix string) int {
	t.Helper()
	o, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(o)
	defer rc.Close()
	n := 0
	iter := rc.Scan(t.Context(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(t.Context()) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBenchCompareTargets: --compare against running servers, one
// --target PATH=URL each. A server that oversells is caught in its
// column (oversold > 0, the invariant named, a non-zero exit), the
// paths without a target are skipped with a line saying so, and the
// database figures of a server without metrics are n/a with the reason.
func TestBenchCompareTargets(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"bench", "--compare", "--target", "embedded=" + brokenServer(t, "oversell", 10),
		"--admin-token", "a", "--jwt-secret", "s", "--shape", "burst", "--guests", "40", "--mix", "normal=1", "--think", "1ms", "--drain", "500ms"},
		func(string) string { return "" }, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "embedded: oversold") {
		t.Fatalf("bench --compare against a server that oversells: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"distributed  Redis + RabbitMQ + the database, the source's Redis + queue: skipped: no --target distributed=URL given",
		"dbmode       the distributed shape with its breaker forced open",
		"skipped: no --target dbmode=URL given",
		"n/a: database peak QPS, embedded: the server's metrics could not be read (GET ",
		"INVARIANT BROKEN",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	lines := strings.Split(out.String(), "\n")
	if !slices.ContainsFunc(lines, func(l string) bool {
		return slices.Equal(strings.Fields(l), []string{"oversold", "orders", "30", "skipped", "skipped"})
	}) {
		t.Errorf("want the oversold row to say 30 (40 held for 10 rooms) and skipped twice:\n%s", out.String())
	}
}
