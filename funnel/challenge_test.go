package funnel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/internal/fixture"
)

// testDifficulty keeps the tests fast: 256 hashes on average.
const testDifficulty = 8

// TestChallenge: a sale with a difficulty issues a token only for a
// solved puzzle of its own, for this user, in time; every other request
// is challenge_failed and takes nothing; one solution buys once. On both
// stock engines, across two instances.
func TestChallenge(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			ctx := context.Background()
			d := mustDeploy(t, eng.open(t))
			a, b := d.instance(t, key0), d.instance(t, key0)
			newSale := func(difficulty int) *flashsale.Sale {
				s, err := a.CreateSale(ctx, fixture.Sale(fixture.Stock(50), fixture.OpenAt(d.clock.Now()), fixture.Limit(50),
					fixture.Token(), fixture.Challenge(difficulty)))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s, other := newSale(testDifficulty), newSale(testDifficulty)
			puzzle := func(u flashsale.User, saleID string) *flashsale.Puzzle {
				t.Helper()
				p, err := a.Challenge(ctx, u, saleID)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			solved := func(u flashsale.User, saleID string) flashsale.TokenRequest {
				p := puzzle(u, saleID)
				return flashsale.TokenRequest{SaleID: saleID, Challenge: p.Challenge, Solution: funnel.Solve(p.Challenge, p.Difficulty)}
			}

			p := puzzle(alice, s.ID)
			if p.Difficulty != testDifficulty || p.Algorithm != "sha256" || !p.ExpiresAt.Equal(d.clock.Now().Add(funnel.TokenTTLDefault).Truncate(time.Millisecond)) {
				t.Fatalf("puzzle %+v", p)
			}
			sol := funnel.Solve(p.Challenge, p.Difficulty)
			wrong := "x"
			for funnel.Solves(p.Challenge, wrong, p.Difficulty) {
				wrong += "x"
			}
			for _, tc := range []struct {
				name string
				u    flashsale.User
				req  flashsale.TokenRequest
			}{
				{"Missing", alice, flashsale.TokenRequest{SaleID: s.ID}},
				{"NoSolution", alice, flashsale.TokenRequest{SaleID: s.ID, Challenge: p.Challenge}},
				{"Wrong", alice, flashsale.TokenRequest{SaleID: s.ID, Challenge: p.Challenge, Solution: wrong}},
				{"BadSolution", alice, flashsale.TokenRequest{SaleID: s.ID, Challenge: p.Challenge, Solution: sol + "\n"}},
				{"OtherUser", bob, flashsale.TokenRequest{SaleID: s.ID, Challenge: p.Challenge, Solution: sol}},
				{"OtherSale", alice, flashsale.TokenRequest{SaleID: other.ID, Challenge: p.Challenge, Solution: sol}},
				{"Tampered", alice, flashsale.TokenRequest{SaleID: s.ID, Challenge: tamper(p.Challenge), Solution: sol}},
				{"Token", alice, func() flashsale.TokenRequest {
					// A purchase token is sealed like a challenge but is not one.
					tok, err := a.IssueToken(ctx, alice, solved(alice, s.ID))
					if err != nil {
						t.Fatal(err)
					}
					return flashsale.TokenRequest{SaleID: s.ID, Challenge: tok.Token, Solution: funnel.Solve(tok.Token, testDifficulty)}
				}()},
			} {
				t.Run(tc.name, func(t *testing.T) {
					tok, err := a.IssueToken(ctx, tc.u, tc.req)
					if flashsale.ErrorCode(err) != flashsale.EChallengeFailed {
						t.Fatalf("IssueToken = %v, %v; want challenge_failed", tok, err)
					}
				})
			}
			t.Run("Expired", func(t *testing.T) {
				req := solved(alice, s.ID)
				d.clock.Advance(funnel.TokenTTLDefault)
				defer d.clock.Advance(-funnel.TokenTTLDefault)
				if _, err := a.IssueToken(ctx, alice, req); flashsale.ErrorCode(err) != flashsale.EChallengeFailed {
					t.Fatalf("err = %v", err)
				}
			})
			// oneTime: one solution asked for twice, at a and at b: the
			// same one-time token, which buys once.
			oneTime := func(t *testing.T, a, b *funnel.Service) {
				req := solved(alice, s.ID)
				t1, err := a.IssueToken(ctx, alice, req)
				if err != nil {
					t.Fatal(err)
				}
				// Later: a token that outlived the first one's expiry
				// would outlive the engine's record of its spend.
				d.clock.Advance(time.Second)
				t2, err := b.IssueToken(ctx, alice, req)
				if err != nil {
					t.Fatal(err)
				}
				if !t1.ExpiresAt.Equal(t2.ExpiresAt) || t1.ExpiresAt.After(d.clock.Now().Add(funnel.TokenTTLDefault)) {
					t.Fatalf("expiries %v, %v", t1.ExpiresAt, t2.ExpiresAt)
				}
				before := available(t, a, s.ID)
				if _, err := a.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Token: t1.Token}); err != nil {
					t.Fatal(err)
				}
				_, err = b.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Token: t2.Token})
				wantErr(t, err, flashsale.ErrTokenInvalid)
				if after := available(t, a, s.ID); after[0] != before[0]-1 {
					t.Fatalf("stock %v -> %v: one solution bought %d rooms", before, after, before[0]-after[0])
				}
				// A fresh solution buys again.
				t3, err := b.IssueToken(ctx, alice, solved(alice, s.ID))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Token: t3.Token}); err != nil {
					t.Fatal(err)
				}
			}
			t.Run("OneTime", func(t *testing.T) { oneTime(t, a, a) })
			t.Run("OtherInstance", func(t *testing.T) {
				// Stateless: a puzzle from one instance buys a token at
				// another, once across both.
				v, err := b.PublicSale(ctx, s.ID)
				if err != nil {
					t.Fatal(err)
				}
				if v.Challenge.Difficulty == 0 {
					t.Fatal("the other instance sees no challenge: the store must keep Sale.Challenge")
				}
				oneTime(t, a, b)
			})
			t.Run("RefusedTakesNothing", func(t *testing.T) {
				before := available(t, a, s.ID)
				_, err := a.IssueToken(ctx, alice, flashsale.TokenRequest{SaleID: s.ID})
				wantErr(t, err, flashsale.ErrChallengeFailed)
				_, err = a.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID})
				wantErr(t, err, flashsale.ErrTokenInvalid)
				if after := available(t, a, s.ID); !slices.Equal(before, after) {
					t.Fatalf("stock %v -> %v", before, after)
				}
			})
			t.Run("NoDifficulty", func(t *testing.T) {
				plain := newSale(0)
				if _, err := a.Challenge(ctx, alice, plain.ID); flashsale.ErrorCode(err) != flashsale.EConflict {
					t.Fatalf("err = %v", err)
				}
				// A challenge sent anyway is ignored.
				if _, err := a.IssueToken(ctx, alice, flashsale.TokenRequest{SaleID: plain.ID, Challenge: "x", Solution: "y"}); err != nil {
					t.Fatal(err)
				}
			})
			t.Run("Window", func(t *testing.T) {
				if _, err := a.Challenge(ctx, alice, "nope"); !errors.Is(err, flashsale.ErrNotFound) {
					t.Fatalf("err = %v", err)
				}
				d.clock.Advance(2 * time.Hour)
				defer d.clock.Advance(-2 * time.Hour)
				if _, err := a.Challenge(ctx, alice, s.ID); !errors.Is(err, flashsale.ErrEnded) {
					t.Fatalf("err = %v", err)
				}
			})
		})
	}
}

// tamper changes the first character of a sealed text's payload that
// a guest could hope to choose: its difficulty's last byte lies further
// on, but any change breaks the MAC.
func tamper(sealed string) string {
	b := []byte(sealed)
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	return string(b)
}

// TestChallengeBeforeStart: a countdown page may solve the puzzle before
// the start; the token waits for the start.
func TestChallengeBeforeStart(t *testing.T) {
	ctx := context.Background()
	d := mustDeploy(t, engines[0].open(t))
	svc := d.instance(t)
	s, err := svc.CreateSale(ctx, fixture.Sale(fixture.Window(d.clock.Now().Add(10*time.Second), d.clock.Now().Add(time.Hour)),
		fixture.Stock(5), fixture.Token(), fixture.Challenge(testDifficulty)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Challenge(ctx, alice, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	req := flashsale.TokenRequest{SaleID: s.ID, Challenge: p.Challenge, Solution: funnel.Solve(p.Challenge, p.Difficulty)}
	_, err = svc.IssueToken(ctx, alice, req)
	wantErr(t, err, flashsale.ErrNotStarted)
	d.clock.Advance(10 * time.Second)
	if _, err := svc.IssueToken(ctx, alice, req); err != nil {
		t.Fatal(err)
	}
}
