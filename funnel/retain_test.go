package funnel_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestLaterEndKeepsTheSale: an operator moves a live sale's end five days
// later (PATCH ends_at) after it has sold. On the Redis engine every key of
// the sale then expires a day after the new end's last hold, as a load of
// the edited sale would have set them. Before, they kept the expiry of the
// sale's load, a day after the old end: the keys vanished in the middle of
// the new hours, and the fence closed the sale for a rebuild (the known
// limit docs/design.md recorded).
func TestLaterEndKeepsTheSale(t *testing.T) {
	ctx := context.Background()
	e, prefix := openRedisPrefix(t, "fs-retain-")
	url := testenv.URL(t, testenv.Redis)
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(opts)
	defer rc.Close()

	d := mustDeploy(t, e.Roles())
	svc := d.instance(t)
	s, err := svc.CreateSale(ctx, fixture.Sale(fixture.Stock(5), fixture.OpenAt(d.clock.Now()), fixture.Limit(1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, IdempotencyKey: "k"}); err != nil {
		t.Fatalf("Purchase: %v", err)
	}
	keys := []string{"meta", "stock", "users", "keys", "res"}
	expiry := func(suffix string) time.Time {
		t.Helper()
		at, err := rc.PExpireTime(ctx, prefix+"{"+s.ID+"}:"+suffix).Result()
		if err != nil || at <= 0 {
			t.Fatalf("PEXPIRETIME(%s) = %v, %v", suffix, at, err)
		}
		return time.UnixMilli(int64(at / time.Millisecond))
	}
	old := expiry("meta")

	later := s.EndsAt.Add(5 * 24 * time.Hour)
	if _, err := svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{EndsAt: &later}); err != nil {
		t.Fatalf("UpdateSale(ends_at +5 days): %v", err)
	}
	want := later.Add(s.HoldDuration() + 24*time.Hour)
	for _, k := range keys {
		if got := expiry(k); got.Sub(want).Abs() > time.Second {
			t.Errorf("the sale's %s key expires at %v; want %v, a day after the new end's last hold (it was %v)", k, got, want, old)
		}
	}
	// And the sale still sells, to another guest.
	if _, err := svc.Purchase(ctx, bob, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
		t.Fatalf("Purchase after the edit: %v", err)
	}
}
