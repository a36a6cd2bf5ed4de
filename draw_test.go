package flashsale_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
)

// The known draw, computed once by Python's hashlib and hmac from the
// procedure in docs/waiting-room.md (not by this package), so the tests pin
// the published rules and not only this code's agreement with itself.
const (
	vectorSale       = "01KDQ0GZ5T4M7R2N8B6C3W9F1H"
	vectorSeed       = "064e65eb3579eafc9cdc59a3e9ec5b8060e2bdf0eb9ea371f5c6cdbb0d3a5011" // sha256("flashsale draw test vector")
	vectorCommitment = "2da2d09f05b0507a64a89c961b8eb748add98a97866c00efe7ca956d8adf6ae8"
)

// vectorJoined is the tickets in the order they joined (not sorted).
var vectorJoined = []string{
	"01KDQ0Z8M2Y6H3T9V4C1N5B7XA", "01KDQ0Z8M2Y6H3T9V4C1N5B7X9", "01KDQ0YV3K8R2P6W1F9G4D7S0M",
	"01KDQ10E7J4M9B2X5N8Q3R6T1V", "01KDQ0ZZ1A2B3C4D5E6F7G8H9J", "01KDQ0YA0000000000000000ZZ",
	"01KDQ11H6G5F4E3D2C1B0A9Z8Y", "01KDQ0ZC9X8W7V6T5S4R3Q2P1N",
}

// vectorOrder is Python's answer for vectorSeed and vectorJoined.
var vectorOrder = []string{
	"01KDQ0ZZ1A2B3C4D5E6F7G8H9J", "01KDQ11H6G5F4E3D2C1B0A9Z8Y", "01KDQ0Z8M2Y6H3T9V4C1N5B7XA",
	"01KDQ0YA0000000000000000ZZ", "01KDQ0Z8M2Y6H3T9V4C1N5B7X9", "01KDQ0YV3K8R2P6W1F9G4D7S0M",
	"01KDQ10E7J4M9B2X5N8Q3R6T1V", "01KDQ0ZC9X8W7V6T5S4R3Q2P1N",
}

func vectorDraw() flashsale.Draw {
	tickets := slices.Clone(vectorJoined)
	slices.Sort(tickets)
	return flashsale.Draw{SaleID: vectorSale, Commitment: vectorCommitment, Seed: vectorSeed, Tickets: tickets, Order: slices.Clone(vectorOrder)}
}

// TestDrawVector: the commitment and the order of the known draws are the
// ones Python computed, whatever order the tickets come in, and the draw
// verifies.
func TestDrawVector(t *testing.T) {
	c, err := flashsale.DrawCommitment(vectorSale, vectorSeed)
	if err != nil || c != vectorCommitment {
		t.Fatalf("DrawCommitment = %q, %v; want %q", c, err, vectorCommitment)
	}
	joined := slices.Clone(vectorJoined)
	for _, in := range [][]string{joined, vectorDraw().Tickets, slices.Clone(vectorOrder)} {
		order, err := flashsale.DrawOrder(vectorSeed, in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(vectorOrder, order); diff != "" {
			t.Errorf("DrawOrder(%v) (-want +got):\n%s", in, diff)
		}
	}
	if !slices.Equal(joined, vectorJoined) {
		t.Errorf("DrawOrder sorted its caller's slice: %v", joined)
	}
	if err := vectorDraw().Verify(); err != nil {
		t.Errorf("Verify: %v", err)
	}

	// A thousand tickets, T0999 down to T0000: enough that keys share
	// their first bytes, so a comparison of less than the whole key shows.
	// Python gave the SHA-256 of the order, each id followed by a newline.
	const (
		seed      = "4d8b15e115fb70a770bc7ec262aaebcba63ee70605042864ed4faa62ccc5be62" // sha256("flashsale draw test vector 2")
		orderHash = "d481b134fcb549574a3f13cf204b198bd85f95a45e971cca708d1d33b746753f"
	)
	var many []string
	for i := 999; i >= 0; i-- {
		many = append(many, fmt.Sprintf("T%04d", i))
	}
	order, err := flashsale.DrawOrder(seed, many)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, id := range order {
		h.Write([]byte(id + "\n"))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != orderHash || order[0] != "T0965" || order[999] != "T0636" {
		t.Errorf("1000 tickets: order hash %s, first %s, last %s; want %s, T0965, T0636", got, order[0], order[999], orderHash)
	}
}

// TestDrawVerify: each change to a published draw fails the check it
// breaks, and the error names what failed (the first position that
// differs, for the order).
func TestDrawVerify(t *testing.T) {
	otherSeed := strings.Repeat("ab", 32)
	otherCommitment, err := flashsale.DrawCommitment(vectorSale, otherSeed)
	if err != nil {
		t.Fatal(err)
	}
	const extra = "01KDQ0ZA0000000000000000AA" // sorts between vectorDraw().Tickets[3] and [4]
	for _, tt := range []struct {
		name string
		mod  func(d *flashsale.Draw)
		want error  // the check that fails
		say  string // what the message names
	}{
		{"ticket added", func(d *flashsale.Draw) { d.Tickets = slices.Insert(d.Tickets, 4, extra) }, flashsale.ErrDrawOrder, "position 1 holds"},
		{"ticket added to the order's end too", func(d *flashsale.Draw) {
			d.Tickets = slices.Insert(d.Tickets, 4, extra)
			d.Order = append(d.Order, extra)
		}, flashsale.ErrDrawOrder, "position "},
		{"ticket removed", func(d *flashsale.Draw) { d.Tickets = slices.Delete(d.Tickets, 0, 1) }, flashsale.ErrDrawOrder, "position "},
		{"ticket removed from the order too", func(d *flashsale.Draw) {
			i := slices.Index(d.Order, d.Tickets[0])
			d.Tickets = slices.Delete(d.Tickets, 0, 1)
			d.Order = slices.Delete(d.Order, i, i+1)
		}, flashsale.ErrDrawOrder, "position "},
		{"order swapped", func(d *flashsale.Draw) { d.Order[1], d.Order[2] = d.Order[2], d.Order[1] }, flashsale.ErrDrawOrder,
			fmt.Sprintf("position 2 holds %q where the seed puts %q", vectorOrder[2], vectorOrder[1])},
		{"last two swapped", func(d *flashsale.Draw) { d.Order[6], d.Order[7] = d.Order[7], d.Order[6] }, flashsale.ErrDrawOrder, "position 7 "},
		{"last place another ticket", func(d *flashsale.Draw) { d.Order[7] = d.Order[0] }, flashsale.ErrDrawOrder, "position 8 "},
		{"order truncated", func(d *flashsale.Draw) { d.Order = d.Order[:7] }, flashsale.ErrDrawOrder, "lists 7 tickets, the draw has 8"},
		{"order empty", func(d *flashsale.Draw) { d.Order = nil }, flashsale.ErrDrawOrder, "lists 0 tickets"},
		{"order repeats a ticket", func(d *flashsale.Draw) { d.Order[5] = d.Order[0] }, flashsale.ErrDrawOrder, "position 6 "},
		{"order of another ticket", func(d *flashsale.Draw) { d.Order[0] = extra }, flashsale.ErrDrawOrder, "position 1 "},
		{"tickets swapped", func(d *flashsale.Draw) { d.Tickets[0], d.Tickets[1] = d.Tickets[1], d.Tickets[0] }, flashsale.ErrDrawTickets, "out of order"},
		{"tickets unsorted", func(d *flashsale.Draw) { d.Tickets = slices.Clone(vectorJoined) }, flashsale.ErrDrawTickets, "out of order"},
		{"tickets duplicated", func(d *flashsale.Draw) { d.Tickets = slices.Insert(d.Tickets, 4, d.Tickets[4]) }, flashsale.ErrDrawTickets, "repeats"},
		{"ticket empty", func(d *flashsale.Draw) { d.Tickets[0] = "" }, flashsale.ErrDrawTickets, "empty"},
		{"ticket with a newline", func(d *flashsale.Draw) { d.Tickets[7] += "\nX" }, flashsale.ErrDrawTickets, "byte 0xa"},
		{"seed of another draw", func(d *flashsale.Draw) { d.Seed = otherSeed }, flashsale.ErrDrawCommitment, vectorCommitment},
		{"seed and commitment both swapped", func(d *flashsale.Draw) { d.Seed, d.Commitment = otherSeed, otherCommitment }, flashsale.ErrDrawOrder, "position "},
		{"seed not revealed", func(d *flashsale.Draw) { d.Seed = "" }, flashsale.ErrDrawSeed, "not revealed"},
		{"seed in upper case", func(d *flashsale.Draw) { d.Seed = strings.ToUpper(d.Seed) }, flashsale.ErrDrawSeed, "draw seed"},
		{"seed short", func(d *flashsale.Draw) { d.Seed = d.Seed[:62] }, flashsale.ErrDrawSeed, "draw seed"},
		{"seed not hex", func(d *flashsale.Draw) { d.Seed = "zz" + d.Seed[2:] }, flashsale.ErrDrawSeed, "draw seed"},
		{"sale of another id", func(d *flashsale.Draw) { d.SaleID = "01KDQ0GZ5T4M7R2N8B6C3W9F1J" }, flashsale.ErrDrawCommitment, "01KDQ0GZ5T4M7R2N8B6C3W9F1J"},
		{"sale id empty", func(d *flashsale.Draw) { d.SaleID = "" }, flashsale.ErrDrawCommitment, "sale id is empty"},
		{"commitment in upper case", func(d *flashsale.Draw) { d.Commitment = strings.ToUpper(d.Commitment) }, flashsale.ErrDrawCommitment, "draw commitment"},
		{"commitment of the bare seed", func(d *flashsale.Draw) {
			sum := sha256.Sum256([]byte(vectorSeed))
			d.Commitment = hex.EncodeToString(sum[:])
		}, flashsale.ErrDrawCommitment, "draw commitment"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := vectorDraw()
			tt.mod(&d)
			err := d.Verify()
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.say) {
				t.Errorf("Verify = %v; want %v naming %q", err, tt.want, tt.say)
			}
			for _, other := range drawChecks {
				if other != tt.want && errors.Is(err, other) {
					t.Errorf("Verify = %v: it names %v too", err, other)
				}
			}
			if flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("code %q, want %q", flashsale.ErrorCode(err), flashsale.EInvalid)
			}
		})
	}
	t.Run("OK", func(t *testing.T) {
		for _, d := range []flashsale.Draw{
			vectorDraw(),
			{SaleID: vectorSale, Commitment: vectorCommitment, Seed: vectorSeed}, // nobody joined
		} {
			if err := d.Verify(); err != nil {
				t.Errorf("%+v: %v", d, err)
			}
		}
	})
}

var drawChecks = []error{flashsale.ErrDrawSeed, flashsale.ErrDrawCommitment, flashsale.ErrDrawTickets, flashsale.ErrDrawOrder}

// TestDrawOrderRefuses: a seed that is not 64 lowercase hex characters, and
// tickets that repeat or could not be told apart in the list hash, are
// refused rather than drawn.
func TestDrawOrderRefuses(t *testing.T) {
	for _, tt := range []struct {
		name    string
		seed    string
		tickets []string
		want    error
	}{
		{"empty seed", "", vectorJoined, flashsale.ErrDrawSeed},
		{"short seed", vectorSeed[:63], vectorJoined, flashsale.ErrDrawSeed},
		{"long seed", vectorSeed + "00", vectorJoined, flashsale.ErrDrawSeed},
		{"upper-case seed", strings.ToUpper(vectorSeed), vectorJoined, flashsale.ErrDrawSeed},
		{"seed with a space", " " + vectorSeed[1:], vectorJoined, flashsale.ErrDrawSeed},
		{"duplicate", vectorSeed, append(slices.Clone(vectorJoined), vectorJoined[3]), flashsale.ErrDrawTickets},
		{"empty id", vectorSeed, []string{"a", ""}, flashsale.ErrDrawTickets},
		{"newline", vectorSeed, []string{"a\nb", "c"}, flashsale.ErrDrawTickets},
		{"space", vectorSeed, []string{"a b"}, flashsale.ErrDrawTickets},
		{"non-ASCII", vectorSeed, []string{"caf\u00e9"}, flashsale.ErrDrawTickets},
	} {
		t.Run(tt.name, func(t *testing.T) {
			order, err := flashsale.DrawOrder(tt.seed, tt.tickets)
			if !errors.Is(err, tt.want) || order != nil {
				t.Errorf("DrawOrder = %v, %v; want %v", order, err, tt.want)
			}
		})
	}
	t.Run("OK", func(t *testing.T) {
		if order, err := flashsale.DrawOrder(vectorSeed, nil); err != nil || len(order) != 0 {
			t.Errorf("no tickets: %v, %v", order, err)
		}
		if order, err := flashsale.DrawOrder(vectorSeed, []string{"~!"}); err != nil || !slices.Equal(order, []string{"~!"}) {
			t.Errorf("one ticket: %v, %v", order, err)
		}
	})
}

// TestNewDrawSeed: a seed is 64 lowercase hex characters, fresh each time,
// and commits and draws.
func TestNewDrawSeed(t *testing.T) {
	a, err := flashsale.NewDrawSeed()
	if err != nil {
		t.Fatal(err)
	}
	b, err := flashsale.NewDrawSeed()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 64 || strings.ToLower(a) != a || a == b {
		t.Fatalf("seeds %q and %q", a, b)
	}
	d := flashsale.Draw{SaleID: vectorSale, Seed: a, Tickets: vectorDraw().Tickets}
	if d.Commitment, err = flashsale.DrawCommitment(d.SaleID, a); err != nil {
		t.Fatal(err)
	}
	if d.Order, err = flashsale.DrawOrder(a, vectorJoined); err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(); err != nil {
		t.Fatal(err)
	}
}

// chiSquareLimit is the value a chi-square statistic with df degrees of
// freedom exceeds with probability 0.001 (Wilson–Hilferty's approximation,
// within 0.1% at these df).
func chiSquareLimit(df int) float64 {
	const z = 3.090232 // the standard normal's 0.999 quantile
	k := float64(df)
	v := 2 / (9 * k)
	return k * math.Pow(1-v+z*math.Sqrt(v), 3)
}

// chiSquare is Pearson's statistic of counts against a uniform expectation.
func chiSquare(counts []int, total int) float64 {
	want := float64(total) / float64(len(counts))
	var x float64
	for _, c := range counts {
		x += (float64(c) - want) * (float64(c) - want) / want
	}
	return x
}

// permutationIndex numbers the permutation order makes of tickets (0 to
// n!-1, Lehmer code) so each of the n! orders has its own count.
func permutationIndex(tickets, order []string) int {
	rest := slices.Clone(tickets)
	idx := 0
	for _, t := range order {
		i := slices.Index(rest, t)
		idx = idx*len(rest) + i
		rest = slices.Delete(rest, i, i+1)
	}
	return idx
}

// TestDrawUniform: over 36 000 draws of six tickets, each of the 720 orders
// comes up as often as chance allows (chi-square, significance 0.001,
// 719 degrees of freedom), and each ticket holds each place as often
// (25 degrees of freedom, once scaled). The seeds are SHA-256 of a counter, not
// crypto/rand, so the test gives one answer every run: it cannot flake.
// The same check refuses a known-biased shuffle, so it can fail.
func TestDrawUniform(t *testing.T) {
	tickets := []string{"01KDQ0A", "01KDQ0B", "01KDQ0C", "01KDQ0D", "01KDQ0E", "01KDQ0F"}
	const draws = 36_000
	perms := make([]int, 720)
	places := make([]int, 36) // ticket*6 + place
	for i := range draws {
		sum := sha256.Sum256(fmt.Appendf(nil, "TestDrawUniform %d", i))
		order, err := flashsale.DrawOrder(hex.EncodeToString(sum[:]), tickets)
		if err != nil {
			t.Fatal(err)
		}
		perms[permutationIndex(tickets, order)]++
		for place, id := range order {
			places[slices.Index(tickets, id)*6+place]++
		}
	}
	if x, limit := chiSquare(perms, draws), chiSquareLimit(719); x > limit {
		t.Errorf("orders: chi-square %.1f > %.1f (719 df, 0.001): the draw favours some orders", x, limit)
	} else {
		t.Logf("orders: chi-square %.1f (limit %.1f)", x, limit)
	}
	// Each draw puts every ticket in one place and one ticket in every
	// place (a permutation matrix, not six independent samples), so
	// Pearson's statistic of the table is 6/5 of a chi-square with
	// (6-1)*(6-1) degrees of freedom: its mean is 30, not 25.
	if x, limit := chiSquare(places, draws*6)*5/6, chiSquareLimit(25); x > limit {
		t.Errorf("places: chi-square %.1f > %.1f (25 df, 0.001): some ticket is favoured for some place", x, limit)
	} else {
		t.Logf("places: chi-square %.1f (limit %.1f)", x, limit)
	}

	// The naive shuffle (swap each place with any place, not a later one)
	// makes 6^6 equally likely runs of 720 orders, so some come up more
	// often than others: the check above must see it.
	rng := rand.New(rand.NewPCG(1, 2))
	biased := make([]int, 720)
	for range draws {
		order := slices.Clone(tickets)
		for i := range order {
			j := rng.IntN(len(order))
			order[i], order[j] = order[j], order[i]
		}
		biased[permutationIndex(tickets, order)]++
	}
	if x, limit := chiSquare(biased, draws), chiSquareLimit(719); x <= limit {
		t.Errorf("a naive shuffle passes: chi-square %.1f <= %.1f", x, limit)
	}
}

// FuzzDrawVerify: DrawOrder and Verify never panic, whatever the seed,
// sale and tickets; a draw made by DrawCommitment and DrawOrder always
// verifies; and any one change to it (the seed, the sale, the commitment,
// a ticket added, removed or moved, two places swapped) fails.
func FuzzDrawVerify(f *testing.F) {
	f.Add([]byte(vectorSeed), vectorSale, strings.Join(vectorJoined, ","), uint8(0), uint16(0))
	f.Add([]byte("x"), "s", "a,b", uint8(3), uint16(1))
	f.Add([]byte{}, "", "", uint8(7), uint16(2))
	f.Add([]byte("seed"), "sale:1", "b,a,a", uint8(5), uint16(9))
	f.Add([]byte("seed"), "sale", "a\nb,c", uint8(9), uint16(0))
	f.Fuzz(func(t *testing.T, raw []byte, saleID, list string, change uint8, at uint16) {
		var tickets []string
		if list != "" {
			tickets = strings.Split(list, ",")
		}
		// Whatever comes in: an error or an answer, never a panic.
		_, _ = flashsale.DrawOrder(string(raw), tickets)
		_, _ = flashsale.DrawCommitment(saleID, string(raw))
		_ = flashsale.Draw{SaleID: saleID, Commitment: string(raw), Seed: string(raw), Tickets: tickets, Order: tickets}.Verify()

		sum := sha256.Sum256(raw)
		seed := hex.EncodeToString(sum[:])
		order, err := flashsale.DrawOrder(seed, tickets)
		if err != nil {
			if !errors.Is(err, flashsale.ErrDrawTickets) {
				t.Fatalf("DrawOrder(%q): %v, want ErrDrawTickets", tickets, err)
			}
			return
		}
		commitment, err := flashsale.DrawCommitment(saleID, seed)
		if err != nil {
			if saleID != "" {
				t.Fatalf("DrawCommitment(%q): %v", saleID, err)
			}
			return
		}
		sorted := slices.Sorted(slices.Values(tickets))
		d := flashsale.Draw{SaleID: saleID, Commitment: commitment, Seed: seed, Tickets: sorted, Order: order}
		if err := d.Verify(); err != nil {
			t.Fatalf("a draw as made does not verify: %v", err)
		}
		n, c := len(sorted), change%9
		if n < [9]int{4: 1, 5: 2, 6: 2, 7: 1, 8: 1}[c] {
			return // too few tickets to remove, move or repeat one
		}
		i := int(at) % max(n, 1)
		var want error
		switch c {
		case 0:
			d.Seed, want = hex.EncodeToString(flipBit(sum[:], int(at))), flashsale.ErrDrawCommitment
		case 1:
			d.SaleID, want = saleID+"x", flashsale.ErrDrawCommitment
		case 2:
			d.Commitment, want = hex.EncodeToString(flipBit(mustHex(t, commitment), int(at))), flashsale.ErrDrawCommitment
		case 3: // a ticket nobody has, in its sorted place
			longest := 0
			for _, t := range sorted {
				longest = max(longest, len(t))
			}
			extra := strings.Repeat("~", longest+1) // after every other
			d.Tickets, want = append(slices.Clone(sorted), extra), flashsale.ErrDrawOrder
		case 4:
			d.Tickets, want = slices.Delete(slices.Clone(sorted), i, i+1), flashsale.ErrDrawOrder
		case 5:
			d.Tickets, want = swapNext(sorted, i), flashsale.ErrDrawTickets
		case 6:
			d.Order, want = swapNext(order, i), flashsale.ErrDrawOrder
		case 7:
			d.Order, want = slices.Delete(slices.Clone(order), i, i+1), flashsale.ErrDrawOrder
		case 8:
			d.Tickets, want = slices.Insert(slices.Clone(sorted), i, sorted[i]), flashsale.ErrDrawTickets
		}
		if err := d.Verify(); !errors.Is(err, want) {
			t.Fatalf("change %d to %+v: Verify = %v, want %v", c, d, err, want)
		}
	})
}

// swapNext returns a copy of s with s[i] and the one after it (the first,
// after the last) swapped.
func swapNext(s []string, i int) []string {
	out := slices.Clone(s)
	j := (i + 1) % len(out)
	out[i], out[j] = out[j], out[i]
	return out
}

// flipBit returns b with one bit flipped: another value of the same length.
func flipBit(b []byte, at int) []byte {
	out := slices.Clone(b)
	out[at/8%len(out)] ^= 1 << (at % 8)
	return out
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
