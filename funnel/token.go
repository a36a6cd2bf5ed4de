package funnel

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// IssueToken gives a guest a one-time purchase token for an open sale.
func (s *Service) IssueToken(ctx context.Context, u flashsale.User, saleID string) (*flashsale.PurchaseToken, error) {
	sale, err := s.sale(ctx, saleID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if err := sale.Open(now); err != nil {
		return nil, err
	}
	if err := s.eligible(ctx, u, sale); err != nil {
		return nil, err
	}
	exp := now.Add(s.ttl).UTC().Truncate(1e6)
	tok, _ := s.signer.issue(tokenClaims{SaleID: sale.ID, UserID: u.ID, Price: sale.Price, Expires: exp})
	return &flashsale.PurchaseToken{Token: tok, ExpiresAt: exp}, nil
}

// TokenTTLDefault is how long a purchase token stays valid.
const TokenTTLDefault = 120 * time.Second

// tokenClaims is what a purchase token binds: one user, one sale, one price,
// until a moment. The nonce makes each token unique so it can be spent once.
type tokenClaims struct {
	SaleID  string
	UserID  string
	Price   int64
	Expires time.Time
	Nonce   string
}

// signer issues and verifies purchase tokens. A token is
// base64url(payload) "." base64url(HMAC-SHA256(payload)); the payload is
// binary (nonce, expiry, price) followed by "sale\x00user". The key is
// derived from the server secret so it never doubles as the JWT key.
// Keyed HMAC states are pooled: every guest asks for a token and presents
// it within the same second, and a fresh hmac.New per call is most of the
// cost.
type signer struct{ macs sync.Pool }

func newSigner(secret []byte) *signer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("flashsale purchase token v1"))
	key := m.Sum(nil)
	return &signer{macs: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// mac appends the HMAC of payload to dst.
func (s *signer) mac(dst, payload []byte) []byte {
	h := s.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(payload)
	dst = h.Sum(dst)
	s.macs.Put(h)
	return dst
}

const tokenHeader = 12 + 8 + 8 // nonce, expiry (unix ms), price

func (s *signer) issue(c tokenClaims) (token, nonce string) {
	payload := make([]byte, tokenHeader, tokenHeader+len(c.SaleID)+1+len(c.UserID))
	// The nonce only has to be unique (the MAC makes the token unforgeable):
	// 96 bits from the runtime's ChaCha8 generator, no system call.
	binary.LittleEndian.PutUint64(payload[0:8], rand.Uint64())
	binary.LittleEndian.PutUint32(payload[8:12], rand.Uint32())
	binary.BigEndian.PutUint64(payload[12:], uint64(c.Expires.UnixMilli()))
	binary.BigEndian.PutUint64(payload[20:], uint64(c.Price))
	payload = append(payload, c.SaleID...)
	payload = append(payload, 0)
	payload = append(payload, c.UserID...)
	var sum [sha256.Size]byte
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(s.mac(sum[:0], payload)), enc.EncodeToString(payload[:12])
}

// verify checks the signature and decodes the claims. It does not check
// binding or expiry: the caller compares them with the request.
func (s *signer) verify(token string) (tokenClaims, bool) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 512 {
		return tokenClaims{}, false
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || len(payload) < tokenHeader+1 {
		return tokenClaims{}, false
	}
	var sum [sha256.Size]byte
	if !hmac.Equal(mac, s.mac(sum[:0], payload)) {
		return tokenClaims{}, false
	}
	sale, user, ok := strings.Cut(string(payload[tokenHeader:]), "\x00")
	if !ok {
		return tokenClaims{}, false
	}
	return tokenClaims{
		SaleID:  sale,
		UserID:  user,
		Expires: time.UnixMilli(int64(binary.BigEndian.Uint64(payload[12:]))),
		Price:   int64(binary.BigEndian.Uint64(payload[20:])),
		Nonce:   enc.EncodeToString(payload[:12]),
	}, true
}

// check verifies a token for a purchase by u of sale at now.
func (s *signer) check(token string, u flashsale.User, sale *flashsale.Sale, now time.Time) (tokenClaims, error) {
	c, ok := s.verify(token)
	if !ok || c.SaleID != sale.ID || c.UserID != u.ID || c.Price != sale.Price || !now.Before(c.Expires) {
		return tokenClaims{}, flashsale.ErrTokenInvalid
	}
	return c, nil
}
