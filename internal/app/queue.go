package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/flashsale/flashsale"
)

const queueUsage = `usage: flashsale queue <command> [flags]

commands:
  verify    check a waiting room's published draw: the seed is the one its
            commitment promised, and the order is the one the seed draws from
            the published tickets (flashsale queue verify --help)
`

const queueVerifyUsage = `usage: flashsale queue verify (--file F | --url URL)

Checks a waiting room's published draw (GET /api/sales/{id}/queue/draw) the
way anyone can without this program (docs/waiting-room.md): the seed hashes
with the sale id to the commitment published before the start, the tickets
are sorted and distinct, and the order is the one the seed draws from them.
Exits 0 when all hold, 1 naming the first check that fails.

flags:
`

// drawFetchTimeout bounds the GET of a published draw: a server that does
// not answer is a failure to report, not a wait.
const drawFetchTimeout = 30 * time.Second

// maxDrawBytes bounds the draw read: a million tickets of ULIDs, twice
// over (tickets and order), fit with room to spare.
const maxDrawBytes = 128 << 20

// Queue is `flashsale queue`: the waiting room's commands, for now verify.
func Queue(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	return queue(ctx, args, os.Stdin, stdout, stderr)
}

// queue is Queue with its standard input given, so tests can feed --file -.
func queue(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, queueUsage)
		return ErrUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help", "--h":
		fmt.Fprint(stdout, queueUsage)
		return nil
	case "verify":
		return queueVerify(ctx, args[1:], stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "flashsale queue: unknown command %q\n\n%s", args[0], queueUsage)
	return ErrUsage
}

// queueVerify is `flashsale queue verify`. It prints one line a check:
// those that pass, then the one that failed, whose error it returns (exit
// 1) with the detail.
func queueVerify(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fset := NewFlagSet("queue verify", args, stdout, stderr)
	file := fset.String("file", "", "read the draw's JSON from `FILE` (- for standard input)")
	from := fset.String("url", "", "GET the draw's JSON from `URL` (https://host/api/sales/{id}/queue/draw)")
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), queueVerifyUsage)
		PrintFlags(fset, nil)
	}
	if err := ParseFlags(fset, args); err != nil {
		return err
	}
	switch {
	case fset.NArg() > 0:
		return UsageErrorf(fset, stderr, "unexpected arguments %q", fset.Args())
	case (*file == "") == (*from == ""):
		return UsageErrorf(fset, stderr, "give one of --file and --url: where the published draw is")
	}
	var body []byte
	var err error
	if *file != "" {
		body, err = readDrawFile(*file, stdin)
	} else {
		body, err = fetchDraw(ctx, *from)
	}
	if err != nil {
		return fmt.Errorf("queue verify: %w", err)
	}
	var d flashsale.Draw
	// jsonv2 refuses a field given twice, which another reader of the same
	// bytes could take the other way (encoding/json and Python keep the
	// last); unknown fields are let through, for what a later API adds.
	if err := jsonv2.Unmarshal(body, &d); err != nil {
		return fmt.Errorf("queue verify: the draw is not a draw's JSON: %w", err)
	}
	fmt.Fprintf(stdout, "sale %s: %d tickets\n", d.SaleID, len(d.Tickets))
	err = d.Verify()
	for _, c := range drawChecks {
		if errors.Is(err, c.err) {
			fmt.Fprintf(stdout, "  %-11s failed\n", c.name+":")
			return fmt.Errorf("queue verify: the draw fails its %s check: %w", c.name, err)
		}
		fmt.Fprintf(stdout, "  %-11s ok (%s)\n", c.name+":", c.ok)
	}
	if err != nil { // a check this table does not know of
		return fmt.Errorf("queue verify: %w", err)
	}
	fmt.Fprintln(stdout, "verified: the order is the one the committed seed draws from these tickets")
	return nil
}

// drawChecks are Draw.Verify's checks in the order it makes them, each with
// the error that says it failed and what it means when it passes.
var drawChecks = []struct {
	name, ok string
	err      error
}{
	{"seed", "revealed", flashsale.ErrDrawSeed},
	{"commitment", "the seed and the sale id hash to it", flashsale.ErrDrawCommitment},
	{"tickets", "sorted, distinct", flashsale.ErrDrawTickets},
	{"order", "the one the seed draws", flashsale.ErrDrawOrder},
}

// readDrawFile reads the file name names, or stdin for "-".
func readDrawFile(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return readDraw(r, name)
}

// fetchDraw GETs a published draw. Its client is its own and closes its
// idle connections on the way out, so nothing it opened outlives it.
func fetchDraw(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want an http or https URL", rawURL)
	}
	client := &http.Client{Timeout: drawFetchTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get draw: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get draw: %s answered %s", u.Redacted(), resp.Status)
	}
	return readDraw(resp.Body, u.Redacted())
}

// readDraw reads r whole, up to maxDrawBytes.
func readDraw(r io.Reader, from string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDrawBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", from, err)
	}
	if len(b) > maxDrawBytes {
		return nil, fmt.Errorf("read %s: more than %d MiB, which no draw is", from, maxDrawBytes>>20)
	}
	return b, nil
}
