package http

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
)

func TestChallengeHandler(t *testing.T) {
	for _, body := range []string{``, `{}`, " {} \n"} {
		svc := &stubService{}
		w := do(t, newStubServer(svc), "POST", "/api/sales/s1/challenge", "alice", body)
		if w.Code != 201 {
			t.Fatalf("body %q: status %d: %s", body, w.Code, w.Body)
		}
		var got map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"challenge": "puzzle", "difficulty": 16.0, "algorithm": "sha256",
			"expires_at": t0.Add(time.Minute).Format(time.RFC3339Nano)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("puzzle (-want +got):\n%s", diff)
		}
		if svc.user.ID != "alice" {
			t.Fatalf("user %+v", svc.user)
		}
	}
}

// TestTokenRequestBody: the solved challenge reaches the service as sent;
// no body is a request without one.
func TestTokenRequestBody(t *testing.T) {
	for _, tc := range []struct {
		body string
		want flashsale.TokenRequest
	}{
		{``, flashsale.TokenRequest{SaleID: "s1"}},
		{`{}`, flashsale.TokenRequest{SaleID: "s1"}},
		{`{"challenge":null,"solution":null}`, flashsale.TokenRequest{SaleID: "s1"}},
		{`{"challenge":"AnQC.x","solution":"123"}`, flashsale.TokenRequest{SaleID: "s1", Challenge: "AnQC.x", Solution: "123"}},
	} {
		svc := &stubService{}
		w := do(t, newStubServer(svc), "POST", "/api/sales/s1/token", "alice", tc.body)
		if w.Code != 201 {
			t.Fatalf("body %q: status %d: %s", tc.body, w.Code, w.Body)
		}
		if svc.token != tc.want {
			t.Fatalf("body %q: request %+v, want %+v", tc.body, svc.token, tc.want)
		}
	}
}

// TestBadChallengeInput: every malformed token request or challenge
// request is a 400 (or 401, 413) before the service is called.
func TestBadChallengeInput(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name, path, auth, body string
		status                 int
		code                   string
	}{
		{"TokenUnknownField", "/api/sales/s1/token", "alice", `{"challenge":"c","solution":"s","nonce":"1"}`, 400, flashsale.EInvalid},
		{"TokenCaseVariant", "/api/sales/s1/token", "alice", `{"Challenge":"c","solution":"s"}`, 400, flashsale.EInvalid},
		{"TokenDuplicate", "/api/sales/s1/token", "alice", `{"challenge":"c","solution":"s","solution":"t"}`, 400, flashsale.EInvalid},
		{"TokenOnlyChallenge", "/api/sales/s1/token", "alice", `{"challenge":"c"}`, 400, flashsale.EInvalid},
		{"TokenOnlySolution", "/api/sales/s1/token", "alice", `{"solution":"s"}`, 400, flashsale.EInvalid},
		{"TokenEmptySolution", "/api/sales/s1/token", "alice", `{"challenge":"c","solution":""}`, 400, flashsale.EInvalid},
		{"TokenLongChallenge", "/api/sales/s1/token", "alice", `{"challenge":"` + long(MaxChallenge+1) + `","solution":"s"}`, 400, flashsale.EInvalid},
		{"TokenLongSolution", "/api/sales/s1/token", "alice", `{"challenge":"c","solution":"` + long(MaxSolution+1) + `"}`, 400, flashsale.EInvalid},
		{"TokenWrongType", "/api/sales/s1/token", "alice", `{"challenge":"c","solution":123}`, 400, flashsale.EInvalid},
		{"TokenArray", "/api/sales/s1/token", "alice", `["c","s"]`, 400, flashsale.EInvalid},
		{"TokenTrailing", "/api/sales/s1/token", "alice", `{"challenge":"c","solution":"s"} {}`, 400, flashsale.EInvalid},
		{"TokenMalformed", "/api/sales/s1/token", "alice", `{"challenge":`, 400, flashsale.EInvalid},
		{"TokenInvalidUTF8", "/api/sales/s1/token", "alice", "{\"challenge\":\"\xff\",\"solution\":\"s\"}", 400, flashsale.EInvalid},
		{"TokenTooLarge", "/api/sales/s1/token", "alice", `{"challenge":"` + long(MaxBodyBytes) + `"}`, 413, flashsale.ETooLarge},
		{"ChallengeBody", "/api/sales/s1/challenge", "alice", `{"difficulty":1}`, 400, flashsale.EInvalid},
		{"ChallengeNotObject", "/api/sales/s1/challenge", "alice", `"x"`, 400, flashsale.EInvalid},
		{"ChallengeNoAuth", "/api/sales/s1/challenge", "", ``, 401, flashsale.EUnauthenticated},
		{"ChallengeForged", "/api/sales/s1/challenge", "Bearer x.y.z", ``, 401, flashsale.EUnauthenticated},
		{"ChallengeLongID", "/api/sales/" + long(200) + "/challenge", "alice", ``, 404, flashsale.ENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &stubService{}
			w := do(t, newStubServer(svc), "POST", tc.path, tc.auth, tc.body)
			wantError(t, w, tc.status, tc.code)
			if n := svc.calls(); n != 0 {
				t.Fatalf("service called %d times", n)
			}
		})
	}
	w := do(t, newStubServer(&stubService{}), "GET", "/api/sales/s1/challenge", "alice", ``)
	wantError(t, w, 405, EMethodNotAllowed)
}

// TestChallengeFailed: the service's refusal is a 403 with its code and
// message, for each reason.
func TestChallengeFailed(t *testing.T) {
	for _, err := range []error{flashsale.ErrChallengeFailed,
		&flashsale.Error{Code: flashsale.EChallengeFailed, Message: "the challenge expired; ask for a new one"}} {
		w := do(t, newStubServer(&stubService{err: err}), "POST", "/api/sales/s1/token", "alice", `{"challenge":"c","solution":"s"}`)
		wantError(t, w, 403, flashsale.EChallengeFailed)
		if !strings.Contains(w.Body.String(), flashsale.ErrorMessage(err)) {
			t.Fatalf("body %s lacks %q", w.Body, flashsale.ErrorMessage(err))
		}
	}
}

func FuzzDecodeTokenRequest(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"challenge":"AnQC.x","solution":"0"}`, `{"challenge":"c"}`, `{"solution":"s"}`,
		`{"challenge":"c","solution":""}`, `{"CHALLENGE":"c","solution":"s"}`, `{"challenge":"c","challenge":"d","solution":"s"}`,
		`{"challenge":1,"solution":"s"}`, `{"challenge":"c","solution":"s"}{}`, "\xff", `{"challenge":"\u0000","solution":"\n"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := decodeTokenRequest(strings.NewReader(string(data)))
		if err != nil {
			wantFuzzError(t, err)
			return
		}
		if len(b.Challenge) > MaxChallenge || len(b.Solution) > MaxSolution || (b.Challenge == "") != (b.Solution == "") || b.SaleID != "" {
			t.Fatalf("decoded %+v", b)
		}
	})
}
