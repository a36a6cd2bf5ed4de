package flashsale

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// StayRules are a night's restrictions as channel managers and the OTA
// standard (OTA_HotelAvailNotifRQ's RestrictionStatus and LengthsOfStay)
// carry them per room type and date. A stay is sold only if every rule of
// every night it touches allows it, judged inside the stock engine's one
// atomic reserve step (CheckStay), so no race sells a stay a night forbids.
//
// The length-of-stay rules are arrival-based, as OTA's SetMinLOS and
// SetMaxLOS are by default: they bind the stays that arrive on the night.
type StayRules struct {
	// MinStay and MaxStay bound the nights of a stay arriving on this
	// night; 0 is no bound.
	MinStay int `json:"min_stay,omitempty"`
	MaxStay int `json:"max_stay,omitempty"`
	// ClosedToArrival: no stay may arrive on this night (it may still run
	// through it).
	ClosedToArrival bool `json:"closed_to_arrival,omitempty"`
	// ClosedToDeparture: no stay may depart on this night's date, that is
	// end with the night before it. The day after a sale's last night is
	// not one of its nights; to close it, add it as a night with no stock.
	ClosedToDeparture bool `json:"closed_to_departure,omitempty"`
	// StopSell closes the night: no stay including it is sold until it is
	// reopened. Rooms already held or sold stay with their guests.
	StopSell bool `json:"stop_sell,omitempty"`
}

// Set reports whether any rule is set.
func (r StayRules) Set() bool { return r != StayRules{} }

// The stay rules' error codes (409), one per rule, so a client can tell
// "choose another stay" from "sold out". The message names the night.
const (
	EMinStay           = "min_stay"
	EMaxStay           = "max_stay"
	EClosedToArrival   = "closed_to_arrival"
	EClosedToDeparture = "closed_to_departure"
	EStopSell          = "stop_sell"
)

// Sentinels of the stay rules, without a night: what StayError unwraps to,
// so ErrorCode and errors.Is see the rule wherever the error travels.
var (
	ErrMinStay           = &Error{EMinStay, "min_stay: the stay is shorter than its arrival night allows"}
	ErrMaxStay           = &Error{EMaxStay, "max_stay: the stay is longer than its arrival night allows"}
	ErrClosedToArrival   = &Error{EClosedToArrival, "closed_to_arrival: no stay may arrive on this night"}
	ErrClosedToDeparture = &Error{EClosedToDeparture, "closed_to_departure: no stay may depart on this day"}
	ErrStopSell          = &Error{EStopSell, "stop_sell: a night of this stay is closed"}
)

// StayError is a stock engine's refusal of a stay by a night's rule:
// Rule is the rule's sentinel, Night the index of the night it names (the
// stay's first for the arrival rules, the night it departs on for
// closed_to_departure, the closed night for stop_sell). An engine knows
// nights by index; Sale.StayRefusal names the date for the guest.
type StayError struct {
	Rule  *Error
	Night int
}

func (e *StayError) Error() string { return fmt.Sprintf("%s (night %d)", e.Rule.Error(), e.Night) }
func (e *StayError) Unwrap() error { return e.Rule }

// CheckStay judges the stay of nights nights from night first against
// rules (one per night of the sale, indexed alike; nil: none), returning
// the *StayError of the first rule it breaks, nil when every rule allows
// it. The order: a closed night, then the arrival night's rules, then
// the departure. The caller has checked that the stay lies within the
// sale. It allocates only to refuse.
func CheckStay(rules []StayRules, first, nights int) error {
	if len(rules) == 0 {
		return nil
	}
	return checkStay(len(rules), func(i int) *StayRules { return &rules[i] }, first, nights)
}

// CheckStayRules is CheckStay on the sale's own rules, with the refusal
// naming the night's date (StayRefusal).
func (s *Sale) CheckStayRules(first, nights int) error {
	return s.StayRefusal(checkStay(len(s.Nights), func(i int) *StayRules { return &s.Nights[i].StayRules }, first, nights))
}

func checkStay(n int, rule func(int) *StayRules, first, nights int) error {
	if first < 0 || first >= n {
		return nil
	}
	for i := first; i < first+nights && i < n; i++ {
		if rule(i).StopSell {
			return &StayError{ErrStopSell, i}
		}
	}
	switch a := rule(first); {
	case a.ClosedToArrival:
		return &StayError{ErrClosedToArrival, first}
	case a.MinStay > 0 && nights < a.MinStay:
		return &StayError{ErrMinStay, first}
	case a.MaxStay > 0 && nights > a.MaxStay:
		return &StayError{ErrMaxStay, first}
	}
	if d := first + nights; d < n && rule(d).ClosedToDeparture {
		return &StayError{ErrClosedToDeparture, d}
	}
	return nil
}

// StayRules returns the rules of each night, indexed as Nights, or nil
// when no night has one (the engines then skip the check).
func (s *Sale) StayRules() []StayRules {
	var rules []StayRules
	for i, n := range s.Nights {
		if !n.StayRules.Set() {
			continue
		}
		if rules == nil {
			rules = make([]StayRules, len(s.Nights))
		}
		rules[i] = n.StayRules
	}
	return rules
}

// StayRefusal turns an engine's *StayError into the guest's error, naming
// the rule and the night's date; any other error (nil included) is
// returned as it is.
func (s *Sale) StayRefusal(err error) error {
	if err == nil {
		return nil // the purchase path's common answer, without errors.As's allocation
	}
	var se *StayError
	if !errors.As(err, &se) {
		return err
	}
	if se.Night < 0 || se.Night >= len(s.Nights) {
		return se.Rule
	}
	n := s.Nights[se.Night]
	switch se.Rule {
	case ErrStopSell:
		return Errorf(EStopSell, "stop_sell: the night of %s is closed to sale; choose a stay without it", n.Date)
	case ErrClosedToArrival:
		return Errorf(EClosedToArrival, "closed_to_arrival: no stay may arrive on %s; choose another check-in", n.Date)
	case ErrMinStay:
		return Errorf(EMinStay, "min_stay: a stay arriving on %s must be at least %d nights", n.Date, n.MinStay)
	case ErrMaxStay:
		return Errorf(EMaxStay, "max_stay: a stay arriving on %s may be at most %d nights", n.Date, n.MaxStay)
	case ErrClosedToDeparture:
		return Errorf(EClosedToDeparture, "closed_to_departure: no stay may depart on %s; choose another number of nights", n.Date)
	}
	return se.Rule
}

// validateStayRules checks each night's rules. A rule no stay could ever
// meet is refused as the mistake it is: a max_stay below the min_stay, or
// a closed_to_departure on a night whose eve is not a night of the sale
// (no stay of the sale departs on it).
func (s *Sale) validateStayRules() error {
	for i, n := range s.Nights {
		r := n.StayRules
		switch {
		case r.MinStay < 0 || r.MinStay > MaxNights:
			return Errorf(EInvalid, "nights[%d].min_stay must be between 0 (none) and %d", i, MaxNights)
		case r.MaxStay < 0 || r.MaxStay > MaxNights:
			return Errorf(EInvalid, "nights[%d].max_stay must be between 0 (none) and %d", i, MaxNights)
		case r.MaxStay > 0 && r.MaxStay < r.MinStay:
			return Errorf(EInvalid, "nights[%d].max_stay (%d) is below its min_stay (%d): no stay could arrive on %s", i, r.MaxStay, r.MinStay, n.Date)
		case r.ClosedToDeparture && (i == 0 || !dayAfter(s.Nights[i-1].Date, n.Date)):
			return Errorf(EInvalid, "nights[%d].closed_to_departure can never apply: the night before %s is not a night of this sale, so no stay departs on it", i, n.Date)
		}
	}
	return nil
}

// dayAfter reports whether date b is the day after date a.
func dayAfter(a, b string) bool {
	d, err := time.Parse(DateLayout, a)
	return err == nil && d.AddDate(0, 0, 1).Format(DateLayout) == b
}

// StayRulesPatch is an operator's change of one night's rules: nil fields
// stay as they are, so {"stop_sell": true} closes the night and keeps its
// other rules.
type StayRulesPatch struct {
	MinStay           *int  `json:"min_stay"`
	MaxStay           *int  `json:"max_stay"`
	ClosedToArrival   *bool `json:"closed_to_arrival"`
	ClosedToDeparture *bool `json:"closed_to_departure"`
	StopSell          *bool `json:"stop_sell"`
}

// Apply returns r with p's fields set.
func (p StayRulesPatch) Apply(r StayRules) StayRules {
	patch(&r.MinStay, p.MinStay)
	patch(&r.MaxStay, p.MaxStay)
	patch(&r.ClosedToArrival, p.ClosedToArrival)
	patch(&r.ClosedToDeparture, p.ClosedToDeparture)
	patch(&r.StopSell, p.StopSell)
	return r
}

// String is the rules as the change log records them: "min_stay=2
// stop_sell", or "none".
func (r StayRules) String() string {
	var parts []string
	if r.MinStay > 0 {
		parts = append(parts, fmt.Sprintf("min_stay=%d", r.MinStay))
	}
	if r.MaxStay > 0 {
		parts = append(parts, fmt.Sprintf("max_stay=%d", r.MaxStay))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{r.ClosedToArrival, EClosedToArrival}, {r.ClosedToDeparture, EClosedToDeparture}, {r.StopSell, EStopSell}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
