package flashsale_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
)

// TestCheckNights: the nights of a sale are refused when no guest could
// stay them: passed at creation, or before the sale opens. The clock is an
// argument, so these cases hold whatever day the test runs.
func TestCheckNights(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	sale := func(startsAt time.Time, dates ...string) *flashsale.Sale {
		return fixture.Sale(fixture.Window(startsAt, startsAt.Add(time.Hour)), fixture.On(1, dates...))
	}
	for _, c := range []struct {
		name string
		sale *flashsale.Sale
		want string // "" when accepted
	}{
		{"Future", sale(now.Add(time.Hour), "2026-12-24", "2026-12-25"), ""},
		{"Tonight", sale(now.Add(-time.Hour), "2026-12-04"), ""},
		// A hotel west of UTC: its "tonight" is yesterday's date in UTC.
		{"TonightWestOfUTC", sale(now.Add(-time.Hour), "2026-12-03"), ""},
		{"Passed", sale(now.Add(-time.Hour), "2026-12-02", "2026-12-24"), "nights[0].date 2026-12-02 has passed"},
		{"Year2020", sale(now.Add(-time.Hour), "2020-12-24"), "has passed"},
		// The console's default dates, with the sale set to open later.
		{"BeforeOpening", sale(time.Date(2026, 12, 20, 12, 0, 0, 0, time.UTC), "2026-12-04", "2026-12-21"),
			"nights[0].date 2026-12-04 is before the sale opens (starts_at 2026-12-20T12:00:00Z)"},
		{"OpeningNight", sale(time.Date(2026, 12, 20, 12, 0, 0, 0, time.UTC), "2026-12-20"), ""},
		{"LaterNightBeforeOpening", sale(time.Date(2026, 12, 20, 12, 0, 0, 0, time.UTC), "2026-12-20", "2026-12-21"), ""},
		// With the hotel's time zone the rules judge there, without slack:
		// at 09:00 UTC it is 17:00 on the 4th in Shanghai, so the 3rd has
		// passed (the slack alone would take it), and 22:00 on the 3rd in
		// Pago Pago (UTC-11), so the 3rd is tonight there.
		{"PassedInShanghai", zoned("Asia/Shanghai", sale(now.Add(-time.Hour), "2026-12-03")), "nights[0].date 2026-12-03 has passed in Asia/Shanghai"},
		{"TonightInShanghai", zoned("Asia/Shanghai", sale(now.Add(-time.Hour), "2026-12-04")), ""},
		{"TonightInPagoPago", zoned("Pacific/Pago_Pago", sale(now.Add(-time.Hour), "2026-12-03")), ""},
		{"PassedInPagoPago", zoned("Pacific/Pago_Pago", sale(now.Add(-time.Hour), "2026-12-02")), "has passed in Pacific/Pago_Pago"},
		// 12:00 UTC on the 20th is 02:00 on the 21st at UTC+14: the 20th
		// is before the opening there.
		{"BeforeOpeningInKiritimati", zoned("Pacific/Kiritimati", sale(time.Date(2026, 12, 20, 12, 0, 0, 0, time.UTC), "2026-12-20")),
			"is before the sale opens (starts_at 2026-12-20T12:00:00Z in Pacific/Kiritimati)"},
		{"UnknownZone", zoned("Mars/Olympus_Mons", sale(now.Add(time.Hour), "2026-12-24")), `time_zone "Mars/Olympus_Mons" is not an IANA time zone`},
		{"LocalZone", zoned("Local", sale(now.Add(time.Hour), "2026-12-24")), "time_zone must be an IANA time zone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.sale.CheckNights(now)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("CheckNights = %v, want it accepted", err)
			case c.want != "" && (flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("CheckNights = %v, want invalid: %q", err, c.want)
			}
		})
	}
}

// zoned is s in the hotel time zone tz.
func zoned(tz string, s *flashsale.Sale) *flashsale.Sale {
	s.TimeZone = tz
	return s
}

// TestCheckCheckIn: a stay whose first night has passed is refused; one
// from tonight is not: in any time zone without the sale's, on the hotel's
// calendar with it (at 09:00 UTC it is 17:00 in Shanghai, 22:00 the day
// before in Pago Pago).
func TestCheckCheckIn(t *testing.T) {
	now := time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		zone string
		ok   map[string]bool
	}{
		{"", map[string]bool{"2026-12-24": true, "2026-12-23": true, "2026-12-25": true, "2026-12-22": false, "2020-01-01": false}},
		{"Asia/Shanghai", map[string]bool{"2026-12-24": true, "2026-12-25": true, "2026-12-23": false}},
		{"Pacific/Pago_Pago", map[string]bool{"2026-12-23": true, "2026-12-24": true, "2026-12-22": false}},
	} {
		sale := fixture.Sale(fixture.Zone(c.zone))
		for in, ok := range c.ok {
			err := sale.CheckCheckIn(in, now)
			if ok != (err == nil) || (err != nil && flashsale.ErrorCode(err) != flashsale.EInvalid) {
				t.Errorf("zone %q: CheckCheckIn(%s) = %v, want accepted %v", c.zone, in, err, ok)
			}
		}
	}
	if err := fixture.Sale(fixture.Zone("Asia/Shanghai")).CheckCheckIn("2026-12-23", now); err == nil ||
		!strings.Contains(err.Error(), "has passed in Asia/Shanghai: choose a night from 2026-12-24 on") {
		t.Errorf("the refusal says %v", err)
	}
}

// TestNightPassedAllocs: the purchase path's date check allocates nothing
// once the sale's zone is known (the sold-out answers go through it).
func TestNightPassedAllocs(t *testing.T) {
	now := time.Now()
	for _, zone := range []string{"", "Asia/Shanghai"} {
		sale := fixture.Sale(fixture.Zone(zone))
		sale.NightPassed("2026-12-24", now) // loads the zone once
		if n := testing.AllocsPerRun(100, func() { sale.NightPassed("2026-12-24", now) }); n != 0 {
			t.Errorf("zone %q: %.0f allocations a check, want 0", zone, n)
		}
	}
}
