package flashsale

import (
	"strings"
	"time"
)

// Kind is what a sale sells. Every kind is one representation in the
// stock engine: units (Sale.Nights) each with a capacity, a purchase
// taking an all-or-nothing set of them. The kinds differ in how a
// request names its units and in their rules, never in how stock is
// taken.
type Kind string

// The kinds of sale.
const (
	// KindStay sells consecutive nights of a room type, all or nothing
	// (the default, also read from ""). A unit is a night, its capacity
	// the rooms; a purchase takes rooms of each night of the stay.
	KindStay Kind = "stay"
	// KindSlot sells time slots of a day in the venue's zone: a
	// restaurant's services, a spa's appointment times. A unit is a slot,
	// its capacity the covers or therapists; a purchase takes a quantity
	// of exactly one slot.
	KindSlot Kind = "slot"
	// KindSeats sells seats on departures (an airport shuttle at 09:00,
	// 09:30, ...). A departure is one unit per vehicle, consecutive and
	// of one date and time, each unit's capacity that vehicle's seats; a
	// purchase takes its seats from one vehicle of its departure (the
	// engine picks the first with room: Reservation.Choices), so a group
	// is never split. A departure whose groups may split is one unit of
	// all its seats.
	KindSeats Kind = "seats"
)

// Timed reports whether the sale's units are timed (slots, departures):
// a start in the venue's zone rather than a night.
func (s *Sale) Timed() bool { k := s.KindOf(); return k == KindSlot || k == KindSeats }

// KindOf is the sale's kind, KindStay for a sale that names none (every
// sale created before kinds).
func (s *Sale) KindOf() Kind {
	if s.Kind == "" {
		return KindStay
	}
	return s.Kind
}

// Bounds of a slot.
const (
	// MaxSlotMinutes is a day: a slot longer is not a slot.
	MaxSlotMinutes = 24 * 60
	// SlotLayout is how a purchase names a slot: its date and start in
	// the venue's zone, "2026-12-24T19:00".
	SlotLayout = "2006-01-02T15:04"
)

// validateSlots checks a slot or seats sale's units: a venue's zone, each
// a start that exists on its date there (not in a daylight-saving gap, not
// in the hour a fall-back repeats: "01:30" would name two moments), in
// increasing order of start, and no stay rules. A slot's start does not
// repeat; a departure's vehicles share theirs, one after another.
func (s *Sale) validateSlots() error {
	if s.TimeZone == "" {
		return Errorf(EInvalid, "time_zone is required for a %s sale: a slot at 19:00 is 19:00 where the venue is (an IANA name such as Europe/Paris)", s.KindOf())
	}
	seats := s.KindOf() == KindSeats
	var prev time.Time
	for i, n := range s.Nights {
		start, err := s.SlotStart(i)
		if err != nil {
			return err
		}
		switch {
		case !saneTime(start):
			return Errorf(EInvalid, "nights[%d].date must be in the years %d to %d", i, minYear, maxYear)
		case i > 0 && seats && start.Before(prev):
			return Errorf(EInvalid, "departures must be in increasing order of start, a departure's vehicles one after another: nights[%d] (%s %s) is before the one before", i, n.Date, n.Time)
		case i > 0 && !seats && !start.After(prev):
			return Errorf(EInvalid, "slots must be in increasing order of start without repeats: nights[%d] (%s %s) is not after the one before", i, n.Date, n.Time)
		case n.Minutes < 0 || n.Minutes > MaxSlotMinutes:
			return Errorf(EInvalid, "nights[%d].minutes must be between 0 (none) and %d", i, MaxSlotMinutes)
		case n.Stock < 0 || n.Stock > MaxStock:
			return Errorf(EInvalid, "nights[%d].stock must be between 0 and %d", i, MaxStock)
		case n.StayRules.Set():
			return Errorf(EInvalid, "nights[%d]: stay rules (min_stay, closed_to_arrival, ...) are a stay's; a slot sale has none", i)
		}
		prev = start
	}
	return nil
}

// SlotStart is the moment unit i of a slot sale starts: its date and time
// in the venue's zone. An error names a time that does not exist there
// that day, or exists twice, and a malformed one.
func (s *Sale) SlotStart(i int) (time.Time, error) {
	n := s.Nights[i]
	loc, err := s.Location()
	if err != nil || loc == nil {
		return time.Time{}, Errorf(EInvalid, "time_zone is required for a %s sale", s.KindOf())
	}
	t, err := time.ParseInLocation(SlotLayout, n.Date+"T"+n.Time, loc)
	if err != nil || len(n.Time) != len("15:04") {
		return time.Time{}, Errorf(EInvalid, "nights[%d] must have a date like 2026-12-24 and a time like 19:00", i)
	}
	if t.Format(SlotLayout) != n.Date+"T"+n.Time {
		return time.Time{}, Errorf(EInvalid, "nights[%d]: %s %s does not exist in %s (the clocks skip it that day)", i, n.Date, n.Time, s.TimeZone)
	}
	for _, d := range []time.Duration{-time.Hour, -30 * time.Minute, 30 * time.Minute, time.Hour} {
		// A fall-back repeats an hour (half an hour on Lord Howe): the
		// same wall clock a shift away names a second moment.
		if t.Add(d).Format(SlotLayout) == n.Date+"T"+n.Time {
			return time.Time{}, Errorf(EInvalid, "nights[%d]: %s %s happens twice in %s (the clocks go back that night); choose another time", i, n.Date, n.Time, s.TimeZone)
		}
	}
	return t, nil
}

// checkSlots refuses slots that have started at now, or start before the
// sale opens: no guest could book them.
func (s *Sale) checkSlots(now time.Time) error {
	for i, n := range s.Nights {
		start, err := s.SlotStart(i)
		if err != nil {
			return err
		}
		switch {
		case !start.After(now):
			return Errorf(EInvalid, "nights[%d]: the slot %s %s has started in %s", i, n.Date, n.Time, s.TimeZone)
		case start.Before(s.StartsAt):
			return Errorf(EInvalid, "nights[%d]: the slot %s %s starts before the sale opens (starts_at %s): no guest could book it",
				i, n.Date, n.Time, s.StartsAt.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// Departure resolves a seats sale's departure ("2026-12-24T09:00") to
// its first vehicle's unit and the number of its vehicles (the engine's
// choices), as Slot resolves a slot.
func (s *Sale) Departure(departure string, now time.Time) (first, vehicles int, err error) {
	first, err = s.Slot(departure, now)
	if err != nil {
		return 0, 0, err
	}
	vehicles = 1
	for i := first + 1; i < len(s.Nights) && s.Nights[i].Date == s.Nights[first].Date && s.Nights[i].Time == s.Nights[first].Time; i++ {
		vehicles++
	}
	return first, vehicles, nil
}

// Slot resolves a purchase's slot ("2026-12-24T19:00") to its unit's
// index: ErrInvalid-coded for a malformed one or one the sale does not
// sell, and for a slot that has started at now.
func (s *Sale) Slot(slot string, now time.Time) (int, error) {
	date, clock, ok := strings.Cut(slot, "T")
	if !ok || len(slot) != len(SlotLayout) {
		return 0, Errorf(EInvalid, "slot must be a date and a start like 2026-12-24T19:00")
	}
	for i, n := range s.Nights {
		if n.Date != date || n.Time != clock {
			continue
		}
		start, err := s.SlotStart(i)
		if err != nil {
			return 0, err
		}
		if !now.Before(start) {
			return 0, Errorf(EInvalid, "the slot %s has started; choose a later one", slot)
		}
		return i, nil
	}
	return 0, Errorf(EInvalid, "%s is not a slot of this sale", slot)
}

// SlotName is unit i's name as a purchase gives it, "2026-12-24T19:00".
func (s *Sale) SlotName(i int) string { return s.Nights[i].Date + "T" + s.Nights[i].Time }
