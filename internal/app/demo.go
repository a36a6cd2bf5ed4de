package app

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// seedDemo creates the sample hotel sale unless an open demo sale exists:
// five Deluxe King rooms a night for Christmas, on sale from now.
func seedDemo(ctx context.Context, svc flashsale.SaleDesk, store flashsale.Store, now time.Time) error {
	sales, err := store.Sales(ctx, now)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for _, s := range sales {
		if s.Hotel == demoHotel {
			return nil
		}
	}
	year := now.Year()
	if now.After(time.Date(year, 12, 20, 0, 0, 0, 0, time.UTC)) {
		year++
	}
	night := func(day, stock int) flashsale.Night {
		return flashsale.Night{Date: time.Date(year, 12, day, 0, 0, 0, 0, time.UTC).Format(flashsale.DateLayout), Stock: stock}
	}
	_, err = svc.CreateSale(ctx, &flashsale.Sale{
		Title:         "Christmas flash sale: Deluxe King, 300 off",
		Hotel:         demoHotel,
		RoomType:      "Deluxe King",
		TimeZone:      "Asia/Shanghai",
		Nights:        []flashsale.Night{night(24, 5), night(25, 5), night(26, 5)},
		Price:         39900,
		OriginalPrice: 69900,
		Currency:      "CNY",
		StartsAt:      now.Add(-time.Second),
		EndsAt:        now.Add(7 * 24 * time.Hour),
		PerUserLimit:  1,
		HoldSeconds:   120,
		PurchaseToken: true,
	})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

const demoHotel = "Harbour View Hotel"
