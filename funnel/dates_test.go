package funnel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
)

// day is the date d days from the test clock's today (UTC).
func day(e *env, d int) string {
	return e.clock.Now().UTC().AddDate(0, 0, d).Format(flashsale.DateLayout)
}

// wantInvalid fails the test unless err is EInvalid and says want.
func wantInvalid(tb testing.TB, what string, err error, want string) {
	tb.Helper()
	if flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(err.Error(), want) {
		tb.Fatalf("%s = %v, want invalid: %q", what, err, want)
	}
}

// TestCreatePassedNights: a sale selling a night that has passed, or a
// night before it opens, is refused and nothing is stored. Before, both
// were created (201) and sold: a purchase of a night in 2020 was held.
func TestCreatePassedNights(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []fixture.SaleOption
		want string
	}{
		{"Passed", []fixture.SaleOption{fixture.On(5, day(e, -3))}, "has passed"},
		{"Year2020", []fixture.SaleOption{fixture.On(5, "2020-12-24")}, "has passed"},
		{"BeforeOpening", []fixture.SaleOption{
			fixture.Window(e.clock.Now().AddDate(0, 0, 16), e.clock.Now().AddDate(0, 0, 17)),
			fixture.On(5, day(e, 1), day(e, 2)),
		}, "is before the sale opens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := fixture.Sale(append([]fixture.SaleOption{fixture.OpenAt(e.clock.Now())}, c.opts...)...)
			_, err := e.svc.CreateSale(ctx, s)
			wantInvalid(t, "CreateSale", err, c.want)
		})
	}
	if sales, err := e.store.ListSales(ctx, flashsale.SaleQuery{Limit: 10}); err != nil || len(sales) != 0 {
		t.Fatalf("stored %d sales (%v) from refused creations", len(sales), err)
	}
}

// TestEditPassedNights: an upcoming sale's nights cannot be edited into the
// past or before its opening, and the sale is left as it was.
func TestEditPassedNights(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	s := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = e.clock.Now().Add(time.Hour), e.clock.Now().Add(2*time.Hour)
		s.Nights = []flashsale.Night{{Date: day(e, 21), Stock: 5}}
	})
	_, err := e.svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{Nights: []flashsale.Night{{Date: day(e, -2), Stock: 5}}})
	wantInvalid(t, "UpdateSale(nights in the past)", err, "has passed")
	later := e.clock.Now().AddDate(0, 0, 30)
	_, err = e.svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{StartsAt: &later, EndsAt: new(later.Add(time.Hour))})
	wantInvalid(t, "UpdateSale(starts_at after the nights)", err, "is before the sale opens")
	got, err := e.store.Sale(ctx, s.ID)
	if err != nil || got.Nights[0].Date != day(e, 21) || !got.StartsAt.Equal(s.StartsAt) || got.Revision != s.Revision {
		t.Fatalf("after refused edits: %+v, %v", got, err)
	}
}

// TestCheckInPassed: a sale that runs for days keeps selling its later
// nights as the first ones pass. A stay from a night that has passed is
// refused, a purchase naming no check-in gets the first night not passed,
// and the public view no longer offers the passed nights.
func TestCheckInPassed(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	s := e.sale(t, func(s *flashsale.Sale) {
		s.EndsAt = e.clock.Now().AddDate(0, 0, 10)
		s.PerUserLimit = 5
		s.Nights = nil
		for d := range 6 {
			s.Nights = append(s.Nights, flashsale.Night{Date: day(e, d), Stock: 5})
		}
	}, 0)
	first := s.Nights[0].Date
	e.clock.Advance(3 * 24 * time.Hour) // nights 0 and 1 have passed, everywhere on Earth
	alice := flashsale.User{ID: "alice"}
	_, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: first, Nights: 1})
	wantInvalid(t, "Purchase from a passed night", err, "check_in "+first+" has passed")
	o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
	if err != nil || o.CheckIn != s.Nights[2].Date {
		t.Fatalf("Purchase with no check_in = %+v, %v; want the first night not passed, %s", o, err, s.Nights[2].Date)
	}
	v, err := e.svc.PublicSale(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Nights) != 4 || v.Nights[0].Date != s.Nights[2].Date || v.Nights[0].Available != 4 {
		t.Fatalf("public nights = %+v, want the 4 not passed, the first with 4 left", v.Nights)
	}
	e.nights(t, s.ID) // the books still balance
}

// TestCheckInPassedInHotelZone: a sale in the hotel's time zone stops
// selling a night once its date has passed there, not a day later as the
// slack of a sale without one allows. Kiritimati is UTC+14: a day after
// the sale opens, its first night (that day's date there) has passed on
// the hotel's calendar and not yet everywhere on Earth.
func TestCheckInPassedInHotelZone(t *testing.T) {
	const zone = "Pacific/Kiritimati"
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	e := mustOpen(t)
	ctx := context.Background()
	local := func(d int) string { return e.clock.Now().In(loc).AddDate(0, 0, d).Format(flashsale.DateLayout) }
	s := e.sale(t, func(s *flashsale.Sale) {
		s.TimeZone = zone
		s.EndsAt = e.clock.Now().AddDate(0, 0, 10)
		s.PerUserLimit = 5
		s.Nights = nil
		for d := range 4 {
			s.Nights = append(s.Nights, flashsale.Night{Date: local(d), Stock: 5})
		}
	}, 0)
	e.clock.Advance(24 * time.Hour)
	if flashsale.Passed(s.Nights[0].Date, e.clock.Now()) {
		t.Fatal("the first night has passed everywhere: the test no longer tells the zone from the slack")
	}
	alice := flashsale.User{ID: "alice"}
	_, err = e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: s.Nights[0].Date, Nights: 1})
	wantInvalid(t, "Purchase from a night passed in the hotel's zone", err, "has passed in "+zone)
	o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
	if err != nil || o.CheckIn != s.Nights[1].Date {
		t.Fatalf("Purchase with no check_in = %+v, %v; want the hotel's tonight, %s", o, err, s.Nights[1].Date)
	}
	v, err := e.svc.PublicSale(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Nights) != 3 || v.Nights[0].Date != s.Nights[1].Date {
		t.Fatalf("public nights = %+v, want the 3 not passed in %s", v.Nights, zone)
	}
}
