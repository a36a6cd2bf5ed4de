package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// kindSale is one of issue 25's scenarios: a sale of a kind, its units,
// how a purchase names one of them and the largest party.
type kindSale struct {
	name     string
	kind     string
	zone     string
	units    []map[string]any // each of the sale's nights: a slot or a vehicle
	names    []string         // what a purchase names (slots or departures)
	field    string           // the purchase's name for it: slot or departure
	maxParty int
	guests   int
}

// kindScenarios are the restaurant (three services a day over two days,
// 40 covers each), the spa (appointments every 30 minutes, 3 therapists)
// and the shuttle (4 departures, 2 vehicles x 8 seats, groups together).
func kindScenarios() []kindSale {
	var restaurant, spa, shuttle kindSale
	restaurant = kindSale{name: "Restaurant", kind: "slot", zone: "Europe/Paris", field: "slot", maxParty: 6, guests: 300}
	for d := range 2 {
		for _, at := range []string{"12:00", "19:00", "21:30"} {
			restaurant.units = append(restaurant.units, map[string]any{"date": testenv.Night(d), "time": at, "stock": 40})
			restaurant.names = append(restaurant.names, testenv.Night(d)+"T"+at)
		}
	}
	spa = kindSale{name: "Spa", kind: "slot", zone: "Asia/Shanghai", field: "slot", maxParty: 1, guests: 60}
	for _, at := range []string{"09:00", "09:30", "10:00", "10:30", "11:00", "11:30"} {
		spa.units = append(spa.units, map[string]any{"date": testenv.Night(0), "time": at, "minutes": 60, "stock": 3})
		spa.names = append(spa.names, testenv.Night(0)+"T"+at)
	}
	shuttle = kindSale{name: "Shuttle", kind: "seats", zone: "Asia/Shanghai", field: "departure", maxParty: 5, guests: 150}
	for _, at := range []string{"09:00", "09:30", "10:00", "10:30"} {
		for range 2 {
			shuttle.units = append(shuttle.units, map[string]any{"date": testenv.Night(1), "time": at, "minutes": 45, "stock": 8})
		}
		shuttle.names = append(shuttle.names, testenv.Night(1)+"T"+at)
	}
	return []kindSale{restaurant, spa, shuttle}
}

// TestKindsStorm: the restaurant, the spa and the shuttle each sell out
// exactly under a storm of guests over HTTP, in both shapes (the embedded
// server, and two distributed instances on Redis, RabbitMQ and MariaDB):
// every party's places from one unit, no unit oversold, the places a
// party did not fit sold to parties of one to the last, and the audit
// balanced.
func TestKindsStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("storms over HTTP")
	}
	t.Run("Embedded", func(t *testing.T) {
		_, c := MustRunMain(t, nil)
		for _, k := range kindScenarios() {
			t.Run(k.name, func(t *testing.T) { kindStorm(t, []*client{c}, k) })
		}
	})
	t.Run("Distributed", func(t *testing.T) {
		cl := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_LIMIT_PURCHASE_USER=off", "FLASHSALE_LOG_LEVEL=error")
		for _, k := range kindScenarios() {
			t.Run(k.name, func(t *testing.T) { kindStorm(t, cl.clients, k) })
		}
	})
}

func kindStorm(t *testing.T, cs []*client, k kindSale) {
	ctx := t.Context()
	c := cs[0]
	sale := saleJSON(nil, k.maxParty, true)
	sale["kind"], sale["time_zone"], sale["nights"] = k.kind, k.zone, k.units
	id := c.createSale(t, sale)
	capacity := 0
	for _, u := range k.units {
		capacity += u["stock"].(int)
	}

	// take is one party's purchase at instance i, retried while the
	// instance says it is busy (429, 503), as the page does.
	take := func(i int, user, name string, party int) (int, orderJSON) {
		for try := 0; ; try++ {
			st, o, err := buy(ctx, cs[i%len(cs)], cs[i%len(cs)], id, user, map[string]any{k.field: name, "quantity": party}, "")
			if err != nil {
				t.Errorf("%s: %v", user, err)
				return 0, o
			}
			if (st != http.StatusTooManyRequests && st != http.StatusServiceUnavailable) || try == 100 {
				return st, o
			}
			time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
		}
	}
	var (
		mu     sync.Mutex
		placed int
	)
	var wg sync.WaitGroup
	for g := range k.guests {
		wg.Go(func() {
			name, party := k.names[rand.IntN(len(k.names))], 1+rand.IntN(k.maxParty)
			st, _ := take(g, fmt.Sprintf("%s-%04d", k.name, g), name, party)
			switch st {
			case http.StatusAccepted:
				mu.Lock()
				placed += party
				mu.Unlock()
			case http.StatusConflict: // sold_out (or the limit)
			default:
				t.Errorf("party of %d for %s: %d", party, name, st)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// The places left go to parties of one, to the last.
	for n, name := range k.names {
		for i := 0; ; i++ {
			st, _ := take(i, fmt.Sprintf("%s-last-%d-%d", k.name, n, i), name, 1)
			if st == http.StatusConflict {
				break
			}
			if st != http.StatusAccepted || i > capacity {
				t.Fatalf("%s after the storm: %d", name, st)
			}
			placed++
		}
	}
	if placed != capacity {
		t.Errorf("%d places accepted, capacity %d", placed, capacity)
	}
	// The database has every order (the distributed shape writes them
	// behind the 202), each unit full, none over.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := c.adminSale(t, id)
		held, full := 0, true
		for i, n := range v.Nights {
			held += n.Held
			if n.Held > k.units[i]["stock"].(int) || n.Available != 0 {
				full = false
			}
		}
		if held == capacity && full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("units after the storm: %+v (held %d of %d)", v.Nights, held, capacity)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var audit struct {
		Balanced bool  `json:"balanced"`
		Findings []any `json:"findings"`
	}
	if st, err := c.do(ctx, "GET", "/api/admin/sales/"+id+"/audit", c.admin, nil, nil, &audit); err != nil || st != 200 || !audit.Balanced {
		t.Errorf("audit: %d %v %+v", st, err, audit.Findings)
	}
}
