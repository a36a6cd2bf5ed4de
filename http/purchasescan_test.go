package http

import (
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestScanPurchase: the bodies clients send take the fast path, and what
// it gives up on is exactly what needs the strict decoder.
func TestScanPurchase(t *testing.T) {
	for _, tt := range []struct {
		body string
		want purchaseFields
	}{
		{`{}`, purchaseFields{}},
		{`{"token":"t"}`, purchaseFields{Token: "t"}},
		{" {\n\t\"token\" : \"01JTOKEN.abc-_\" ,\r\n \"rooms\": 2 }\n", purchaseFields{Token: "01JTOKEN.abc-_", Rooms: 2, HasRooms: true}},
		{`{"token":"abc","check_in":"` + testenv.Night(0) + `","nights":2,"rooms":3}`, purchaseFields{Token: "abc", CheckIn: testenv.Night(0), Nights: 2, HasNights: true, Rooms: 3, HasRooms: true}},
		{`{"rooms":0,"nights":-1}`, purchaseFields{Rooms: 0, HasRooms: true, Nights: -1, HasNights: true}}, // in range or not is check's to say
		{`{"rooms":-0}`, purchaseFields{HasRooms: true}},
	} {
		got, ok := scanPurchase([]byte(tt.body))
		if !ok || got != tt.want {
			t.Errorf("%q: scanned %+v, %v; want %+v on the fast path", tt.body, got, ok, tt.want)
		}
	}
	for _, body := range []string{
		``, ` `, `null`, `[]`, `{`, `{"token":"t"`, `{"token":"t",}`, `{"token":"t"}x`, `{"token":"t"}{}`,
		`{"token":null}`, `{"token":1}`, `{"rooms":"1"}`, `{"rooms":1.0}`, `{"rooms":1e2}`, `{"rooms":01}`, `{"rooms":-}`,
		`{"rooms":1234567890}`, `{"rooms":true}`, `{"ROOMS":1}`, `{"room":1}`, `{"rooms":1,"rooms":1}`,
		`{"token":"a","token":"a"}`, `{"r\u006foms":1}`, `{"token":"\n"}`, `{"token":"a\"b"}`, "{\"token\":\"\xff\"}",
		`{"token":"é"}`, "{\"token\":\"\x7f\"}", `{"token" "t"}`, `{'token':'t'}`, `{,}`,
	} {
		if got, ok := scanPurchase([]byte(body)); ok {
			t.Errorf("%q: scanned %+v on the fast path; the strict decoder must read it", body, got)
		}
	}
}

// FuzzScanPurchase is the fast path's differential test: whatever it
// accepts, the strict decoder accepts with the same fields.
func FuzzScanPurchase(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"token":"t"}`, `{"token":"abc","check_in":"` + testenv.Night(0) + `","nights":2,"rooms":3}`, ` { "rooms" : -0 } `,
		`{"rooms":1,"rooms":2}`, `{"rooms":01}`, `{"rooms":1e1}`, `{"token":"\u0041"}`, `{"token":"a"}}`, `{"nights":999999999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := scanPurchase(data)
		if !ok {
			return
		}
		strict, err := decodePurchaseJSON(data)
		if err != nil {
			t.Fatalf("%q: the fast path read %+v, the strict decoder refuses it: %v", data, fast, err)
		}
		if fast != strict {
			t.Fatalf("%q: the fast path read %+v, the strict decoder %+v", data, fast, strict)
		}
	})
}
