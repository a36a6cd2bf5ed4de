package flashsale_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
)

// ruled is a sale of five nights with a rule of each kind: night 0 needs
// 2 to 3 nights, night 1 is closed to arrival, night 2 to departure, night
// 4 is stop-sold.
func ruled() *flashsale.Sale {
	s := fixture.Sale(fixture.Stock(5, 5, 5, 5, 5))
	s.Nights[0].MinStay, s.Nights[0].MaxStay = 2, 3
	s.Nights[1].ClosedToArrival = true
	s.Nights[2].ClosedToDeparture = true
	s.Nights[4].StopSell = true
	return s
}

// TestCheckStayRules: the sale's own check (the funnel's, naming dates)
// and the engines' (CheckStay, by index) agree on every stay, and each
// refusal names its rule and the night's date.
func TestCheckStayRules(t *testing.T) {
	s := ruled()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[[2]int]string{ // first, nights -> code ("" allowed)
		{0, 1}: flashsale.EMinStay, {0, 2}: flashsale.EClosedToDeparture, {0, 3}: "", {0, 4}: flashsale.EMaxStay,
		{1, 1}: flashsale.EClosedToArrival, {2, 1}: "", {2, 2}: "", {2, 3}: flashsale.EStopSell, {3, 1}: "", {4, 1}: flashsale.EStopSell,
	}
	for first := range s.Nights {
		for nights := 1; first+nights <= len(s.Nights); nights++ {
			engine := flashsale.CheckStay(s.StayRules(), first, nights)
			guest := s.CheckStayRules(first, nights)
			if flashsale.ErrorCode(engine) != flashsale.ErrorCode(guest) {
				t.Errorf("stay %d+%d: CheckStay = %v, CheckStayRules = %v", first, nights, engine, guest)
			}
			if code, ok := want[[2]int{first, nights}]; ok && flashsale.ErrorCode(guest) != code {
				t.Errorf("stay %d+%d = %v, want code %q", first, nights, guest, code)
			}
			if guest != nil {
				var se *flashsale.StayError
				errors.As(engine, &se)
				date := s.Nights[se.Night].Date
				if msg := flashsale.ErrorMessage(guest); !strings.Contains(msg, date) || !strings.HasPrefix(msg, flashsale.ErrorCode(guest)+": ") {
					t.Errorf("stay %d+%d: message %q must start with its rule and name %s", first, nights, msg, date)
				}
				if got := s.StayRefusal(engine); flashsale.ErrorMessage(got) != flashsale.ErrorMessage(guest) {
					t.Errorf("StayRefusal(%v) = %v, want %v", engine, got, guest)
				}
			}
		}
	}
	if flashsale.CheckStay(nil, 0, 1) != nil || fixture.Sale(fixture.Stock(1)).StayRules() != nil {
		t.Error("a sale without rules must have nil rules and allow every stay")
	}
}

// TestStayRulesValidate: rules no stay could meet are refused as
// mistakes, naming the night.
func TestStayRulesValidate(t *testing.T) {
	for name, c := range map[string]struct {
		set  func(s *flashsale.Sale)
		want string
	}{
		"min_stay negative":      {func(s *flashsale.Sale) { s.Nights[0].MinStay = -1 }, "nights[0].min_stay"},
		"min_stay too long":      {func(s *flashsale.Sale) { s.Nights[0].MinStay = flashsale.MaxNights + 1 }, "nights[0].min_stay"},
		"max_stay negative":      {func(s *flashsale.Sale) { s.Nights[1].MaxStay = -2 }, "nights[1].max_stay"},
		"max below min":          {func(s *flashsale.Sale) { s.Nights[1].MinStay, s.Nights[1].MaxStay = 3, 2 }, "below its min_stay"},
		"departure on the first": {func(s *flashsale.Sale) { s.Nights[0].ClosedToDeparture = true }, "nights[0].closed_to_departure"},
		"departure after a gap": {func(s *flashsale.Sale) {
			s.Nights = append(s.Nights[:1], s.Nights[2])
			s.Nights[1].ClosedToDeparture = true
		}, "nights[1].closed_to_departure"},
	} {
		t.Run(name, func(t *testing.T) {
			s := fixture.Sale(fixture.Stock(5, 5, 5))
			c.set(s)
			if err := s.Validate(); flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want invalid_request naming %q", err, c.want)
			}
		})
	}
}
