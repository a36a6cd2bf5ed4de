package http

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
)

// withRules is validSale with every eligibility rule, limit override and a
// proof-of-work challenge (which needs the purchase token).
var withRules = strings.Replace(strings.Replace(validSale, `"purchase_token":false`, `"purchase_token":true`, 1), `"eligibility":{"min_tier":"gold"}`,
	`"eligibility":{"min_tier":"gold","min_stays_30d":2,"channels":["ota-x","trip.com"]},
	"limits":{"per_sale":"300/s,600","per_user":"5/m","per_ip":"off"},
	"challenge":{"difficulty":16}`, 1)

func TestDecodeSaleRules(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		s, err := decodeSale(strings.NewReader(withRules))
		if err != nil {
			t.Fatal(err)
		}
		want := flashsale.Eligibility{MinTier: flashsale.TierGold, MinStays30d: 2, Channels: []string{"ota-x", "trip.com"}}
		if diff := cmp.Diff(want, s.Eligibility); diff != "" {
			t.Errorf("eligibility (-want +got):\n%s", diff)
		}
		perSale, perUser, off := flashsale.PerSecond(300, 600), flashsale.Rate{N: 5, Per: time.Minute, Burst: 5}, flashsale.Rate{}
		if diff := cmp.Diff(flashsale.SaleLimits{PerSale: &perSale, PerUser: &perUser, PerIP: &off}, s.Limits); diff != "" {
			t.Errorf("limits (-want +got):\n%s", diff)
		}
		if s.Challenge.Difficulty != 16 {
			t.Errorf("challenge = %+v, want difficulty 16", s.Challenge)
		}
	})
	t.Run("PriceTiers", func(t *testing.T) {
		body := strings.Replace(withRules, `"per_user_limit":2`, `"per_user_limit":2,"price_tiers":[{"rooms":2,"price":34900}]`, 1)
		s, err := decodeSale(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]flashsale.PriceTier{{Rooms: 2, Price: 34900}}, s.PriceTiers); diff != "" {
			t.Errorf("price tiers (-want +got):\n%s", diff)
		}
	})
	t.Run("Absent", func(t *testing.T) {
		s, err := decodeSale(strings.NewReader(validSale))
		if err != nil {
			t.Fatal(err)
		}
		if s.Limits != (flashsale.SaleLimits{}) || s.Eligibility.MinStays30d != 0 || s.Eligibility.Channels != nil {
			t.Errorf("no rules sent, got %+v %+v", s.Eligibility, s.Limits)
		}
	})
	bad := []struct {
		name, from, to, field string
	}{
		{"StaysNegative", `"min_stays_30d":2`, `"min_stays_30d":-1`, "eligibility.min_stays_30d"},
		{"StaysTooMany", `"min_stays_30d":2`, `"min_stays_30d":31`, "eligibility.min_stays_30d"},
		{"StaysString", `"min_stays_30d":2`, `"min_stays_30d":"2"`, "eligibility.min_stays_30d"},
		{"StaysFloat", `"min_stays_30d":2`, `"min_stays_30d":2.5`, "eligibility.min_stays_30d"},
		{"StaysCase", `"min_stays_30d":2`, `"Min_Stays_30d":2`, "Min_Stays_30d"},
		{"ChannelUpper", `"ota-x"`, `"OTA-X"`, "eligibility.channels[0]"},
		{"ChannelComma", `"ota-x"`, `"ota,x"`, "eligibility.channels[0]"},
		{"ChannelEmpty", `"ota-x"`, `""`, "eligibility.channels[0]"},
		{"ChannelRepeat", `"trip.com"`, `"ota-x"`, "eligibility.channels[1]"},
		{"ChannelsString", `["ota-x","trip.com"]`, `"ota-x"`, "eligibility.channels"},
		{"ChannelsTooMany", `["ota-x","trip.com"]`, `["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]`, "eligibility.channels"},
		{"ChannelNumber", `"trip.com"`, `7`, "eligibility.channels[1]"},
		{"LimitGarbage", `"300/s,600"`, `"fast"`, "limits.per_sale"},
		{"LimitZero", `"300/s,600"`, `"0/s"`, "limits.per_sale"},
		{"LimitUnit", `"5/m"`, `"5/d"`, "limits.per_user"},
		{"LimitBurst", `"5/m"`, `"5/m,0"`, "limits.per_user"},
		{"LimitOffCase", `"off"`, `"OFF"`, "limits.per_ip"},
		{"LimitNumber", `"off"`, `5`, "limits.per_ip"},
		{"LimitObject", `"off"`, `{"n":5}`, "limits.per_ip"},
		{"LimitUnknown", `"per_ip":"off"`, `"per_ip":"off","per_day":"5/h"`, "per_day"},
		{"LimitDuplicate", `"per_ip":"off"`, `"per_ip":"off","per_ip":"1/s"`, "per_ip"},
		{"LimitsCase", `"limits"`, `"Limits"`, "Limits"},
		{"ChallengeHard", `"difficulty":16`, `"difficulty":33`, "challenge.difficulty"},
		{"ChallengeNegative", `"difficulty":16`, `"difficulty":-1`, "challenge.difficulty"},
		{"ChallengeString", `"difficulty":16`, `"difficulty":"16"`, "challenge.difficulty"},
		{"ChallengeUnknown", `"difficulty":16`, `"difficulty":16,"algorithm":"md5"`, "algorithm"},
		{"ChallengeNoToken", `"purchase_token":true`, `"purchase_token":false`, "purchase_token"},
		{"LimitsArray", `{"per_sale":"300/s,600","per_user":"5/m","per_ip":"off"}`, `["300/s"]`, "limits"},
		{"TiersRoomsOne", `"per_user_limit":2`, `"per_user_limit":2,"price_tiers":[{"rooms":1,"price":100}]`, "price_tiers[0].rooms"},
		{"TiersAboveLimit", `"per_user_limit":2`, `"per_user_limit":2,"price_tiers":[{"rooms":3,"price":100}]`, "price_tiers[0].rooms"},
		{"TiersNotCheaper", `"per_user_limit":2`, `"per_user_limit":2,"price_tiers":[{"rooms":2,"price":39900}]`, "price_tiers[0].price"},
		{"TiersString", `"per_user_limit":2`, `"per_user_limit":2,"price_tiers":"2:100"`, "price_tiers"},
		{"TiersPriceString", `"per_user_limit":2`, `"per_user_limit":2,"price_tiers":[{"rooms":2,"price":"100"}]`, "price_tiers"},
		{"TiersUnknown", `"per_user_limit":2`, `"per_user_limit":2,"price_tiers":[{"rooms":2,"price":100,"off":5}]`, "off"},
		{"TiersFloat", `"per_user_limit":2`, `"per_user_limit":2,"price_tiers":[{"rooms":2.5,"price":100}]`, "price_tiers"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(withRules, tt.from) {
				t.Fatalf("%s not in the body", tt.from)
			}
			_, err := decodeSale(strings.NewReader(strings.Replace(withRules, tt.from, tt.to, 1)))
			if flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(flashsale.ErrorMessage(err), tt.field) {
				t.Fatalf("err = %v, want invalid_request naming %s", err, tt.field)
			}
		})
	}
}

// TestViewsWaitingRoom: the admin view, the public view (the guest's page
// joins the queue) and the creation's answer carry the waiting room as it
// was set, and leave it out when there is none.
func TestViewsWaitingRoom(t *testing.T) {
	room := &flashsale.WaitingRoom{PrequeueMinutes: 30, AdmitPerSecond: 2.5, AdmissionSeconds: 60}
	const want = `"waiting_room":{"prequeue_minutes":30,"admit_per_second":2.5,"admission_seconds":60}`
	for _, c := range []struct {
		room *flashsale.WaitingRoom
		want string
	}{{room, want}, {nil, ""}} {
		s, err := decodeSale(strings.NewReader(validSale))
		if err != nil {
			t.Fatal(err)
		}
		s.WaitingRoom = c.room
		v := &flashsale.SaleView{Sale: s}
		for name, view := range map[string]any{"admin": adminView(v), "public": publicView(v)} {
			b, err := json.Marshal(view)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); c.want != "" && !strings.Contains(got, c.want) || c.want == "" && strings.Contains(got, "waiting_room") {
				t.Errorf("%s view with room %+v: %s", name, c.room, got)
			}
		}
	}
	w := do(t, newStubServer(&stubService{}), "POST", "/api/admin/sales", "admin", validSale)
	if w.Code != 201 || !strings.Contains(w.Body.String(), want) {
		t.Errorf("the creation's answer: %d %s", w.Code, w.Body)
	}
}
