package flashsale_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
)

func validSale() *flashsale.Sale {
	t := testenv.NightTime(0).Add(20 * time.Hour)
	return fixture.Sale(fixture.Window(t, t.Add(time.Hour)), fixture.Token())
}

func rate(r flashsale.Rate) *flashsale.Rate { return &r }

// badSale is a change to validSale that Validate must refuse, naming field.
type badSale struct {
	field string
	mod   func(*flashsale.Sale)
}

// checkSales validates validSale after each change: good ones pass, bad
// ones fail as invalid with their field named.
func checkSales(t *testing.T, good []func(*flashsale.Sale), bad []badSale) {
	t.Helper()
	for i, mod := range good {
		s := validSale()
		mod(s)
		if err := s.Validate(); err != nil {
			t.Errorf("good %d: %v", i, err)
		}
	}
	for _, tt := range bad {
		s := validSale()
		tt.mod(s)
		err := s.Validate()
		if flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(flashsale.ErrorMessage(err), tt.field) {
			t.Errorf("%s: err = %v, want invalid naming %s", tt.field, err, tt.field)
		}
	}
}

// TestValidateRules: the eligibility rules and limit overrides a sale may
// carry, and the bad ones each named in the error.
func TestValidateRules(t *testing.T) {
	good := []func(*flashsale.Sale){
		func(s *flashsale.Sale) {},
		func(s *flashsale.Sale) {
			s.Eligibility = flashsale.Eligibility{MinTier: flashsale.TierGold, MinStays30d: 30, Channels: []string{"ota-x", "trip.com", "a_b"}}
		},
		func(s *flashsale.Sale) {
			s.Limits = flashsale.SaleLimits{PerSale: rate(flashsale.PerSecond(300, 600)), PerUser: rate(flashsale.Rate{N: 5, Per: time.Minute, Burst: 1}), PerIP: rate(flashsale.Rate{})}
		},
	}
	bad := []badSale{
		{"min_tier", func(s *flashsale.Sale) { s.Eligibility.MinTier = "diamond" }},
		{"min_stays_30d", func(s *flashsale.Sale) { s.Eligibility.MinStays30d = -1 }},
		{"min_stays_30d", func(s *flashsale.Sale) { s.Eligibility.MinStays30d = 31 }},
		{"channels", func(s *flashsale.Sale) { s.Eligibility.Channels = make([]string, 17) }},
		{"channels[0]", func(s *flashsale.Sale) { s.Eligibility.Channels = []string{""} }},
		{"channels[1]", func(s *flashsale.Sale) { s.Eligibility.Channels = []string{"a", "B"} }},
		{"channels[0]", func(s *flashsale.Sale) { s.Eligibility.Channels = []string{"a,b"} }},
		{"channels[0]", func(s *flashsale.Sale) { s.Eligibility.Channels = []string{strings.Repeat("c", 65)} }},
		{"channels[1]", func(s *flashsale.Sale) { s.Eligibility.Channels = []string{"a", "a"} }},
		{"limits.per_sale", func(s *flashsale.Sale) { s.Limits.PerSale = rate(flashsale.Rate{N: 1, Per: 2 * time.Second, Burst: 1}) }},
		{"limits.per_user", func(s *flashsale.Sale) { s.Limits.PerUser = rate(flashsale.Rate{N: 1, Per: time.Second}) }},
		{"limits.per_ip", func(s *flashsale.Sale) { s.Limits.PerIP = rate(flashsale.Rate{N: -1, Per: time.Second, Burst: 1}) }},
		{"limits.per_ip", func(s *flashsale.Sale) { s.Limits.PerIP = rate(flashsale.PerSecond(flashsale.MaxRate+1, 1)) }},
	}
	checkSales(t, good, bad)
}

// TestValidateTerms (issue 23, item 2): impossible sale terms that were
// accepted and sold, each refused with an error naming its field; and
// what must stay accepted.
func TestValidateTerms(t *testing.T) {
	good := []func(*flashsale.Sale){
		func(s *flashsale.Sale) { s.OriginalPrice = s.Price }, // no discount shown, but not a lie
		func(s *flashsale.Sale) { s.Description = "Sea view.\nBreakfast for two.\tLate checkout." },
		func(s *flashsale.Sale) { s.Title = "圣诞特惠 · Ünïcode ok ✓" },
		func(s *flashsale.Sale) { s.Title = "عرض الفندق" }, // right-to-left text needs no override
	}
	bad := []badSale{
		{"price", func(s *flashsale.Sale) { s.Price = 0 }},
		{"price", func(s *flashsale.Sale) { s.Price = -1 }},
		{"original_price", func(s *flashsale.Sale) { s.OriginalPrice = 0 }}, // left out of the JSON
		{"original_price", func(s *flashsale.Sale) { s.OriginalPrice = s.Price - 1 }},
		{"title", func(s *flashsale.Sale) { s.Title = "Flash\x00sale" }},
		{"title", func(s *flashsale.Sale) { s.Title = "Flash\r\nSet-Cookie: x" }},
		{"title", func(s *flashsale.Sale) { s.Title = "Flash \x1b[31mred" }},
		{"title", func(s *flashsale.Sale) { s.Title = "Deal \u202Egnp.exe" }},
		{"title", func(s *flashsale.Sale) { s.Title = "Deal \u2066x\u2069" }},
		{"title", func(s *flashsale.Sale) { s.Title = "bad \xff utf-8" }},
		{"hotel", func(s *flashsale.Sale) { s.Hotel = "Harbour\nView" }},
		{"room_type", func(s *flashsale.Sale) { s.RoomType = "King\u202D" }},
		{"description", func(s *flashsale.Sale) { s.Description = "ok\x07" }},
		{"nights[0].date", func(s *flashsale.Sale) { s.Nights[0].Date = "0000-01-01" }},
		{"nights[0].date", func(s *flashsale.Sale) { s.Nights[0].Date = "9999-12-31" }},
		{"starts_at", func(s *flashsale.Sale) { s.StartsAt = time.Unix(0, 0) }},
		{"ends_at", func(s *flashsale.Sale) { s.EndsAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"price_tiers[0].price", func(s *flashsale.Sale) {
			s.PerUserLimit = 2
			s.PriceTiers = []flashsale.PriceTier{{Rooms: 2, Price: 0}}
		}},
	}
	checkSales(t, good, bad)
}

// TestValidateTermsOnEdit: an edit is held to the same terms (issue 23:
// an edit raising the price above original_price was 200).
func TestValidateTermsOnEdit(t *testing.T) {
	sale := validSale()
	before := sale.StartsAt.Add(-time.Hour) // not started: every field may change
	price, title := int64(79900), "Flash \u202Eelas"
	for name, p := range map[string]*flashsale.SalePatch{
		"original_price": {Price: &price},
		"title":          {Title: &title},
	} {
		if _, _, err := p.Apply(sale, before); flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(flashsale.ErrorMessage(err), name) {
			t.Errorf("edit breaking %s: %v", name, err)
		}
	}
}

// TestValidateWaitingRoom (issue 24, item 1): a waiting room's bounds,
// each bad value refused naming its field path, and the edges accepted.
func TestValidateWaitingRoom(t *testing.T) {
	room := func(prequeue int, rate float64, admission int) func(*flashsale.Sale) {
		return func(s *flashsale.Sale) {
			s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: prequeue, AdmitPerSecond: rate, AdmissionSeconds: admission}
		}
	}
	good := []func(*flashsale.Sale){
		func(s *flashsale.Sale) { s.WaitingRoom = nil },
		room(0, 0, 10),                    // no prequeue, the derived rate, the shortest admission
		room(1440, 0.1, 3600),             // a day's prequeue, the slowest rate, the longest admission
		room(30, 100_000, 60),             // the fastest rate
		room(15, 2.5, 120),                // a fractional rate
		room(0, math.Copysign(0, -1), 10), // -0 is 0
	}
	bad := []badSale{
		{"waiting_room.prequeue_minutes", room(-1, 0, 60)},
		{"waiting_room.prequeue_minutes", room(1441, 0, 60)},
		{"waiting_room.admit_per_second", room(0, 0.09, 60)},
		{"waiting_room.admit_per_second", room(0, -1, 60)},
		{"waiting_room.admit_per_second", room(0, 100_000.5, 60)},
		{"waiting_room.admit_per_second", room(0, math.NaN(), 60)},
		{"waiting_room.admit_per_second", room(0, math.Inf(1), 60)},
		{"waiting_room.admit_per_second", room(0, math.Inf(-1), 60)},
		{"waiting_room.admission_seconds is required", room(0, 0, 0)},
		{"waiting_room.admission_seconds", room(0, 0, 9)},
		{"waiting_room.admission_seconds", room(0, 0, -10)},
		{"waiting_room.admission_seconds", room(0, 0, 3601)},
	}
	checkSales(t, good, bad)
}

// TestWaitingRoomEdit: an edit sets, changes or (with a pointer to nil,
// JSON null) turns off the waiting room before the start; an absent one
// changes nothing; after the start only its pace (admit_per_second,
// admission_seconds) may change, anything else is already_started; a bad
// room changes nothing. The edited sale never shares the patch's room.
func TestWaitingRoomEdit(t *testing.T) {
	on := &flashsale.WaitingRoom{PrequeueMinutes: 30, AdmitPerSecond: 5, AdmissionSeconds: 60}
	other := &flashsale.WaitingRoom{PrequeueMinutes: 10, AdmissionSeconds: 120}
	pace := &flashsale.WaitingRoom{PrequeueMinutes: 30, AdmitPerSecond: 50, AdmissionSeconds: 20}
	set := func(w *flashsale.WaitingRoom) **flashsale.WaitingRoom { return &w }
	for _, c := range []struct {
		name    string
		from    *flashsale.WaitingRoom
		patch   **flashsale.WaitingRoom
		want    *flashsale.WaitingRoom
		changed bool
		live    bool // the change may be made after the start
	}{
		{"Pace", on, set(pace), pace, true, true},
		{"SetOn", nil, set(on), on, true, false},
		{"Change", on, set(other), other, true, false},
		{"Off", on, set(nil), nil, true, false},
		{"Absent", on, nil, on, false, false},
		{"AbsentWhenOff", nil, nil, nil, false, false},
		{"OffWhenOff", nil, set(nil), nil, false, false},
		{"Same", on, set(new(*on)), on, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sale := validSale()
			sale.WaitingRoom = c.from
			title := "Renamed"
			p := flashsale.SalePatch{Title: &title, WaitingRoom: c.patch}
			got, changed, err := p.Apply(sale, sale.StartsAt.Add(-time.Hour))
			if err != nil {
				t.Fatalf("Apply before the start: %v", err)
			}
			if (got.WaitingRoom == nil) != (c.want == nil) || got.WaitingRoom != nil && *got.WaitingRoom != *c.want {
				t.Errorf("waiting room %+v, want %+v", got.WaitingRoom, c.want)
			}
			if got, want := slices.Contains(changed, "waiting_room"), c.changed; got != want {
				t.Errorf("changed = %v: waiting_room named %v, want %v", changed, got, want)
			}
			if c.patch != nil && *c.patch != nil && got.WaitingRoom == *c.patch {
				t.Error("the sale shares the patch's waiting room")
			}
			if sale.WaitingRoom != c.from {
				t.Error("Apply changed the sale it was given")
			}
			// Once started, only a patch that changes nothing, or the pace, passes.
			after, _, err := p.Apply(sale, sale.StartsAt.Add(time.Second))
			switch {
			case c.live && (err != nil || *after.WaitingRoom != *c.want):
				t.Errorf("Apply of a new pace after the start = %v, room %+v; want it applied", err, after)
			case c.changed && !c.live && (flashsale.ErrorCode(err) != flashsale.EAlreadyStarted || !strings.Contains(flashsale.ErrorMessage(err), "waiting_room")):
				t.Errorf("Apply after the start = %v, want already_started naming waiting_room", err)
			case !c.changed && err != nil:
				t.Errorf("Apply after the start of no waiting-room change = %v", err)
			}
		})
	}
	t.Run("Invalid", func(t *testing.T) {
		sale := validSale()
		sale.WaitingRoom = on
		p := flashsale.SalePatch{WaitingRoom: set(&flashsale.WaitingRoom{PrequeueMinutes: 30})}
		if _, _, err := p.Apply(sale, sale.StartsAt.Add(-time.Hour)); flashsale.ErrorCode(err) != flashsale.EInvalid ||
			!strings.Contains(flashsale.ErrorMessage(err), "waiting_room.admission_seconds is required") {
			t.Errorf("Apply of a room without admission_seconds = %v", err)
		}
		if *sale.WaitingRoom != *on {
			t.Errorf("a refused edit changed the sale's room: %+v", sale.WaitingRoom)
		}
	})
}

func TestCheck(t *testing.T) {
	e := flashsale.Eligibility{MinTier: flashsale.TierSilver, MinStays30d: 2, Channels: []string{"ota-x", "ota-y"}}
	if got, want := e.Needs(), flashsale.FactTier|flashsale.FactStays30d|flashsale.FactChannel; got != want {
		t.Errorf("Needs = %b, want %b", got, want)
	}
	if got := (&flashsale.Eligibility{}).Needs(); got != 0 {
		t.Errorf("no rules: Needs = %b, want none", got)
	}
	for _, tt := range []struct {
		u    flashsale.User
		want error
	}{
		{flashsale.User{Tier: flashsale.TierSilver, Stays30d: 2, Channel: "ota-y"}, nil},
		{flashsale.User{Tier: flashsale.TierPlatinum, Stays30d: 30, Channel: "ota-x"}, nil},
		{flashsale.User{Tier: flashsale.TierBasic, Stays30d: 2, Channel: "ota-x"}, flashsale.ErrNotEligible},
		{flashsale.User{Tier: "", Stays30d: 2, Channel: "ota-x"}, flashsale.ErrNotEligible},
		{flashsale.User{Tier: "diamond", Stays30d: 2, Channel: "ota-x"}, flashsale.ErrNotEligible},
		{flashsale.User{Tier: flashsale.TierGold, Stays30d: 1, Channel: "ota-x"}, flashsale.ErrNotEligibleStays},
		{flashsale.User{Tier: flashsale.TierGold, Stays30d: 2, Channel: ""}, flashsale.ErrNotEligibleChannel},
		{flashsale.User{Tier: flashsale.TierGold, Stays30d: 2, Channel: "OTA-X"}, flashsale.ErrNotEligibleChannel},
	} {
		if got := e.Check(tt.u); got != tt.want {
			t.Errorf("Check(%+v) = %v, want %v", tt.u, got, tt.want)
		}
	}
	if err := (&flashsale.Eligibility{}).Check(flashsale.User{}); err != nil {
		t.Errorf("no rules: %v", err)
	}
}

func TestParseRate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want flashsale.Rate
	}{
		{"off", flashsale.Rate{}},
		{"20/s", flashsale.PerSecond(20, 20)},
		{"20/s,40", flashsale.PerSecond(20, 40)},
		{"5/m,1", flashsale.Rate{N: 5, Per: time.Minute, Burst: 1}},
		{"1000000/h", flashsale.Rate{N: 1_000_000, Per: time.Hour, Burst: 1_000_000}},
	} {
		got, err := flashsale.ParseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		// What String writes, ParseRate reads back: stores keep rates so.
		if back, err := flashsale.ParseRate(got.String()); err != nil || back != got {
			t.Errorf("ParseRate(%q.String()) = %+v, %v", tt.in, back, err)
		}
	}
	for _, in := range []string{"", "Off", "20", "20/d", "0/s", "-1/s", "20/s,", "20/s,0", "20/s,x", "x/s", "1000001/s", "1/s,1000001", " 20/s"} {
		if r, err := flashsale.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %+v, want an error", in, r)
		}
	}
}

// TestPriceTiers: the price per room-night by the rooms bought, the
// schedule a token signs, and the bad tiers each named in the error.
func TestPriceTiers(t *testing.T) {
	s := validSale()
	s.PerUserLimit = 4
	if got := s.PriceSchedule(); got != s.Price {
		t.Errorf("PriceSchedule without tiers = %d, want the price %d (tokens from before tiers stay valid)", got, s.Price)
	}
	s.PriceTiers = []flashsale.PriceTier{{Rooms: 2, Price: 34900}, {Rooms: 4, Price: 29900}}
	for rooms, want := range map[int]int64{1: 39900, 2: 34900, 3: 34900, 4: 29900} {
		if got := s.UnitPrice(rooms); got != want {
			t.Errorf("UnitPrice(%d) = %d, want %d", rooms, got, want)
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	sched := s.PriceSchedule()
	if sched >= 0 || sched == s.Price {
		t.Errorf("PriceSchedule with tiers = %d: want a digest apart from every price", sched)
	}
	for name, mod := range map[string]func(*flashsale.Sale){
		"price":      func(c *flashsale.Sale) { c.Price++ },
		"tier rooms": func(c *flashsale.Sale) { c.PriceTiers[0].Rooms = 3 },
		"tier price": func(c *flashsale.Sale) { c.PriceTiers[1].Price-- },
		"no tier":    func(c *flashsale.Sale) { c.PriceTiers = c.PriceTiers[:1] },
	} {
		c := *s
		c.PriceTiers = slices.Clone(s.PriceTiers)
		mod(&c)
		if c.PriceSchedule() == sched {
			t.Errorf("%s changed, the schedule did not: a token would buy at the old one", name)
		}
	}
	bad := []struct {
		field string
		tiers []flashsale.PriceTier
	}{
		{"price_tiers[0].rooms", []flashsale.PriceTier{{Rooms: 1, Price: 100}}},
		{"price_tiers[0].rooms", []flashsale.PriceTier{{Rooms: 5, Price: 100}}}, // above per_user_limit
		{"price_tiers[1].rooms", []flashsale.PriceTier{{Rooms: 3, Price: 300}, {Rooms: 3, Price: 200}}},
		{"price_tiers[1].rooms", []flashsale.PriceTier{{Rooms: 3, Price: 300}, {Rooms: 2, Price: 200}}},
		{"price_tiers[0].price", []flashsale.PriceTier{{Rooms: 2, Price: 39900}}}, // not below the price
		{"price_tiers[0].price", []flashsale.PriceTier{{Rooms: 2, Price: -1}}},
		{"price_tiers[1].price", []flashsale.PriceTier{{Rooms: 2, Price: 300}, {Rooms: 3, Price: 300}}},
		{"price_tiers", make([]flashsale.PriceTier, 11)},
	}
	for _, tt := range bad {
		c := *s
		c.PriceTiers = tt.tiers
		err := c.Validate()
		if flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(flashsale.ErrorMessage(err), tt.field) {
			t.Errorf("%v: err = %v, want invalid naming %s", tt.tiers, err, tt.field)
		}
	}
}

// TestStay: a stay is consecutive nights all on sale, starting on one of
// them; the index of its first night, or an invalid-request error.
func TestStay(t *testing.T) {
	s := validSale()
	s.Nights = []flashsale.Night{{Date: testenv.Night(0)}, {Date: testenv.Night(1)}, {Date: testenv.Night(3)}, {Date: testenv.Night(4)}}
	for _, c := range []struct {
		checkIn string
		nights  int
		first   int // -1: refused
	}{
		{testenv.Night(0), 1, 0},
		{testenv.Night(1), 1, 1},
		{testenv.Night(4), 1, 3},
		{testenv.Night(0), 2, 0},
		{testenv.Night(3), 2, 2},
		{testenv.Night(1), 2, -1}, // night 2 is not on sale
		{testenv.Night(0), 3, -1},
		{testenv.Night(4), 2, -1}, // past the last night
		{testenv.Night(2), 1, -1}, // not a night of the sale
		{testenv.Night(0), 0, -1},
		{testenv.Night(0), 5, -1},
		{testenv.NightTime(0).Format("02.01.2006"), 1, -1},
		{"", 1, -1},
	} {
		first, err := s.Stay(c.checkIn, c.nights)
		switch {
		case c.first < 0 && flashsale.ErrorCode(err) != flashsale.EInvalid:
			t.Errorf("Stay(%q, %d) = %d, %v; want an invalid-request error", c.checkIn, c.nights, first, err)
		case c.first >= 0 && (err != nil || first != c.first):
			t.Errorf("Stay(%q, %d) = %d, %v; want %d", c.checkIn, c.nights, first, err, c.first)
		}
	}
}
