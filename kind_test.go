package flashsale_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
)

// slotSale is a restaurant in Paris: lunch, dinner and a late service on
// two days.
func slotSale(day time.Time) *flashsale.Sale {
	s := fixture.Sale(fixture.Zone("Europe/Paris"), fixture.OpenAt(day.Add(-48*time.Hour)))
	s.Kind = flashsale.KindSlot
	s.Nights = nil
	for d := range 2 {
		date := day.AddDate(0, 0, d).Format(flashsale.DateLayout)
		for _, at := range []string{"12:00", "19:00", "21:30"} {
			s.Nights = append(s.Nights, flashsale.Night{Date: date, Time: at, Stock: 40})
		}
	}
	return s
}

func TestSlotSale(t *testing.T) {
	day := time.Date(2031, 6, 10, 0, 0, 0, 0, time.UTC)
	s := slotSale(day)
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	i, err := s.Slot("2031-06-11T19:00", day)
	if err != nil || i != 4 {
		t.Fatalf("Slot = %d, %v, want unit 4", i, err)
	}
	start, _ := s.SlotStart(4)
	paris, _ := time.LoadLocation("Europe/Paris")
	if want := time.Date(2031, 6, 11, 19, 0, 0, 0, paris); !start.Equal(want) {
		t.Fatalf("SlotStart = %v, want %v (19:00 in Paris)", start, want)
	}
	for slot, want := range map[string]string{
		"2031-06-11 19:00": "slot must be",
		"2031-06-11T18:00": "not a slot of this sale",
		"2031-06-10T12:00": "has started",
	} {
		now := day
		if strings.Contains(want, "started") {
			now = time.Date(2031, 6, 10, 10, 0, 1, 0, time.UTC) // 12:00:01 in Paris
		}
		if _, err := s.Slot(slot, now); flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(err.Error(), want) {
			t.Errorf("Slot(%q) = %v, want invalid_request with %q", slot, err, want)
		}
	}
}

// TestSlotDST: a slot is judged in the venue's zone on its day, across
// the clocks' changes: one that does not exist that day (spring forward)
// and one that exists twice (fall back) are refused, the hours around
// them are the right moments.
func TestSlotDST(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	for _, c := range []struct {
		date, at string
		want     string // "" valid
		utcHour  int
	}{
		{"2031-03-09", "01:30", "", 6},                  // EST, UTC-5
		{"2031-03-09", "02:30", "does not exist", 0},    // the skipped hour
		{"2031-03-09", "03:30", "", 7},                  // EDT, UTC-4
		{"2031-11-02", "00:30", "", 4},                  // EDT
		{"2031-11-02", "01:30", "happens twice", 0},     // the repeated hour
		{"2031-11-02", "02:30", "", 7},                  // EST
		{"2031-11-02", "25:00", "a time like 19:00", 0}, // no such time
	} {
		s := fixture.Sale(fixture.Zone("America/New_York"), fixture.OpenAt(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)))
		s.Kind = flashsale.KindSlot
		s.Nights = []flashsale.Night{{Date: c.date, Time: c.at, Stock: 3, Minutes: 30}}
		err := s.Validate()
		if c.want != "" {
			if flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: Validate = %v, want %q", c.date, c.at, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: Validate = %v", c.date, c.at, err)
			continue
		}
		start, _ := s.SlotStart(0)
		if start.In(ny).Format("15:04") != c.at || start.UTC().Hour() != c.utcHour {
			t.Errorf("%s %s starts at %v (UTC hour %d), want UTC hour %d", c.date, c.at, start, start.UTC().Hour(), c.utcHour)
		}
	}
}

// TestSlotValidate: a slot sale's mistakes, named.
func TestSlotValidate(t *testing.T) {
	day := time.Date(2031, 6, 10, 0, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		set  func(s *flashsale.Sale)
		want string
	}{
		"NoZone":      {func(s *flashsale.Sale) { s.TimeZone = "" }, "time_zone is required"},
		"Unordered":   {func(s *flashsale.Sale) { s.Nights[1].Time = "11:00" }, "increasing order"},
		"Repeated":    {func(s *flashsale.Sale) { s.Nights[1].Time = "12:00" }, "increasing order"},
		"NoTime":      {func(s *flashsale.Sale) { s.Nights[0].Time = "" }, "a time like 19:00"},
		"LongMinutes": {func(s *flashsale.Sale) { s.Nights[0].Minutes = 24*60 + 1 }, "minutes"},
		"StayRule":    {func(s *flashsale.Sale) { s.Nights[2].MinStay = 2 }, "stay rules"},
		"BadKind":     {func(s *flashsale.Sale) { s.Kind = "table" }, "kind must be"},
		"StayTime":    {func(s *flashsale.Sale) { s.Kind = flashsale.KindStay }, "time and minutes are a slot's"},
	} {
		t.Run(name, func(t *testing.T) {
			s := slotSale(day)
			c.set(s)
			if err := s.Validate(); flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want invalid_request with %q", err, c.want)
			}
		})
	}
	s := slotSale(day)
	if err := s.CheckNights(time.Date(2031, 6, 10, 10, 30, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "has started") {
		t.Errorf("CheckNights after the first slot started = %v", err)
	}
}

// TestSeatsSale: a departure's vehicles share its date and time, one
// after another; Departure names the first and counts them; a slot sale
// may not repeat a start, a seats sale may not go back in time.
func TestSeatsSale(t *testing.T) {
	day := time.Date(2031, 6, 10, 0, 0, 0, 0, time.UTC)
	s := fixture.Sale(fixture.Zone("Asia/Shanghai"), fixture.OpenAt(day.Add(-48*time.Hour)))
	s.Kind = flashsale.KindSeats
	s.Nights = []flashsale.Night{
		{Date: "2031-06-10", Time: "09:00", Stock: 8}, {Date: "2031-06-10", Time: "09:00", Stock: 8},
		{Date: "2031-06-10", Time: "09:30", Stock: 8}, {Date: "2031-06-10", Time: "09:30", Stock: 8}, {Date: "2031-06-10", Time: "09:30", Stock: 8},
		{Date: "2031-06-10", Time: "10:00", Stock: 16},
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for dep, want := range map[string][2]int{"2031-06-10T09:00": {0, 2}, "2031-06-10T09:30": {2, 3}, "2031-06-10T10:00": {5, 1}} {
		first, vehicles, err := s.Departure(dep, day)
		if err != nil || first != want[0] || vehicles != want[1] {
			t.Errorf("Departure(%s) = %d, %d, %v, want unit %d and %d vehicles", dep, first, vehicles, err, want[0], want[1])
		}
	}
	s.Nights[4].Time = "09:00"
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "departures must be in increasing order") {
		t.Errorf("a vehicle of 09:00 after the 09:30 ones: Validate = %v", err)
	}
	s.Nights[4].Time = "09:30"
	s.Kind = flashsale.KindSlot
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "without repeats") {
		t.Errorf("a slot sale repeating a start: Validate = %v", err)
	}
}
