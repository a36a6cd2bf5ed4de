package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestRedisTLS (issue 23, item 5): the distributed shape runs on a Redis
// that speaks only TLS (rediss://), as most managed Redis does; the
// configuration used to refuse the scheme. The instance trusts the test's
// CA through SSL_CERT_FILE, as it would a private CA in production. A
// sale sells out through it, sold-out broadcast included, and the books
// balance.
func TestRedisTLS(t *testing.T) {
	rs, ca := testenv.StartRedisTLS(t)
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_REDIS_URL="+rs.URL(), "SSL_CERT_FILE="+ca)
	const stock = 5
	id := c.clients[0].createSale(t, saleJSON([]int{stock}, 1, true))
	accepted := map[string]string{}
	soldOut := 0
	for i := range 12 {
		user := fmt.Sprintf("tls-%02d", i)
		status, o, err := purchaseAcross(context.Background(), c.clients[i%2], c.clients[(i+1)%2], id, user)
		switch {
		case err != nil:
			t.Fatalf("%s: %v", user, err)
		case status == http.StatusAccepted:
			accepted[o.OrderID] = user
		case o.Error.Code == "sold_out":
			soldOut++
		default:
			t.Fatalf("%s: %d %+v", user, status, o)
		}
	}
	if len(accepted) != stock || soldOut != 12-stock {
		t.Fatalf("%d accepted, %d sold out; want %d and %d", len(accepted), soldOut, stock, 12-stock)
	}
	checkBooks(t, c, id, stock, accepted, true)
}
