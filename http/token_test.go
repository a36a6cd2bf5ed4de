package http

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestWriteToken: the hand-written token answer is byte for byte what
// encoding/json writes, for tokens as issued and for any string.
func TestWriteToken(t *testing.T) {
	exp := time.Date(2026, 12, 24, 20, 0, 2, 123_000_000, time.UTC)
	for _, tok := range []string{
		"6I5adRMWtEfX4bg2AAABoijc4rgAAAAAAACb3DAx.DRykDtSBhET4Aq-0vLaudtYN7MZVXXgoAkaUAsYHQwo",
		"",
		`needs "escaping" \ <&> é` + "\n",
	} {
		want, err := json.Marshal(&flashsale.PurchaseToken{Token: tok, ExpiresAt: exp})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		writeToken(rec, &flashsale.PurchaseToken{Token: tok, ExpiresAt: exp})
		if got := rec.Body.String(); got != string(want)+"\n" {
			t.Errorf("writeToken(%q) = %s, want %s", tok, got, want)
		}
		if rec.Code != 201 || rec.Header().Get("Content-Type") == "" {
			t.Errorf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
		}
	}
}
