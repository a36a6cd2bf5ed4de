package redis

import (
	"context"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// The sold-out broadcast. The scripts themselves PUBLISH on <prefix>soldout
// whenever they change whether a night is at zero, so the messages about a
// sale leave Redis in the same order as the changes they describe (all of a
// sale's keys live on one node, and one node's messages reach every
// subscriber in order). Messages are "<op> <nights> <sale id>":
//
//	z 3,4 s1   nights 3 and 4 of s1 are now at zero
//	b 3 s1     night 3 of s1 has units again
//	l - s1     s1 was (re)loaded: forget everything about it
//
// Safety: a flag only ever makes Reserve answer sold out without asking
// Redis; it never lets a reservation through, so a stale flag cannot
// oversell. Flags are set only from the ordered broadcast, never from a
// script reply (a reply can be overtaken by a later "b" from another
// engine, which would leave a flag stuck). Clearing is always safe, so the
// engine clears eagerly: after its own Release and Load, and for every sale
// whenever the subscription is (re)established, since messages may have
// been lost while it was down.

// soldOutFlags is each sale's set of nights known to be at zero.
type soldOutFlags struct {
	mu    sync.RWMutex
	sales map[string][]uint64 // sale id -> bitset of night indexes
	loads map[string]uint64   // sale id -> "l" messages applied (see clearUnlessReloaded)
}

// soldOut reports whether any night of the stay is flagged.
func (f *soldOutFlags) soldOut(saleID string, first, nights int) bool {
	if first < 0 || nights < 1 {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	bits := f.sales[saleID]
	if bits == nil {
		return false
	}
	for i := first; i < first+nights; i++ {
		if w := i / 64; w < len(bits) && bits[w]&(1<<(i%64)) != 0 {
			return true
		}
	}
	return false
}

// apply handles one broadcast message; malformed ones are ignored.
func (f *soldOutFlags) apply(msg string) {
	if len(msg) < 4 || msg[1] != ' ' {
		return
	}
	nights, saleID, ok := strings.Cut(msg[2:], " ")
	if !ok {
		return
	}
	switch msg[0] {
	case 'z':
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.sales == nil {
			f.sales = map[string][]uint64{}
		}
		bits := f.sales[saleID]
		for n := range strings.SplitSeq(nights, ",") {
			i, err := strconv.Atoi(n)
			if err != nil || i < 0 || i >= 1<<16 {
				continue
			}
			for len(bits) <= i/64 {
				bits = append(bits, 0)
			}
			bits[i/64] |= 1 << (i % 64)
		}
		f.sales[saleID] = bits
	case 'b':
		f.clearNights(saleID, nights)
	case 'l':
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.sales, saleID)
		if f.loads == nil {
			f.loads = map[string]uint64{}
		}
		f.loads[saleID]++
	}
}

// loaded is how many "l" messages of the sale were applied so far.
func (f *soldOutFlags) loaded(saleID string) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.loads[saleID]
}

// clearUnlessReloaded clears the sale's flags unless an "l" message was
// applied since loaded said seen: the engine's own Load clears the
// previous load's flags at once, but must not wipe what its own load's
// broadcast ("l" then "z" for the nights at zero) already set, or a sale
// loaded sold out (created with no rooms, or rebuilt after every room was
// sold) would never be flagged, and every purchase of it would go to Redis.
func (f *soldOutFlags) clearUnlessReloaded(saleID string, seen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loads[saleID] == seen {
		delete(f.sales, saleID)
	}
}

// clearNights clears the flags of a comma-separated list of nights.
func (f *soldOutFlags) clearNights(saleID, nights string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bits := f.sales[saleID]
	if bits == nil {
		return
	}
	for n := range strings.SplitSeq(nights, ",") {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 && i/64 < len(bits) {
			bits[i/64] &^= 1 << (i % 64)
		}
	}
}

func (f *soldOutFlags) clearSale(saleID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sales, saleID)
}

func (f *soldOutFlags) clearAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.sales)
}

// listen applies the broadcast until the subscription is closed. go-redis
// reconnects and resubscribes by itself and reports each resubscription as
// a *Subscription; anything sent while it was down is lost, so every flag
// is dropped then.
func (e *Engine) listen(ch <-chan any) {
	defer close(e.done)
	for m := range ch {
		switch m := m.(type) {
		case *goredis.Message:
			e.flags.apply(m.Payload)
		case *goredis.Subscription:
			if m.Kind == "subscribe" {
				e.flags.clearAll()
				e.logger.Info("sold-out broadcast resubscribed; local flags cleared", "channel", m.Channel)
			}
		}
	}
}

// Shard implements flashsale.StockEngine: on a Cluster, the address of the
// master serving the sale's slot in the client's slot map (so a failover
// is a new shard, with a breaker of its own); "" on one Redis.
func (e *Engine) Shard(saleID string) string {
	c, ok := e.client.(*goredis.ClusterClient)
	if !ok {
		return ""
	}
	m, err := c.MasterForKey(context.Background(), e.saleKeys(saleID).meta)
	if err != nil {
		return ""
	}
	return m.Options().Addr
}

// SoldOut reports, from the broadcast flags and without a round trip,
// whether a night of the stay is at zero. The funnel asks before spending a
// purchase token.
func (e *Engine) SoldOut(saleID string, first, nights int) bool {
	return e.flags.soldOut(saleID, first, nights)
}
