package testenv

import (
	"time"

	"github.com/flashsale/flashsale"
)

// firstNight is the first night of every test sale's stay: three weeks
// after the day the test process started (UTC), fixed for the whole
// process so a test that runs over midnight sees one calendar. Test sales
// sell nights relative to it, never fixed dates: a night in the past is
// refused, so a fixed date would fail every test the day after it.
var firstNight = time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 21)

// Night is the date of test night i (0 is the first), as a sale's nights
// and a purchase's check_in spell it: "2006-01-02".
func Night(i int) string { return NightTime(i).Format(flashsale.DateLayout) }

// NightTime is test night i at midnight UTC.
func NightTime(i int) time.Time { return firstNight.AddDate(0, 0, i) }
