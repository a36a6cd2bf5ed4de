package funnel

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// IssueToken gives a guest a one-time purchase token for an open sale. A
// sale with a proof-of-work challenge wants its solution first (see
// challenge.go); the token then carries the challenge's seed as its nonce,
// so one solution buys at most one purchase.
func (s *Service) IssueToken(ctx context.Context, u flashsale.User, req flashsale.TokenRequest) (*flashsale.PurchaseToken, error) {
	sale, err := s.sales.get(ctx, req.SaleID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if err := sale.Open(now); err != nil {
		return nil, err
	}
	// The challenge before eligibility: it costs no I/O, and a script
	// without a solution should not cost a user-service call.
	var nonce [nonceLen]byte
	exp := now.Add(s.signer.ttl).UTC().Truncate(time.Millisecond)
	// A waiting room asks for the proof of work at the join: an admitted
	// guest has done it.
	if sale.Challenge.Difficulty > 0 && sale.WaitingRoom == nil {
		if nonce, exp, err = s.signer.solved(req.Challenge, req.Solution, u, sale, now); err != nil {
			return nil, err
		}
	} else {
		randomNonce(&nonce)
	}
	until, err := s.admitted(ctx, u, sale, now)
	if err != nil {
		return nil, err
	}
	if !until.IsZero() && until.Before(exp) {
		exp = until.UTC().Truncate(time.Millisecond) // no purchase outlives its admission
	}
	if err := s.eligible(ctx, u, sale); err != nil {
		return nil, err
	}
	tok := s.signer.seal(kindToken, &nonce, exp, sale.PriceSchedule(), sale.ID, u.ID)
	return &flashsale.PurchaseToken{Token: tok, ExpiresAt: exp}, nil
}

// TokenTTLDefault is how long a purchase token (and a challenge) stays valid.
const TokenTTLDefault = 120 * time.Second

// TokenKey is one key that signs purchase tokens and challenges. Its ID
// travels in every token so that, while keys rotate, a verifier knows which
// one signed it.
type TokenKey struct {
	ID     string // 1 to MaxTokenKeyID characters of [A-Za-z0-9_-]
	Secret []byte
}

// MaxTokenKeyID bounds a key ID: it is in every token.
const MaxTokenKeyID = 16

// DefaultTokenKeyID names the key derived from the server secret when no
// keys are configured, so an operator can list it as "0:<secret>" behind a
// new key to rotate away from it.
const DefaultTokenKeyID = "0"

// ParseTokenKeys reads "kid:secret,kid:secret": the first signs, all
// verify. Two keys are a rotation: the new one first, the old one kept
// until the tokens it signed have expired (TokenTTL).
func ParseTokenKeys(v string) ([]TokenKey, error) {
	var keys []TokenKey
	for _, item := range strings.Split(v, ",") {
		id, secret, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok || len(secret) < 16 {
			return nil, fmt.Errorf("want kid:secret, comma-separated, each secret at least 16 characters")
		}
		keys = append(keys, TokenKey{ID: id, Secret: []byte(secret)})
	}
	return keys, checkTokenKeys(keys)
}

func checkTokenKeys(keys []TokenKey) error {
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if len(k.ID) == 0 || len(k.ID) > MaxTokenKeyID || !b64Text(k.ID) {
			return fmt.Errorf("key id %q: want 1 to %d characters of A-Z a-z 0-9 _ -", k.ID, MaxTokenKeyID)
		}
		if seen[k.ID] {
			return fmt.Errorf("key id %q appears twice", k.ID)
		}
		seen[k.ID] = true
	}
	return nil
}

// tokenClaims is what a purchase token binds: one user, one sale, one price,
// until a moment. The nonce makes each token unique so it can be spent once.
type tokenClaims struct {
	SaleID   string
	UserID   string
	Schedule int64 // Sale.PriceSchedule when issued
	Expires  time.Time
	Nonce    string
}

// A sealed value (a purchase token or a challenge) is
//
//	base64url(payload) "." base64url(HMAC-SHA256(key, payload))
//
// with the payload
//
//	version (1) | kind (1) | len(kid) (1) | nonce (12) | kid | expiry (8, unix ms) | value (8) | sale "\x00" user
//
// The version byte tells this format from the unversioned one before it
// (whose tokens, 120 s lived, are refused after an upgrade); the kind byte
// keeps a challenge from ever passing as a token, both being under the MAC.
// The three-byte head puts the nonce at characters 4 to 20 of the text, so
// its base64url, the ID the stock engine spends, is a substring and costs
// no allocation. The encoding is strict (no padding bits, no line breaks),
// so one payload has exactly one text and a token cannot be spent twice
// under two spellings. A token's value is its price, a challenge's its
// difficulty.
const (
	sealVersion   = 2
	kindToken     = 't'
	kindChallenge = 'c'
	nonceLen      = 12
	sealHead      = 3 + nonceLen
	// maxSealed bounds a sealed text (http.MaxPurchaseToken is the same).
	maxSealed = 512
	macText   = 43 // base64url of 32 bytes
)

var b64 = base64.RawURLEncoding.Strict()

// signKey is one key with its pooled HMAC states: every guest asks for a
// token and presents it within the same second, and a fresh hmac.New per
// call is most of the cost.
type signKey struct {
	id   string
	macs sync.Pool
}

// signer seals and opens purchase tokens and challenges. keys[0] signs;
// every key verifies.
type signer struct {
	keys []*signKey
	ttl  time.Duration // how long a purchase token is valid
}

// newSigner derives each key from its secret, so a secret never doubles as
// the JWT key. Without keys the server secret is the one key, ID "0", as
// before keys rotated. It panics on keys ParseTokenKeys would refuse.
func newSigner(keys []TokenKey, secret []byte) *signer {
	if len(keys) == 0 {
		keys = []TokenKey{{ID: DefaultTokenKeyID, Secret: secret}}
	}
	if err := checkTokenKeys(keys); err != nil {
		panic("funnel: token keys: " + err.Error())
	}
	s := &signer{}
	for _, k := range keys {
		m := hmac.New(sha256.New, k.Secret)
		m.Write([]byte("flashsale purchase token v1"))
		key := m.Sum(nil)
		s.keys = append(s.keys, &signKey{id: k.ID, macs: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}})
	}
	return s
}

// mac appends k's HMAC of payload to dst.
func (k *signKey) mac(dst, payload []byte) []byte {
	h := k.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(payload)
	dst = h.Sum(dst)
	k.macs.Put(h)
	return dst
}

// randomNonce fills n from the runtime's ChaCha8 generator, no system call:
// a nonce only has to be unique (the MAC makes a token unforgeable).
func randomNonce(n *[nonceLen]byte) {
	binary.LittleEndian.PutUint64(n[0:8], rand.Uint64())
	binary.LittleEndian.PutUint32(n[8:12], rand.Uint32())
}

// scratch is the working memory of one seal or open, pooled: a buffer on
// the stack escapes to the heap when it is handed to a hash.Hash through
// its interface, so it would cost an allocation per call.
type scratch struct {
	payload, text [maxSealed + 64]byte
	sum, got      [sha256.Size]byte
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// seal returns the text of a sealed value signed with the current key.
func (s *signer) seal(kind byte, nonce *[nonceLen]byte, exp time.Time, value int64, saleID, userID string) string {
	k := s.keys[0]
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	p := append(sc.payload[:0], sealVersion, kind, byte(len(k.id)))
	p = append(p, nonce[:]...)
	p = append(p, k.id...)
	p = binary.BigEndian.AppendUint64(p, uint64(exp.UnixMilli()))
	p = binary.BigEndian.AppendUint64(p, uint64(value))
	p = append(p, saleID...)
	p = append(p, 0)
	p = append(p, userID...)
	t := b64.AppendEncode(sc.text[:0], p)
	t = append(t, '.')
	t = b64.AppendEncode(t, k.mac(sc.sum[:0], p))
	return string(t)
}

// opened is a sealed value whose MAC checked. sale and user point into
// the scratch open was given; nonceText into the text.
type opened struct {
	kind       byte
	nonce      [nonceLen]byte
	nonceText  string
	expires    time.Time
	value      int64
	sale, user []byte
}

// open checks a sealed text's form and MAC, with any key the signer holds.
// It checks no binding and no expiry: the caller compares them, then
// returns sc to scratches. It allocates nothing.
func (s *signer) open(text string, sc *scratch) (opened, bool) {
	p, sig, ok := strings.Cut(text, ".")
	if !ok || len(text) > maxSealed || len(sig) != macText || !b64Text(p) || !b64Text(sig) {
		return opened{}, false
	}
	n, err := b64.Decode(sc.payload[:], append(sc.text[:0], p...))
	payload := sc.payload[:n]
	if err != nil || n < sealHead || payload[0] != sealVersion {
		return opened{}, false
	}
	kl := int(payload[2])
	if kl == 0 || n < sealHead+kl+16+1 {
		return opened{}, false
	}
	kid := payload[sealHead : sealHead+kl]
	var key *signKey
	for _, k := range s.keys {
		if string(kid) == k.id {
			key = k
			break
		}
	}
	if key == nil {
		return opened{}, false
	}
	if m, err := b64.Decode(sc.got[:], append(sc.text[:0], sig...)); err != nil || m != sha256.Size ||
		!hmac.Equal(sc.got[:], key.mac(sc.sum[:0], payload)) {
		return opened{}, false
	}
	body := payload[sealHead+kl:]
	sale, user, ok := bytes.Cut(body[16:], []byte{0})
	if !ok {
		return opened{}, false
	}
	o := opened{
		kind:      payload[1],
		nonceText: text[4:20],
		expires:   time.UnixMilli(int64(binary.BigEndian.Uint64(body[0:8]))),
		value:     int64(binary.BigEndian.Uint64(body[8:16])),
		sale:      sale,
		user:      user,
	}
	copy(o.nonce[:], payload[3:sealHead])
	return o, true
}

// b64Text reports whether t is non-empty base64url without padding.
func b64Text(t string) bool {
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return t != ""
}

// check verifies a token for a purchase by u of sale at now: signed by a
// key this signer holds, for this user and sale, at the sale's price
// schedule (Sale.PriceSchedule), not expired.
func (s *signer) check(token string, u flashsale.User, sale *flashsale.Sale, now time.Time) (tokenClaims, error) {
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	o, ok := s.open(token, sc)
	if !ok || o.kind != kindToken || string(o.sale) != sale.ID || string(o.user) != u.ID ||
		o.value != sale.PriceSchedule() || !now.Before(o.expires) {
		return tokenClaims{}, flashsale.ErrTokenInvalid
	}
	return tokenClaims{SaleID: sale.ID, UserID: u.ID, Schedule: o.value, Expires: o.expires, Nonce: o.nonceText}, nil
}
