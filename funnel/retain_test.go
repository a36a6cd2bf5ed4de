package funnel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/internal/faultproxy"
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
	d := mustDeploy(t, e.Roles())
	svc := d.instance(t)
	s := sellOne(t, svc, d.clock.Now(), redisClient(t), prefix)

	later := s.EndsAt.Add(5 * 24 * time.Hour)
	if _, err := svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{EndsAt: &later}); err != nil {
		t.Fatalf("UpdateSale(ends_at +5 days): %v", err)
	}
	s.wantKeys(t, s.keysOff(later), later)
	// And the sale still sells, to another guest.
	if _, err := svc.Purchase(ctx, bob, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
		t.Fatalf("Purchase after the edit: %v", err)
	}
}

// TestLaterEndRetainedByTheAudit: the same edit with Redis unreachable at
// that moment. UpdateSale saves the new end and says the engine did not
// take it, and repeating the edit changes nothing, so before, nothing
// extended the keys: they expired on the old day, mid-sale. Now the
// scheduled audit retains the sale once Redis answers again.
func TestLaterEndRetainedByTheAudit(t *testing.T) {
	ctx := context.Background()
	rc := redisClient(t)
	proxy := faultproxy.Start(t, rc.Options().Addr)
	e, prefix := openRedisVia(t, "fs-retain-audit-", proxy.URL)
	d := mustDeploy(t, e.Roles())
	svc := funnel.New(funnel.Config{
		Store: d.store, Engine: d.engine, Writer: d.writer, Secret: []byte("test-secret"),
		Now: d.clock.Now, ReapInterval: time.Hour, AuditInterval: 50 * time.Millisecond,
	})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })

	s := sellOne(t, svc, d.clock.Now(), rc, prefix)

	proxy.Refuse(true)
	proxy.Cut()
	later := s.EndsAt.Add(5 * 24 * time.Hour)
	if _, err := svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{EndsAt: &later}); err == nil || !strings.Contains(err.Error(), "the change is saved, but the stock engine did not take it") {
		t.Fatalf("UpdateSale with Redis unreachable: %v; want saved, not taken by the engine", err)
	}
	if saved, err := d.store.Sale(ctx, s.ID); err != nil || !saved.EndsAt.Equal(later) {
		t.Fatalf("the sale in the database after the edit: %v, %v; want ends_at %v", saved, err, later)
	}
	if got := s.expiry("meta"); !got.Equal(s.old) {
		t.Fatalf("the keys' expiry moved to %v while Redis was unreachable through the proxy", got)
	}
	proxy.Refuse(false)

	var off []string
	testenv.Poll(10*time.Second, 20*time.Millisecond, func() bool { off = s.keysOff(later); return len(off) == 0 })
	s.wantKeys(t, off, later)
}

// soldSale is a sale of 5 rooms, one of them bought, on the Redis engine:
// when each of its keys expires, and when they did once it had sold.
type soldSale struct {
	*flashsale.Sale
	expiry func(suffix string) time.Time // of the key {ID}:suffix
	old    time.Time                     // meta's expiry after the purchase
}

// sellOne creates a sale that opens at now on svc, whose engine keeps its
// keys under prefix, and buys a room of it.
func sellOne(t *testing.T, svc *funnel.Service, now time.Time, rc *goredis.Client, prefix string) soldSale {
	t.Helper()
	ctx := context.Background()
	sale, err := svc.CreateSale(ctx, fixture.Sale(fixture.Stock(5), fixture.OpenAt(now), fixture.Limit(1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: sale.ID, IdempotencyKey: "k"}); err != nil {
		t.Fatalf("Purchase: %v", err)
	}
	s := soldSale{Sale: sale, expiry: func(suffix string) time.Time { return keyExpiry(t, rc, prefix+"{"+sale.ID+"}:"+suffix) }}
	s.old = s.expiry("meta")
	return s
}

// saleKeys are the suffixes of a sale's keys that a purchase leaves.
var saleKeys = []string{"meta", "stock", "users", "keys", "res"}

// keysOff are the sale's keys that do not expire a day after end's last
// hold, as a load of the sale ending then would set them (to a second).
func (s soldSale) keysOff(end time.Time) []string {
	want := end.Add(s.HoldDuration() + 24*time.Hour)
	var off []string
	for _, k := range saleKeys {
		if s.expiry(k).Sub(want).Abs() > time.Second {
			off = append(off, k)
		}
	}
	return off
}

// wantKeys fails t for each of the keys off (from keysOff(end)).
func (s soldSale) wantKeys(t *testing.T, off []string, end time.Time) {
	t.Helper()
	want := end.Add(s.HoldDuration() + 24*time.Hour)
	for _, k := range off {
		t.Errorf("the sale's %s key expires at %v; want %v, a day after the new end's last hold (it was %v)", k, s.expiry(k), want, s.old)
	}
}

// redisClient is a client of the test Redis, closed with the test.
func redisClient(tb testing.TB) *goredis.Client {
	tb.Helper()
	opts, err := goredis.ParseURL(testenv.URL(tb, testenv.Redis))
	if err != nil {
		tb.Fatal(err)
	}
	rc := goredis.NewClient(opts)
	tb.Cleanup(func() { rc.Close() })
	return rc
}

// keyExpiry is when key expires, by PEXPIRETIME.
func keyExpiry(tb testing.TB, rc *goredis.Client, key string) time.Time {
	tb.Helper()
	at, err := rc.PExpireTime(context.Background(), key).Result()
	if err != nil || at <= 0 {
		tb.Fatalf("PEXPIRETIME(%s) = %v, %v", key, at, err)
	}
	return time.UnixMilli(int64(at / time.Millisecond))
}
