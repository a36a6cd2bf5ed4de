package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is a kind of guest.
type Kind int

// The kinds of guests the source describes.
const (
	// Normal guests load the sale page, take a token, buy once, then pay
	// after a think time or let the hold expire.
	Normal Kind = iota
	// Scalpers skip the page, hammer the purchase, reuse tokens and ignore
	// Retry-After.
	Scalper
	// Broken clients send malformed bodies and forged tokens, and drop
	// connections mid-request.
	Broken
	kinds
)

var kindNames = [kinds]string{"normal", "scalper", "broken"}

func (k Kind) String() string { return kindNames[k] }

// Mix is the share of each kind of guest, in weights (they need not add
// up to 100).
type Mix [kinds]int

// DefaultMix is the source's: 70 % normal guests, 20 % scalpers, 10 % broken.
var DefaultMix = Mix{70, 20, 10}

// ParseMix reads "normal=70,scalper=20,broken=10"; a kind left out has
// weight 0, and at least one weight must be positive.
func ParseMix(s string) (Mix, error) {
	var m Mix
	seen := [kinds]bool{}
	for part := range strings.SplitSeq(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Mix{}, fmt.Errorf("mix %q: want kind=weight, got %q", s, part)
		}
		k := Kind(-1)
		for i, n := range kindNames {
			if n == name {
				k = Kind(i)
			}
		}
		if k < 0 {
			return Mix{}, fmt.Errorf("mix %q: unknown kind %q (normal, scalper, broken)", s, name)
		}
		if seen[k] {
			return Mix{}, fmt.Errorf("mix %q: %s given twice", s, name)
		}
		seen[k] = true
		n, err := strconv.Atoi(w)
		if err != nil || n < 0 || n > 1_000_000 {
			return Mix{}, fmt.Errorf("mix %q: weight of %s must be a whole number from 0 to 1000000", s, name)
		}
		m[k] = n
	}
	if m[Normal]+m[Scalper]+m[Broken] == 0 {
		return Mix{}, fmt.Errorf("mix %q: every weight is 0", s)
	}
	return m, nil
}

func (m Mix) String() string {
	return fmt.Sprintf("normal=%d,scalper=%d,broken=%d", m[Normal], m[Scalper], m[Broken])
}

// picker deals kinds out in proportion to their weights, evenly spread
// (smooth weighted round robin): every run of a mix sees the same guests
// in the same order, and any stretch of arrivals has close to the mix.
type picker struct {
	w, cur [kinds]int
	total  int
}

func newPicker(m Mix) *picker {
	p := &picker{w: m}
	for _, w := range m {
		p.total += w
	}
	return p
}

func (p *picker) next() Kind {
	best := Kind(0)
	for k := range kinds {
		p.cur[k] += p.w[k]
		if p.cur[k] > p.cur[best] {
			best = k
		}
	}
	p.cur[best] -= p.total
	return best
}
