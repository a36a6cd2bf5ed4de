package funnel

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
)

var (
	signSale = fixture.Sale(fixture.ID("01JF6Z8Q2W3E4R5T6Y7U8I9O0P")) // the fixture's price, 39900
	signUser = flashsale.User{ID: "user-123456"}
	signNow  = time.Date(2026, 12, 24, 20, 0, 0, 0, time.UTC)
)

func mustToken(s *signer, price int64) string {
	var nonce [nonceLen]byte
	randomNonce(&nonce)
	return s.seal(kindToken, &nonce, signNow.Add(time.Minute), price, signSale.ID, signUser.ID)
}

// TestSignerCheck: a token checks for its user, sale, price and time only.
func TestSignerCheck(t *testing.T) {
	s := newSigner(nil, []byte("secret"))
	tok := mustToken(s, signSale.Price)
	c, err := s.check(tok, signUser, signSale, signNow)
	if err != nil {
		t.Fatal(err)
	}
	if c.Schedule != signSale.PriceSchedule() || c.Nonce != tok[4:20] || !c.Expires.Equal(signNow.Add(time.Minute)) {
		t.Fatalf("claims %+v", c)
	}
	other := *signSale
	other.ID = "other"
	tiered := *signSale
	tiered.PriceTiers = []flashsale.PriceTier{{Rooms: 2, Price: signSale.Price - 1}}
	for _, tc := range []struct {
		name string
		tok  string
		u    flashsale.User
		sale *flashsale.Sale
		now  time.Time
	}{
		{"OtherUser", tok, flashsale.User{ID: "user-1234567"}, signSale, signNow},
		{"OtherSale", tok, signUser, &other, signNow},
		{"Expired", tok, signUser, signSale, signNow.Add(time.Minute)},
		// Signed with the right key at another price: the amount charged
		// is the amount signed, and it must be the sale's.
		{"OtherPrice", mustToken(s, 1), signUser, signSale, signNow},
		{"OtherSecret", mustToken(newSigner(nil, []byte("secret2")), signSale.Price), signUser, signSale, signNow},
		// The same sale with price tiers now: a token signed at the
		// schedule without them buys nothing at the new one.
		{"OtherSchedule", tok, signUser, &tiered, signNow},
		{"Challenge", s.seal(kindChallenge, new([nonceLen]byte), signNow.Add(time.Minute), signSale.Price, signSale.ID, signUser.ID), signUser, signSale, signNow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.check(tc.tok, tc.u, tc.sale, tc.now); !errors.Is(err, flashsale.ErrTokenInvalid) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestSignerTampered: every change to a token's text is refused, whatever
// the character and wherever it is: one byte replaced by any other, one
// inserted (a line break included: the decoder would skip it, and the
// spend ID, characters 4 to 20, would shift), one removed.
func TestSignerTampered(t *testing.T) {
	s := newSigner(nil, []byte("secret"))
	tok := mustToken(s, signSale.Price)
	refused := func(bad string) {
		t.Helper()
		if _, err := s.check(bad, signUser, signSale, signNow); err == nil {
			t.Fatalf("accepted %q (from %q)", bad, tok)
		}
	}
	for i := range len(tok) {
		for c := range 256 {
			if byte(c) != tok[i] {
				b := []byte(tok)
				b[i] = byte(c)
				refused(string(b))
			}
		}
		for _, c := range []string{"\n", "\r", "=", "A", "."} {
			refused(tok[:i] + c + tok[i:])
		}
		refused(tok[:i] + tok[i+1:])
	}
	if _, err := s.check(tok, signUser, signSale, signNow); err != nil {
		t.Fatal(err)
	}
}

// TestSignerRotation: the first key signs, every key verifies, a key that
// is gone verifies nothing.
func TestSignerRotation(t *testing.T) {
	k0 := TokenKey{ID: "k0", Secret: []byte("zero")}
	k1 := TokenKey{ID: "k1", Secret: []byte("one")}
	k2 := TokenKey{ID: "k2", Secret: []byte("two")}
	before, during, after := newSigner([]TokenKey{k0}, nil), newSigner([]TokenKey{k1, k0}, nil), newSigner([]TokenKey{k2, k1}, nil)
	ok := func(v *signer, tok string) bool {
		_, err := v.check(tok, signUser, signSale, signNow)
		return err == nil
	}
	old, cur := mustToken(before, signSale.Price), mustToken(during, signSale.Price)
	switch {
	case !ok(during, old):
		t.Error("the previous key's token refused during the rotation")
	case !ok(after, cur) || !ok(during, cur):
		t.Error("the current key's token refused")
	case ok(after, old):
		t.Error("a rotated-out key's token accepted")
	case ok(before, cur):
		t.Error("a token of a key the signer does not hold accepted")
	}
	// The same ID with another secret is another key.
	if ok(newSigner([]TokenKey{{ID: "k0", Secret: []byte("not zero")}}, nil), old) {
		t.Error("a token accepted under a key ID with another secret")
	}
	// The default key is the server secret's, as key "0".
	if !ok(newSigner([]TokenKey{{ID: "0", Secret: []byte("secret")}}, nil), mustToken(newSigner(nil, []byte("secret")), signSale.Price)) {
		t.Error(`the default key is not "0:<secret>"`)
	}
}

func TestParseTokenKeys(t *testing.T) {
	keys, err := ParseTokenKeys("new:0123456789abcdef0123, old:fedcba9876543210:with-colon")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].ID != "new" || string(keys[0].Secret) != "0123456789abcdef0123" ||
		keys[1].ID != "old" || string(keys[1].Secret) != "fedcba9876543210:with-colon" {
		t.Fatalf("keys %q", keys)
	}
	for _, bad := range []string{
		"", "k1", "k1:short", ":0123456789abcdef", "k 1:0123456789abcdef", "k.1:0123456789abcdef",
		"seventeen-chars-x:0123456789abcdef", "k1:0123456789abcdef,k1:0123456789abcdeg", "k1:0123456789abcdef,",
	} {
		if _, err := ParseTokenKeys(bad); err == nil {
			t.Errorf("ParseTokenKeys(%q) accepted", bad)
		}
	}
}

// FuzzVerifyToken: no input panics the verifier, and whatever it accepts
// is exactly what sealing its claims again gives: one text per token, so
// one spend per token.
func FuzzVerifyToken(f *testing.F) {
	s := newSigner(nil, []byte("secret"))
	tok := mustToken(s, signSale.Price)
	f.Add(tok)
	f.Add(tok[:len(tok)-1])
	f.Add(strings.Replace(tok, ".", "\n.", 1))
	f.Add(s.seal(kindChallenge, new([nonceLen]byte), signNow, 16, signSale.ID, signUser.ID))
	f.Add("")
	f.Add(".")
	f.Add("AgAB.AAAA")
	f.Fuzz(func(t *testing.T, text string) {
		sc := scratches.Get().(*scratch)
		defer scratches.Put(sc)
		o, ok := s.open(text, sc)
		if !ok {
			return
		}
		if again := s.seal(o.kind, &o.nonce, o.expires, o.value, string(o.sale), string(o.user)); again != text {
			t.Fatalf("accepted %q, which seals as %q", text, again)
		}
		if o.nonceText != text[4:20] {
			t.Fatalf("nonce %q", o.nonceText)
		}
	})
}

func BenchmarkToken(b *testing.B) {
	s := newSigner(nil, []byte("bench-secret"))
	var nonce [nonceLen]byte
	b.Run("Issue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			randomNonce(&nonce)
			s.seal(kindToken, &nonce, signNow.Add(time.Minute), signSale.Price, signSale.ID, signUser.ID)
		}
	})
	tok := mustToken(s, signSale.Price)
	b.Run("Verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.check(tok, signUser, signSale, signNow); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestZeroBits(t *testing.T) {
	for _, tc := range []struct {
		sum  [32]byte
		want int
	}{
		{[32]byte{0x80}, 0},
		{[32]byte{0x01}, 7},
		{[32]byte{0x00, 0x40}, 9},
		{[32]byte{0, 0, 0, 0x0f}, 28},
		{[32]byte{31: 1}, 255},
		{[32]byte{}, 256},
	} {
		if got := zeroBits(&tc.sum); got != tc.want {
			t.Errorf("zeroBits(%x) = %d, want %d", tc.sum[:4], got, tc.want)
		}
	}
}

// TestSolve: the reference solver's answers solve, at every difficulty a
// test can afford, and one bit more is (almost always) not solved.
func TestSolve(t *testing.T) {
	s := newSigner(nil, []byte("secret"))
	harder := 0
	for d := range 17 {
		c := s.seal(kindChallenge, new([nonceLen]byte), signNow, int64(d), signSale.ID, signUser.ID)
		sol := Solve(c, d)
		if !Solves(c, sol, d) {
			t.Fatalf("difficulty %d: %q does not solve", d, sol)
		}
		if Solves(c, sol, d+1) {
			harder++
		}
	}
	if harder > 12 {
		t.Fatalf("%d of 17 solutions also solve one bit more: the check is not counting bits", harder)
	}
	for _, bad := range []string{"", "a b", "é", "a\n", strings.Repeat("1", flashsale.MaxSolution+1)} {
		if Solves("c", bad, 0) {
			t.Errorf("Solves accepted the solution %q", bad)
		}
	}
}

// TestSolvedDifficulty: a puzzle easier than the sale's is refused, even
// solved and signed (a sale's difficulty cannot change, but the check
// does not rely on it).
func TestSolvedDifficulty(t *testing.T) {
	s := newSigner(nil, []byte("secret"))
	sale := fixture.Sale(fixture.ID(signSale.ID), fixture.Token(), fixture.Challenge(6))
	for d, ok := range map[int]bool{5: false, 6: true, 7: true} {
		c := s.seal(kindChallenge, new([nonceLen]byte), signNow.Add(time.Minute), int64(d), sale.ID, signUser.ID)
		_, _, err := s.solved(c, Solve(c, d), signUser, sale, signNow)
		if (err == nil) != ok {
			t.Errorf("difficulty %d for a sale of 6: err = %v", d, err)
		}
	}
	// A purchase token is sealed alike; at a price of 6 its value would
	// pass for the difficulty, but its kind does not.
	tok := s.seal(kindToken, new([nonceLen]byte), signNow.Add(time.Minute), 6, sale.ID, signUser.ID)
	if _, _, err := s.solved(tok, Solve(tok, 6), signUser, sale, signNow); err == nil {
		t.Error("a purchase token passed for a challenge")
	}
}

// FuzzChallenge: no challenge and solution panic the check, and what it
// accepts is a challenge this signer sealed for this user and sale at
// least as hard as the sale's, not expired, and solved.
func FuzzChallenge(f *testing.F) {
	s := newSigner(nil, []byte("secret"))
	sale := fixture.Sale(fixture.ID(signSale.ID), fixture.Token(), fixture.Challenge(4))
	c := s.seal(kindChallenge, new([nonceLen]byte), signNow.Add(time.Minute), 4, sale.ID, signUser.ID)
	f.Add(c, Solve(c, 4))
	f.Add(c, "0")
	f.Add(c, "")
	f.Add(mustToken(s, signSale.Price), "0")
	f.Add("", "")
	f.Add(c+"\n", Solve(c, 4))
	f.Fuzz(func(t *testing.T, challenge, solution string) {
		nonce, exp, err := s.solved(challenge, solution, signUser, sale, signNow)
		if err != nil {
			if flashsale.ErrorCode(err) != flashsale.EChallengeFailed {
				t.Fatalf("err %v is not challenge_failed", err)
			}
			return
		}
		sc := scratches.Get().(*scratch)
		defer scratches.Put(sc)
		o, ok := s.open(challenge, sc)
		if !ok || o.kind != kindChallenge || string(o.sale) != sale.ID || string(o.user) != signUser.ID ||
			o.value < 4 || !signNow.Before(exp) || o.nonce != nonce || !Solves(challenge, solution, 4) {
			t.Fatalf("accepted %q %q", challenge, solution)
		}
	})
}

// BenchmarkSolve measures the reference solver in hashes a second (the
// calibration in docs/design.md, "Proof of work").
func BenchmarkSolve(b *testing.B) {
	s := newSigner(nil, []byte("secret"))
	var hashes int
	for b.Loop() {
		var nonce [nonceLen]byte
		randomNonce(&nonce)
		c := s.seal(kindChallenge, &nonce, signNow, 16, signSale.ID, signUser.ID)
		sol := Solve(c, 16)
		var n int
		for i := range len(sol) {
			n = n*10 + int(sol[i]-'0')
		}
		hashes += n + 1
	}
	b.ReportMetric(float64(hashes)/b.Elapsed().Seconds(), "hashes/s")
	b.ReportMetric(float64(hashes)/float64(b.N), "hashes/op")
}

// BenchmarkCheckSolution is the server's cost of a token request with a
// solved challenge, beyond the token's own.
func BenchmarkCheckSolution(b *testing.B) {
	s := newSigner(nil, []byte("secret"))
	sale := fixture.Sale(fixture.ID(signSale.ID), fixture.Token(), fixture.Challenge(16))
	c := s.seal(kindChallenge, new([nonceLen]byte), signNow.Add(time.Minute), 16, sale.ID, signUser.ID)
	sol := Solve(c, 16)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.solved(c, sol, signUser, sale, signNow); err != nil {
			b.Fatal(err)
		}
	}
}
