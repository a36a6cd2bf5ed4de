package main

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/faultproxy"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/oklog/ulid/v2"
)

// TestUnknownSalesAtTheDatabase floods the API with 10 000 requests (sale
// views and purchases) for 10 sale IDs that do not exist, and counts, at
// the wire between the service and MariaDB, the queries that name each
// ID: at most one per ID per negative-cache period (5 s), so a flood on a
// sale that does not exist cannot reach the database.
func TestUnknownSalesAtTheDatabase(t *testing.T) {
	proxy := faultproxy.Start(t, "127.0.0.1:3306")
	dbURL := proxy.URL(testenv.MySQLDatabase(t))
	_, cl := MustRunMain(t, func(c *app.Config) { c.DatabaseURL = dbURL })
	ids := make([][]byte, 10)
	for i := range ids {
		ids[i] = []byte(ulid.Make().String())
	}
	var mu sync.Mutex
	queries := make([]int, len(ids))
	proxy.Watch(func(_ int, chunk []byte) {
		mu.Lock()
		defer mu.Unlock()
		for i, id := range ids {
			queries[i] += bytes.Count(chunk, id)
		}
	})
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		start = time.Now()
	)
	for range 64 {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= 10_000 {
					return
				}
				id := string(ids[n%len(ids)])
				var status int
				var err error
				if n%2 == 0 {
					status, err = cl.do(context.Background(), "GET", "/api/sales/"+id, "", nil, nil, nil)
				} else {
					status, _, err = cl.purchase(context.Background(), id, "flooder", false, nil, "")
				}
				if err != nil || status != http.StatusNotFound {
					t.Errorf("request %d for unknown sale %s: %d %v, want 404", n, id, status, err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	proxy.Watch(nil)
	allowed := 1 + int(took/(5*time.Second)) // a miss per negative-cache period
	mu.Lock()
	defer mu.Unlock()
	for i, n := range queries {
		if n > allowed {
			t.Errorf("unknown sale %s: %d queries at the database in %v, want at most %d", ids[i], n, took.Round(time.Millisecond), allowed)
		}
	}
	t.Logf("10 000 requests for 10 unknown sales in %v: queries per ID at the database %v", took.Round(time.Millisecond), queries)
}
