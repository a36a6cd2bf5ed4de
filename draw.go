package flashsale

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Draw is a waiting room's published shuffle: everyone who joined before
// the sale's start, in the order the sale admits them. Before the start
// only SaleID and Commitment are published, so the seed is fixed before
// anyone can see it; after the start Seed, Tickets and Order are too, so
// anyone can recompute Order and check it was not rigged (Verify, and the
// procedure in docs/waiting-room.md, which says what that proves).
type Draw struct {
	SaleID string `json:"sale_id"`
	// Commitment is DrawCommitment(SaleID, Seed): lowercase hex of SHA-256.
	Commitment string `json:"commitment"`
	// Seed is 64 lowercase hex characters (32 bytes); empty until revealed.
	Seed string `json:"seed,omitempty"`
	// Tickets are the ticket ids (never user ids) of everyone who joined
	// before the start, sorted ascending bytewise.
	Tickets []string `json:"tickets"`
	// Order is DrawOrder(Seed, Tickets): Order[0] is first in line.
	Order []string `json:"order,omitempty"`
}

// drawDomain prefixes what a commitment hashes, so a commitment can only
// ever mean this draw's seed (and the version of these rules).
const drawDomain = "flashsale-draw-v1"

// Each check Verify makes has its error, which the error it returns wraps
// (errors.Is), so a caller can tell which check failed; DrawOrder and
// DrawCommitment refuse their input with the same ones.
var (
	ErrDrawSeed       = &Error{EInvalid, "the draw's seed must be 64 lowercase hex characters (32 bytes)"}
	ErrDrawCommitment = &Error{EInvalid, "the draw's commitment must be the SHA-256 of flashsale-draw-v1:<sale_id>:<seed>"}
	ErrDrawTickets    = &Error{EInvalid, "the draw's tickets must be distinct ids of printable ASCII, sorted ascending bytewise"}
	ErrDrawOrder      = &Error{EInvalid, "the draw's order must be the one its seed draws from its tickets"}
)

// NewDrawSeed returns a fresh seed from crypto/rand: nobody, the operator
// included, can predict it, so the order it draws is as good as uniform.
func NewDrawSeed() (string, error) {
	var b [sha256.Size]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("draw seed: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// DrawCommitment is what is published before the start in place of the
// seed. It hashes the sale id with the seed, so a seed committed to for one
// sale cannot be passed off as another sale's.
func DrawCommitment(saleID, seedHex string) (string, error) {
	if _, err := drawSeed(seedHex); err != nil {
		return "", err
	}
	if saleID == "" {
		return "", fmt.Errorf("draw commitment: the sale id is empty: %w", ErrDrawCommitment)
	}
	sum := sha256.Sum256([]byte(drawDomain + ":" + saleID + ":" + seedHex))
	return hex.EncodeToString(sum[:]), nil
}

// DrawOrder is the order seedHex draws from tickets (in any order; it
// sorts a copy): ascending by HMAC-SHA256(seed, list hash || ticket id),
// ties (which SHA-256 makes impossible in practice) by ticket id. Each key
// depends on the whole list, so a server that knows the seed cannot make
// up one ticket id that lands first without changing every other key too.
func DrawOrder(seedHex string, tickets []string) ([]string, error) {
	seed, err := drawSeed(seedHex)
	if err != nil {
		return nil, err
	}
	sorted := slices.Clone(tickets)
	slices.Sort(sorted)
	if err := checkTickets(sorted); err != nil {
		return nil, err
	}
	list := drawListHash(sorted)
	type keyed struct {
		key [sha256.Size]byte
		id  string
	}
	keys := make([]keyed, len(sorted))
	mac := hmac.New(sha256.New, seed)
	for i, t := range sorted {
		mac.Reset()
		mac.Write(list[:])
		mac.Write([]byte(t))
		keys[i].id = t
		mac.Sum(keys[i].key[:0])
	}
	slices.SortFunc(keys, func(a, b keyed) int {
		if c := bytes.Compare(a.key[:], b.key[:]); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	order := make([]string, len(keys))
	for i, k := range keys {
		order[i] = k.id
	}
	return order, nil
}

// Verify recomputes the draw from its published parts: the seed is one,
// the commitment is the seed's and the sale's, the tickets are sorted and
// distinct, and the order is the one DrawOrder draws. Its error wraps the
// check that failed (ErrDrawSeed, ErrDrawCommitment, ErrDrawTickets,
// ErrDrawOrder) and, for the order, names the first position (from 1)
// that differs.
func (d Draw) Verify() error {
	if d.Seed == "" {
		return fmt.Errorf("draw seed: not revealed yet (it is published once the sale starts): %w", ErrDrawSeed)
	}
	want, err := DrawCommitment(d.SaleID, d.Seed)
	if err != nil {
		return err
	}
	if d.Commitment != want {
		return fmt.Errorf("draw commitment: sale %q and the seed hash to %s, not %q: %w", d.SaleID, want, d.Commitment, ErrDrawCommitment)
	}
	if err := checkTickets(d.Tickets); err != nil {
		return err
	}
	order, err := DrawOrder(d.Seed, d.Tickets)
	if err != nil {
		return err
	}
	for i := range min(len(order), len(d.Order)) {
		if d.Order[i] != order[i] {
			return fmt.Errorf("draw order: position %d holds %q where the seed puts %q: %w", i+1, d.Order[i], order[i], ErrDrawOrder)
		}
	}
	if len(d.Order) != len(order) {
		return fmt.Errorf("draw order: it lists %d tickets, the draw has %d: %w", len(d.Order), len(order), ErrDrawOrder)
	}
	return nil
}

// drawSeed decodes a seed. Only the lowercase form is accepted, so one seed
// has one spelling and hashes to one commitment.
func drawSeed(seedHex string) ([]byte, error) {
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) != sha256.Size || strings.ToLower(seedHex) != seedHex {
		return nil, fmt.Errorf("draw seed: %q: %w", clip(seedHex), ErrDrawSeed)
	}
	return seed, nil
}

// checkTickets checks that sorted is strictly ascending and that every id
// is non-empty printable ASCII (0x21 to 0x7e): no newline can fold two ids
// into one in the list hash, and bytewise order is every language's
// string order.
func checkTickets(sorted []string) error {
	for i, t := range sorted {
		if t == "" {
			return fmt.Errorf("draw tickets: ticket %d is empty: %w", i+1, ErrDrawTickets)
		}
		for j := range len(t) {
			if t[j] < 0x21 || t[j] > 0x7e {
				return fmt.Errorf("draw tickets: ticket %q has byte %#x: %w", clip(t), t[j], ErrDrawTickets)
			}
		}
		if i > 0 && sorted[i-1] >= t {
			what := "repeats"
			if sorted[i-1] > t {
				what = "is out of order after"
			}
			return fmt.Errorf("draw tickets: ticket %d %q %s %q: %w", i+1, t, what, sorted[i-1], ErrDrawTickets)
		}
	}
	return nil
}

// drawListHash is SHA-256 over the sorted ticket ids, each followed by a
// newline: what binds every key to the whole list.
func drawListHash(sorted []string) [sha256.Size]byte {
	h := sha256.New()
	for _, t := range sorted {
		h.Write([]byte(t))
		h.Write([]byte{'\n'})
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// clip shortens what an error quotes from untrusted input.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
