package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
)

// testDraw is a published draw of five tickets, as the server would make it.
func testDraw(t *testing.T) flashsale.Draw {
	t.Helper()
	d := flashsale.Draw{
		SaleID: "01KDQ0GZ5T4M7R2N8B6C3W9F1H",
		Seed:   strings.Repeat("5a", 32),
		Tickets: []string{
			"01KDQ0YA0000000000000000ZZ", "01KDQ0YV3K8R2P6W1F9G4D7S0M", "01KDQ0Z8M2Y6H3T9V4C1N5B7X9",
			"01KDQ0ZZ1A2B3C4D5E6F7G8H9J", "01KDQ11H6G5F4E3D2C1B0A9Z8Y",
		},
	}
	var err error
	if d.Commitment, err = flashsale.DrawCommitment(d.SaleID, d.Seed); err != nil {
		t.Fatal(err)
	}
	if d.Order, err = flashsale.DrawOrder(d.Seed, d.Tickets); err != nil {
		t.Fatal(err)
	}
	return d
}

func drawJSON(t *testing.T, d flashsale.Draw) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runQueue runs flashsale queue with args and stdin, returning its stdout,
// its stderr and its error.
func runQueue(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := queue(t.Context(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestQueueVerify: a published draw passes (exit 0) read from a file or
// standard input; a tampered one fails (exit 1: an error, not a usage
// error) naming the check that failed, the checks before it reported ok.
func TestQueueVerify(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := drawJSON(t, testDraw(t))
	t.Run("OK", func(t *testing.T) {
		for _, args := range [][]string{{"verify", "--file", write("good.json", good)}, {"verify", "--file", "-"}} {
			out, _, err := runQueue(t, string(good), args...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			for _, want := range []string{"sale 01KDQ0GZ5T4M7R2N8B6C3W9F1H: 5 tickets", "commitment: ok", "order:      ok", "verified:"} {
				if !strings.Contains(out, want) {
					t.Errorf("%v: report lacks %q:\n%s", args, want, out)
				}
			}
		}
	})
	for _, tt := range []struct {
		name   string
		mod    func(d *flashsale.Draw)
		check  string
		reason error
	}{
		{"order swapped", func(d *flashsale.Draw) { d.Order[0], d.Order[1] = d.Order[1], d.Order[0] }, "order", flashsale.ErrDrawOrder},
		{"ticket added", func(d *flashsale.Draw) { d.Tickets = append(d.Tickets, "01KDQ12000000000000000000A") }, "order", flashsale.ErrDrawOrder},
		{"ticket removed", func(d *flashsale.Draw) { d.Tickets = d.Tickets[1:] }, "order", flashsale.ErrDrawOrder},
		{"tickets unsorted", func(d *flashsale.Draw) { d.Tickets[0], d.Tickets[4] = d.Tickets[4], d.Tickets[0] }, "tickets", flashsale.ErrDrawTickets},
		{"another seed", func(d *flashsale.Draw) { d.Seed = strings.Repeat("5b", 32) }, "commitment", flashsale.ErrDrawCommitment},
		{"another sale", func(d *flashsale.Draw) { d.SaleID = "01KDQ0GZ5T4M7R2N8B6C3W9F1J" }, "commitment", flashsale.ErrDrawCommitment},
		{"not revealed", func(d *flashsale.Draw) { d.Seed, d.Order = "", nil }, "seed", flashsale.ErrDrawSeed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := testDraw(t)
			tt.mod(&d)
			out, _, err := runQueue(t, "", "verify", "--file", write(tt.name+".json", drawJSON(t, d)))
			if !errors.Is(err, tt.reason) || errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "fails its "+tt.check+" check") {
				t.Fatalf("err = %v, want the %s check failed (exit 1)", err, tt.check)
			}
			if !strings.Contains(out, tt.check+":") || !strings.Contains(out, "failed") || strings.Contains(out, "verified") {
				t.Errorf("report does not name %s as failed:\n%s", tt.check, out)
			}
			if tt.check != "seed" && !strings.Contains(out, "seed:       ok") {
				t.Errorf("report does not say the checks before %s passed:\n%s", tt.check, out)
			}
		})
	}
	t.Run("NotADraw", func(t *testing.T) {
		for name, body := range map[string]string{
			"duplicate field": `{"sale_id":"a","sale_id":"b","commitment":"","tickets":[]}`,
			"not JSON":        `<html>`,
			"wrong type":      `{"tickets":"a"}`,
		} {
			if _, _, err := runQueue(t, body, "verify", "--file", "-"); err == nil || errors.Is(err, ErrUsage) {
				t.Errorf("%s: err = %v, want a failure", name, err)
			}
		}
		if _, _, err := runQueue(t, "", "verify", "--file", filepath.Join(dir, "nope.json")); err == nil || errors.Is(err, ErrUsage) {
			t.Errorf("missing file: err = %v", err)
		}
	})
}

// TestQueueVerifyURL: --url GETs the published draw: a good one passes, a
// tampered one fails, and an answer that is not 200 is a failure that
// says what the server answered.
func TestQueueVerifyURL(t *testing.T) {
	tampered := testDraw(t)
	tampered.Order[3], tampered.Order[4] = tampered.Order[4], tampered.Order[3]
	bodies := map[string][]byte{
		"/api/sales/01KDQ0GZ5T4M7R2N8B6C3W9F1H/queue/draw": drawJSON(t, testDraw(t)),
		"/tampered/queue/draw":                             drawJSON(t, tampered),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if r.Method != http.MethodGet || !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)

	out, _, err := runQueue(t, "", "verify", "--url", srv.URL+"/api/sales/01KDQ0GZ5T4M7R2N8B6C3W9F1H/queue/draw")
	if err != nil || !strings.Contains(out, "verified:") {
		t.Errorf("good draw: %v\n%s", err, out)
	}
	_, _, err = runQueue(t, "", "verify", "--url", srv.URL+"/tampered/queue/draw")
	if !errors.Is(err, flashsale.ErrDrawOrder) || !strings.Contains(err.Error(), "position 4 ") {
		t.Errorf("tampered draw: err = %v, want the order check failed at position 4", err)
	}
	_, _, err = runQueue(t, "", "verify", "--url", srv.URL+"/nope")
	if err == nil || errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: err = %v", err)
	}
	if _, _, err := runQueue(t, "", "verify", "--url", "ftp://example.com/draw"); err == nil || errors.Is(err, ErrUsage) {
		t.Errorf("ftp URL: err = %v", err)
	}
}

// TestQueueUsage: a command line that cannot run is a usage error (exit
// 2) with the usage on stderr; help is an answer on stdout.
func TestQueueUsage(t *testing.T) {
	for _, args := range [][]string{
		nil, {"nope"}, {"verify"}, {"verify", "--file", "a", "--url", "http://x/"}, {"verify", "--file", "a", "extra"}, {"verify", "--nope"},
	} {
		out, errOut, err := runQueue(t, "", args...)
		if !errors.Is(err, ErrUsage) || out != "" || !strings.Contains(errOut, "usage: flashsale queue") {
			t.Errorf("%q: err %v, stdout %q, stderr %q; want a usage error", args, err, out, errOut)
		}
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"verify", "--help"}, {"verify", "-h"}} {
		out, errOut, err := runQueue(t, "", args...)
		if (err != nil && !errors.Is(err, flag.ErrHelp)) || !strings.Contains(out, "usage: flashsale queue") || errOut != "" {
			t.Errorf("%q: err %v, stdout %q, stderr %q; want the usage on stdout", args, err, out, errOut)
		}
	}
}
