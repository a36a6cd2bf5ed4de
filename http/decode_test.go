package http

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// validSale is a complete, valid sale body.
var validSale = `{"title":"Flash","hotel":"Harbour View","room_type":"Deluxe King","time_zone":"Asia/Shanghai",
	"nights":[{"date":"` + testenv.Night(0) + `","stock":5},{"date":"` + testenv.Night(1) + `","stock":3}],
	"price":39900,"original_price":69900,"currency":"CNY",
	"starts_at":"2026-12-01T20:00:00+08:00","ends_at":"2026-12-01T21:00:00+08:00",
	"per_user_limit":2,"hold_seconds":60,"purchase_token":false,"eligibility":{"min_tier":"gold"},
	"waiting_room":{"prequeue_minutes":30,"admit_per_second":2.5,"admission_seconds":60}}`

func TestDecodeSale(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		s, err := decodeSale(strings.NewReader(validSale))
		if err != nil {
			t.Fatal(err)
		}
		cst := time.FixedZone("", 8*3600)
		want := fixture.Sale(fixture.Zone("Asia/Shanghai"), fixture.Stock(5, 3),
			fixture.Window(time.Date(2026, 12, 1, 20, 0, 0, 0, cst), time.Date(2026, 12, 1, 21, 0, 0, 0, cst)),
			fixture.Limit(2), fixture.Hold(60))
		want.Eligibility = flashsale.Eligibility{MinTier: flashsale.TierGold}
		want.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 30, AdmitPerSecond: 2.5, AdmissionSeconds: 60}
		if diff := cmp.Diff(want, s); diff != "" {
			t.Fatalf("sale (-want +got):\n%s", diff)
		}
	})
	t.Run("Defaults", func(t *testing.T) {
		s, err := decodeSale(strings.NewReader(`{"title":"T","hotel":"H","room_type":"R","nights":[{"date":"` + testenv.Night(0) + `","stock":1}],"price":100,"original_price":200,
			"currency":"CNY","starts_at":"2026-12-01T20:00:00Z","ends_at":"2026-12-01T21:00:00Z","per_user_limit":null}`))
		if err != nil {
			t.Fatal(err)
		}
		if s.PerUserLimit != flashsale.PerUserLimitDefault || s.HoldSeconds != flashsale.HoldSecondsDefault || !s.PurchaseToken {
			t.Fatalf("defaults not applied: limit %d hold %d token %v", s.PerUserLimit, s.HoldSeconds, s.PurchaseToken)
		}
		if s.WaitingRoom != nil {
			t.Fatalf("a waiting room %+v by default, want none", s.WaitingRoom)
		}
	})
	t.Run("WaitingRoom", func(t *testing.T) {
		for _, c := range []struct {
			name, room string
			want       *flashsale.WaitingRoom
		}{
			{"Null", `null`, nil},
			{"OnlyAdmission", `{"admission_seconds":10}`, &flashsale.WaitingRoom{AdmissionSeconds: 10}},
			{"Edges", `{"prequeue_minutes":1440,"admit_per_second":0.1,"admission_seconds":3600}`,
				&flashsale.WaitingRoom{PrequeueMinutes: 1440, AdmitPerSecond: 0.1, AdmissionSeconds: 3600}},
			{"IntegerRate", `{"admit_per_second":100000,"admission_seconds":60}`, &flashsale.WaitingRoom{AdmitPerSecond: 100_000, AdmissionSeconds: 60}},
		} {
			t.Run(c.name, func(t *testing.T) {
				body := strings.Replace(validSale, `{"prequeue_minutes":30,"admit_per_second":2.5,"admission_seconds":60}`, c.room, 1)
				s, err := decodeSale(strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(c.want, s.WaitingRoom); diff != "" {
					t.Errorf("waiting room (-want +got):\n%s", diff)
				}
			})
		}
	})

	replace := func(old, new string) string {
		if !strings.Contains(validSale, old) {
			t.Fatalf("validSale lacks %q", old)
		}
		return strings.Replace(validSale, old, new, 1)
	}
	tests := []struct {
		name, body, code, msg string
	}{
		{"Empty", ``, flashsale.EInvalid, "empty"},
		{"Whitespace", " \n\t", flashsale.EInvalid, "empty"},
		{"Null", `null`, flashsale.EInvalid, "JSON object"},
		{"Array", `[]`, flashsale.EInvalid, "JSON object"},
		{"String", `"sale"`, flashsale.EInvalid, "JSON object"},
		{"Malformed", `{"title":}`, flashsale.EInvalid, "malformed JSON"},
		{"Truncated", validSale[:40], flashsale.EInvalid, "ends before"},
		{"UnknownField", replace(`"title"`, `"titel":"x","title"`), flashsale.EInvalid, `unknown field "titel"`},
		{"UnknownNestedField", replace(`"min_tier"`, `"vip":true,"min_tier"`), flashsale.EInvalid, `unknown field "vip"`},
		{"UnknownNightField", replace(`"stock":5`, `"stock":5,"price":1`), flashsale.EInvalid, `unknown field "price" in nights[0]`},
		{"CaseVariant", replace(`"price"`, `"PRICE"`), flashsale.EInvalid, `unknown field "PRICE"`},
		{"CaseVariantNested", replace(`"min_tier"`, `"Min_Tier"`), flashsale.EInvalid, `unknown field "Min_Tier" in eligibility`},
		{"Duplicate", replace(`"price":39900`, `"price":39900,"price":1`), flashsale.EInvalid, `duplicate field "price"`},
		{"DuplicateNested", replace(`"stock":5`, `"stock":5,"stock":500`), flashsale.EInvalid, `duplicate field "stock"`},
		{"InvalidUTF8", replace(`Harbour View`, "Harbour \xff View"), flashsale.EInvalid, "malformed JSON"},
		{"WrongTypePrice", replace(`39900`, `"39900"`), flashsale.EInvalid, "price must be an integer"},
		{"FloatPrice", replace(`39900`, `399.5`), flashsale.EInvalid, "price"},
		{"HugeStock", replace(`"stock":5`, `"stock":1e100`), flashsale.EInvalid, "stock"},
		{"WrongTypeToken", replace(`"purchase_token":false`, `"purchase_token":"no"`), flashsale.EInvalid, "purchase_token must be a boolean"},
		{"WrongTypeNights", replace(`"nights":[`, `"nights":{"a":[`), flashsale.EInvalid, ""},
		{"Trailing", validSale + `{}`, flashsale.EInvalid, "after the JSON object"},
		{"TrailingGarbage", validSale + ` x`, flashsale.EInvalid, "after the JSON object"},
		{"BadStart", replace(`2026-12-01T20:00:00+08:00`, `tomorrow`), flashsale.EInvalid, "starts_at must be an RFC 3339"},
		{"NoEnd", replace(`"ends_at":"2026-12-01T21:00:00+08:00",`, ``), flashsale.EInvalid, "ends_at is required"},
		{"EndBeforeStart", replace(`2026-12-01T21:00:00+08:00`, `2026-12-01T19:00:00+08:00`), flashsale.EInvalid, "ends_at must be after"},
		{"NoTitle", replace(`"title":"Flash",`, ``), flashsale.EInvalid, "title"},
		{"NoNights", replace(`[{"date":"`+testenv.Night(0)+`","stock":5},{"date":"`+testenv.Night(1)+`","stock":3}]`, `[]`), flashsale.EInvalid, "nights"},
		{"NightsOutOfOrder", replace(testenv.Night(1), testenv.Night(-1)), flashsale.EInvalid, "increasing"},
		{"BadNightDate", replace(testenv.Night(1), `Dec 25`), flashsale.EInvalid, "nights[1].date"},
		{"NegativeStock", replace(`"stock":3`, `"stock":-3`), flashsale.EInvalid, "stock"},
		{"NegativePrice", replace(`39900`, `-1`), flashsale.EInvalid, "price"},
		{"Currency", replace(`CNY`, `yuan`), flashsale.EInvalid, "currency"},
		{"CurrencyNotISO", replace(`CNY`, `ZZZ`), flashsale.EInvalid, "ISO 4217"},
		{"CurrencyNoCurrency", replace(`CNY`, `XXX`), flashsale.EInvalid, "ISO 4217"},
		{"CurrencyLowerCase", replace(`CNY`, `cny`), flashsale.EInvalid, "ISO 4217"},
		{"TimeZoneUnknown", replace(`Asia/Shanghai`, `Mars/Olympus_Mons`), flashsale.EInvalid, "time_zone"},
		{"TimeZoneLocal", replace(`Asia/Shanghai`, `Local`), flashsale.EInvalid, "time_zone"},
		{"TimeZoneOffset", replace(`"Asia/Shanghai"`, `"+08:00"`), flashsale.EInvalid, "time_zone"},
		{"TimeZoneNotText", replace(`"Asia/Shanghai"`, `8`), flashsale.EInvalid, "time_zone"},
		{"LimitZero", replace(`"per_user_limit":2`, `"per_user_limit":0`), flashsale.EInvalid, "per_user_limit"},
		{"HoldZero", replace(`"hold_seconds":60`, `"hold_seconds":0`), flashsale.EInvalid, "hold_seconds"},
		{"BadTier", replace(`"gold"`, `"diamond"`), flashsale.EInvalid, "min_tier"},
		{"TooLarge", `{"title":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, flashsale.ETooLarge, ""},
		{"WaitingRoomEmpty", replace(`{"prequeue_minutes":30,"admit_per_second":2.5,"admission_seconds":60}`, `{}`), flashsale.EInvalid, "waiting_room.admission_seconds is required"},
		{"WaitingRoomNoAdmission", replace(`,"admission_seconds":60`, ``), flashsale.EInvalid, "waiting_room.admission_seconds is required"},
		{"WaitingRoomAdmissionZero", replace(`"admission_seconds":60`, `"admission_seconds":0`), flashsale.EInvalid, "waiting_room.admission_seconds is required"},
		{"WaitingRoomAdmissionShort", replace(`"admission_seconds":60`, `"admission_seconds":9`), flashsale.EInvalid, "waiting_room.admission_seconds must be between 10 and 3600"},
		{"WaitingRoomAdmissionLong", replace(`"admission_seconds":60`, `"admission_seconds":3601`), flashsale.EInvalid, "waiting_room.admission_seconds"},
		{"WaitingRoomAdmissionFloat", replace(`"admission_seconds":60`, `"admission_seconds":60.5`), flashsale.EInvalid, "waiting_room.admission_seconds must be an integer"},
		{"WaitingRoomPrequeueNegative", replace(`"prequeue_minutes":30`, `"prequeue_minutes":-1`), flashsale.EInvalid, "waiting_room.prequeue_minutes must be between 0 and 1440"},
		{"WaitingRoomPrequeueLong", replace(`"prequeue_minutes":30`, `"prequeue_minutes":1441`), flashsale.EInvalid, "waiting_room.prequeue_minutes"},
		{"WaitingRoomPrequeueHuge", replace(`"prequeue_minutes":30`, `"prequeue_minutes":1e30`), flashsale.EInvalid, "waiting_room.prequeue_minutes"},
		{"WaitingRoomRateSlow", replace(`"admit_per_second":2.5`, `"admit_per_second":0.09`), flashsale.EInvalid, "waiting_room.admit_per_second must be 0"},
		{"WaitingRoomRateNegative", replace(`"admit_per_second":2.5`, `"admit_per_second":-2.5`), flashsale.EInvalid, "waiting_room.admit_per_second"},
		{"WaitingRoomRateFast", replace(`"admit_per_second":2.5`, `"admit_per_second":100000.01`), flashsale.EInvalid, "waiting_room.admit_per_second"},
		{"WaitingRoomRateOverflow", replace(`"admit_per_second":2.5`, `"admit_per_second":1e999`), flashsale.EInvalid, "waiting_room.admit_per_second"},
		{"WaitingRoomRateNaN", replace(`"admit_per_second":2.5`, `"admit_per_second":"NaN"`), flashsale.EInvalid, "waiting_room.admit_per_second"},
		{"WaitingRoomRateNaNBare", replace(`"admit_per_second":2.5`, `"admit_per_second":NaN`), flashsale.EInvalid, "malformed JSON"},
		{"WaitingRoomRateInfinity", replace(`"admit_per_second":2.5`, `"admit_per_second":"Infinity"`), flashsale.EInvalid, "waiting_room.admit_per_second"},
		{"WaitingRoomUnknownField", replace(`"prequeue_minutes":30`, `"prequeue_minutes":30,"shuffle":true`), flashsale.EInvalid, `unknown field "shuffle" in waiting_room`},
		{"WaitingRoomCaseVariant", replace(`"prequeue_minutes"`, `"Prequeue_Minutes"`), flashsale.EInvalid, `unknown field "Prequeue_Minutes" in waiting_room`},
		{"WaitingRoomDuplicate", replace(`"admission_seconds":60`, `"admission_seconds":60,"admission_seconds":600`), flashsale.EInvalid, `duplicate field "admission_seconds"`},
		{"WaitingRoomNotObject", replace(`{"prequeue_minutes":30,"admit_per_second":2.5,"admission_seconds":60}`, `true`), flashsale.EInvalid, "waiting_room must be an object"},
		{"WaitingRoomArray", replace(`{"prequeue_minutes":30,"admit_per_second":2.5,"admission_seconds":60}`, `[60]`), flashsale.EInvalid, "waiting_room must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := decodeSale(strings.NewReader(tt.body))
			if err == nil {
				t.Fatalf("decoded %+v, want error %s", s, tt.code)
			}
			wantDecodeError(t, err, tt.code, tt.msg)
		})
	}
}

func TestDecodePurchase(t *testing.T) {
	ok := []struct {
		name, body string
		want       purchaseBody
	}{
		{"Empty", ``, purchaseBody{}},
		{"EmptyObject", `{}`, purchaseBody{}},
		{"Whitespace", " \r\n", purchaseBody{}},
		{"Nulls", `{"token":null,"check_in":null,"nights":null,"rooms":null}`, purchaseBody{}},
		{"All", `{"token":"abc","check_in":"` + testenv.Night(0) + `","nights":2,"rooms":3}`, purchaseBody{Token: "abc", CheckIn: testenv.Night(0), Nights: 2, Rooms: 3}},
		{"Max", `{"nights":366,"rooms":1000}`, purchaseBody{Nights: 366, Rooms: 1000}},
		{"TrailingWhitespace", "{\"rooms\":1}\n\n", purchaseBody{Rooms: 1}},
		{"Slot", `{"slot":"2031-06-11T19:00","quantity":4}`, purchaseBody{Slot: "2031-06-11T19:00", Rooms: 4}},
		{"Departure", `{"departure":"2031-06-11T09:30","seats":3}`, purchaseBody{Slot: "2031-06-11T09:30", Rooms: 3}},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodePurchase(strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}

	bad := []struct {
		name, body, code, msg string
	}{
		{"Null", `null`, flashsale.EInvalid, "JSON object"},
		{"SlotBad", `{"slot":"2031-06-11 19:00"}`, flashsale.EInvalid, "must be a date and a start"},
		{"SlotNoTime", `{"slot":"2031-06-11"}`, flashsale.EInvalid, "must be a date and a start"},
		{"SlotNumber", `{"slot":1900}`, flashsale.EInvalid, "slot"},
		{"QuantityAndRooms", `{"quantity":2,"rooms":2}`, flashsale.EInvalid, "give one of"},
		{"SeatsAndQuantity", `{"seats":2,"quantity":2}`, flashsale.EInvalid, "give one of"},
		{"SlotAndDeparture", `{"slot":"2031-06-11T09:30","departure":"2031-06-11T09:30"}`, flashsale.EInvalid, "not both"},
		{"DepartureBad", `{"departure":"09:30"}`, flashsale.EInvalid, "must be a date and a start"},
		{"SeatsZero", `{"seats":0}`, flashsale.EInvalid, "between"},
		{"QuantityZero", `{"quantity":0}`, flashsale.EInvalid, "must be between 1 and"},
		{"QuantityHuge", `{"quantity":1001}`, flashsale.EInvalid, "must be between 1 and"},
		{"Array", `[{"rooms":1}]`, flashsale.EInvalid, "JSON object"},
		{"Number", `1`, flashsale.EInvalid, "JSON object"},
		{"Malformed", `{"rooms":1,}`, flashsale.EInvalid, "malformed JSON"},
		{"Truncated", `{"rooms":`, flashsale.EInvalid, "ends before"},
		{"UnknownField", `{"room":1}`, flashsale.EInvalid, `unknown field "room"`},
		{"CaseVariant", `{"ROOMS":5}`, flashsale.EInvalid, `unknown field "ROOMS"`},
		{"CaseVariantMixed", `{"Rooms":5}`, flashsale.EInvalid, `unknown field "Rooms"`},
		{"Duplicate", `{"rooms":5,"rooms":1}`, flashsale.EInvalid, `duplicate field "rooms"`},
		{"DuplicateSame", `{"rooms":1,"rooms":1}`, flashsale.EInvalid, `duplicate field "rooms"`},
		{"DuplicateEscaped", `{"rooms":1,"r\u006foms":2}`, flashsale.EInvalid, `duplicate field "rooms"`},
		{"RoomsString", `{"rooms":"1"}`, flashsale.EInvalid, "rooms must be an integer"},
		{"RoomsFloat", `{"rooms":1.5}`, flashsale.EInvalid, "rooms must be an integer"},
		{"RoomsHuge", `{"rooms":99999999999999999999}`, flashsale.EInvalid, "rooms"},
		{"Rooms0", `{"rooms":0}`, flashsale.EInvalid, "rooms must be between 1"},
		{"RoomsNegative", `{"rooms":-1}`, flashsale.EInvalid, "rooms must be between 1"},
		{"RoomsTooMany", `{"rooms":1001}`, flashsale.EInvalid, "rooms must be between 1"},
		{"Nights0", `{"nights":0}`, flashsale.EInvalid, "nights must be between 1"},
		{"NightsNegative", `{"nights":-2}`, flashsale.EInvalid, "nights must be between 1"},
		{"NightsTooMany", `{"nights":367}`, flashsale.EInvalid, "nights must be between 1"},
		{"NightsBool", `{"nights":true}`, flashsale.EInvalid, "nights must be an integer"},
		{"TokenNumber", `{"token":12}`, flashsale.EInvalid, "token must be a string"},
		{"TokenTooLong", `{"token":"` + strings.Repeat("t", MaxPurchaseToken+1) + `"}`, flashsale.EInvalid, "token is longer"},
		{"CheckInNotDate", `{"check_in":"christmas"}`, flashsale.EInvalid, "check_in must be a date"},
		{"CheckInDateTime", `{"check_in":"2026-12-24T00:00:00Z"}`, flashsale.EInvalid, "check_in must be a date"},
		{"CheckInImpossible", `{"check_in":"2026-02-30"}`, flashsale.EInvalid, "check_in must be a date"},
		{"Trailing", `{"rooms":1}{"rooms":2}`, flashsale.EInvalid, "after the JSON object"},
		{"TrailingBrace", `{"rooms":1}}`, flashsale.EInvalid, "after the JSON object"},
		{"TooLarge", `{"token":"` + strings.Repeat("t", MaxBodyBytes) + `"}`, flashsale.ETooLarge, ""},
		{"TooLargeWhitespace", `{}` + strings.Repeat(" ", MaxBodyBytes), flashsale.ETooLarge, ""},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodePurchase(strings.NewReader(tt.body))
			if err == nil {
				t.Fatalf("decoded %+v, want error %s", got, tt.code)
			}
			wantDecodeError(t, err, tt.code, tt.msg)
		})
	}

	t.Run("ExactlyMax", func(t *testing.T) {
		body := `{}` + strings.Repeat(" ", MaxBodyBytes-2)
		if _, err := decodePurchase(strings.NewReader(body)); err != nil {
			t.Fatalf("a %d-byte body is within the limit: %v", len(body), err)
		}
	})
}

func TestDecodePaid(t *testing.T) {
	for _, body := range []string{
		``, `{}`, `{"payment_ref":""}`, `{"payment_ref":null}`, `{"payment_ref":1}`,
		`{"payment_ref":"` + strings.Repeat("é", 129) + `"}`, `{"payment_ref":"a\nb"}`,
		`{"payment_ref":"p","amount":1}`, `{"payment_ref":"p"} []`,
	} {
		if b, err := decodePaid(strings.NewReader(body)); err == nil {
			t.Errorf("%s: decoded %+v, want error", body, b)
		} else {
			wantDecodeError(t, err, flashsale.EInvalid, "")
		}
	}
	b, err := decodePaid(strings.NewReader(`{"payment_ref":"` + strings.Repeat("é", 128) + `"}`))
	if err != nil || utf8.RuneCountInString(b.PaymentRef) != 128 {
		t.Fatalf("128 characters: %+v, %v", b, err)
	}
}

// wantDecodeError checks err is an *flashsale.Error with code whose message contains msg.
func wantDecodeError(tb testing.TB, err error, code, msg string) {
	tb.Helper()
	fe, ok := errors.AsType[*flashsale.Error](err)
	if !ok {
		tb.Fatalf("error %v (%T) is not a *flashsale.Error", err, err)
	}
	if fe.Code != code {
		tb.Fatalf("code = %q, want %q (%s)", fe.Code, code, fe.Message)
	}
	if !strings.Contains(fe.Message, msg) {
		tb.Fatalf("message %q does not mention %q", fe.Message, msg)
	}
}

func FuzzDecodePurchase(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"rooms":1}`, `{"rooms":0}`, `{"rooms":-1}`, `{"nights":366,"rooms":1000}`,
		`{"token":"abc","check_in":"` + testenv.Night(0) + `","nights":2,"rooms":3}`, `{"rooms":"1"}`, `{"rooms":1e3}`,
		`{"check_in":"2026-02-30"}`, `{"room":1}`, `{"rooms":1}{}`, `{"rooms":`, "\xff", `{"token":"\u0000"}`,
		`{"ROOMS":5}`, `{"rooms":5,"rooms":1}`, `{"rooms":1,"r\u006foms":2}`, `{"token":"\xff"}`,
		`{"slot":"2031-06-11T19:00","quantity":4}`, `{"slot":"2031-06-11T25:00"}`, `{"quantity":3,"rooms":3}`,
		`{"departure":"2031-06-11T09:30","seats":3}`, `{"seats":3,"rooms":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := decodePurchase(strings.NewReader(string(data)))
		if err != nil {
			wantFuzzError(t, err)
			return
		}
		if b.Nights != 0 && (b.Nights < 1 || b.Nights > flashsale.MaxNights) {
			t.Fatalf("nights %d out of bounds", b.Nights)
		}
		if b.Rooms != 0 && (b.Rooms < 1 || b.Rooms > MaxRooms) {
			t.Fatalf("rooms %d out of bounds", b.Rooms)
		}
		if len(b.Token) > MaxPurchaseToken {
			t.Fatalf("token of %d bytes", len(b.Token))
		}
		if b.Slot != "" {
			if _, err := time.Parse(flashsale.SlotLayout, b.Slot); err != nil {
				t.Fatalf("slot %q is not a slot", b.Slot)
			}
		}
		if b.CheckIn != "" {
			if _, err := time.Parse(flashsale.DateLayout, b.CheckIn); err != nil {
				t.Fatalf("check_in %q is not a date", b.CheckIn)
			}
		}
	})
}

func FuzzDecodeSale(f *testing.F) {
	for _, s := range []string{
		validSale, ``, `{}`, `null`, `{"title":"x"}`, validSale + `{}`,
		strings.Replace(validSale, `"per_user_limit":2`, `"per_user_limit":0`, 1),
		strings.Replace(validSale, testenv.Night(1), testenv.Night(-1), 1),
		strings.Replace(validSale, `39900`, `1e300`, 1),
		strings.Replace(validSale, `"gold"`, `"diamond"`, 1),
		`{"nights":[{"date":"` + testenv.Night(0) + `","stock":-1}]}`,
		strings.Replace(validSale, `"admission_seconds":60`, `"admission_seconds":0`, 1),
		strings.Replace(validSale, `"admit_per_second":2.5`, `"admit_per_second":0.05`, 1),
		strings.Replace(validSale, `{"prequeue_minutes":30,"admit_per_second":2.5,"admission_seconds":60}`, `null`, 1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSale(strings.NewReader(string(data)))
		if err != nil {
			wantFuzzError(t, err)
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("decoded an invalid sale: %v", err)
		}
		if len(s.Nights) < 1 || len(s.Nights) > flashsale.MaxNights {
			t.Fatalf("%d nights", len(s.Nights))
		}
		for _, n := range s.Nights {
			if n.Stock < 0 || n.Stock > flashsale.MaxStock {
				t.Fatalf("stock %d", n.Stock)
			}
		}
		if s.PerUserLimit < 1 || s.HoldSeconds < 1 || !s.EndsAt.After(s.StartsAt) {
			t.Fatalf("out of bounds: %+v", s)
		}
		// The answer is written with encoding/json, which fails (and
		// writeJSON panics) on a NaN or infinite number.
		if _, err := json.Marshal(s); err != nil {
			t.Fatalf("the decoded sale cannot be answered: %v", err)
		}
	})
}

func wantFuzzError(t *testing.T, err error) {
	t.Helper()
	fe, ok := errors.AsType[*flashsale.Error](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *flashsale.Error", err, err)
	}
	if fe.Code != flashsale.EInvalid && fe.Code != flashsale.ETooLarge {
		t.Fatalf("code %q, want invalid_request or too_large", fe.Code)
	}
}

func FuzzDecodeBreaker(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"force":"open"}`, `{"force":"closed"}`, `{"force":"auto"}`,
		`{"force":"Open"}`, `{"force":null}`, `{"force":"open","x":1}`, `{"force":"open"} 1`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := decodeBreaker(strings.NewReader(string(data)))
		if err != nil {
			wantFuzzError(t, err)
			return
		}
		switch b.Force {
		case flashsale.BreakerAuto, flashsale.BreakerForceOpen, flashsale.BreakerForceClosed:
		default:
			t.Fatalf("decoded force %q", b.Force)
		}
	})
}
