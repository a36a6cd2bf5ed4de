package funnel

import (
	"context"
	"crypto/sha256"
	"math/bits"
	"strconv"
	"time"

	"github.com/flashsale/flashsale"
)

// The proof-of-work challenge. A guest asks for a puzzle, finds a solution
// S such that SHA-256(challenge || S) starts with the sale's difficulty in
// zero bits (2^difficulty hashes on average), and sends both with its token
// request. The puzzle is sealed like a token (signed, bound to the user and
// the sale, expiring), so any instance checks it without stored state; the
// token it buys carries the challenge's seed as its nonce and its expiry as
// its own, so every token one solution can buy is the same one-time token,
// and the stock engine's spend of that nonce is the one-time use of the
// solution. See docs/design.md, "Proof of work".

// ChallengeAlgorithm is the hash a solution is checked with.
const ChallengeAlgorithm = "sha256"

var (
	errNoChallenge = flashsale.Errorf(flashsale.EConflict,
		"this sale asks for no challenge: ask for a purchase token directly")
	errChallengeForged = &flashsale.Error{Code: flashsale.EChallengeFailed,
		Message: "the challenge was not issued by this service for you and this sale; ask for a new one"}
	errChallengeExpired = &flashsale.Error{Code: flashsale.EChallengeFailed,
		Message: "the challenge expired; ask for a new one"}
	errChallengeUnsolved = &flashsale.Error{Code: flashsale.EChallengeFailed,
		Message: "the solution does not solve the challenge"}
)

// Challenge returns a puzzle for a sale with a difficulty, valid for
// TokenTTL. It may be asked for before the start, so a countdown page can
// solve it while the guest waits.
func (s *Service) Challenge(ctx context.Context, u flashsale.User, saleID string) (*flashsale.Puzzle, error) {
	sale, err := s.sales.get(ctx, saleID)
	if err != nil {
		return nil, err
	}
	d := sale.Challenge.Difficulty
	if d <= 0 {
		return nil, errNoChallenge
	}
	now := s.now()
	if !now.Before(sale.EndsAt) {
		return nil, flashsale.ErrEnded
	}
	exp := now.Add(s.signer.ttl).UTC().Truncate(time.Millisecond)
	var seed [nonceLen]byte
	randomNonce(&seed)
	return &flashsale.Puzzle{
		Challenge:  s.signer.seal(kindChallenge, &seed, exp, int64(d), sale.ID, u.ID),
		Difficulty: d,
		ExpiresAt:  exp,
		Algorithm:  ChallengeAlgorithm,
	}, nil
}

// solved checks a solution to a challenge for u's token for sale at now,
// and returns the challenge's seed and expiry for the token to carry.
func (s *signer) solved(challenge, solution string, u flashsale.User, sale *flashsale.Sale, now time.Time) ([nonceLen]byte, time.Time, error) {
	if challenge == "" || solution == "" {
		return [nonceLen]byte{}, time.Time{}, flashsale.ErrChallengeFailed
	}
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	o, ok := s.open(challenge, sc)
	if !ok || o.kind != kindChallenge || string(o.sale) != sale.ID || string(o.user) != u.ID ||
		o.value < int64(sale.Challenge.Difficulty) {
		return [nonceLen]byte{}, time.Time{}, errChallengeForged
	}
	if !now.Before(o.expires) {
		return [nonceLen]byte{}, time.Time{}, errChallengeExpired
	}
	if !Solves(challenge, solution, int(o.value)) {
		return [nonceLen]byte{}, time.Time{}, errChallengeUnsolved
	}
	return o.nonce, o.expires, nil
}

// Solves reports whether solution, 1 to flashsale.MaxSolution characters of
// [A-Za-z0-9_-], makes SHA-256(challenge || solution) start with
// difficulty zero bits.
func Solves(challenge, solution string, difficulty int) bool {
	if len(challenge) > maxSealed || len(solution) > flashsale.MaxSolution || !b64Text(solution) {
		return false
	}
	var buf [maxSealed + flashsale.MaxSolution]byte
	sum := sha256.Sum256(append(append(buf[:0], challenge...), solution...))
	return zeroBits(&sum) >= difficulty
}

// zeroBits counts the leading zero bits of sum.
func zeroBits(sum *[sha256.Size]byte) int {
	for i, b := range sum {
		if b != 0 {
			return i*8 + bits.LeadingZeros8(b)
		}
	}
	return 8 * sha256.Size
}

// Solve is the reference solver: it counts up in decimal from 0 until a
// counter solves the challenge. Tests and the load generator use it; the
// guest page does the same in JavaScript (docs/design.md).
func Solve(challenge string, difficulty int) string {
	buf := make([]byte, 0, len(challenge)+20)
	buf = append(buf, challenge...)
	for i := uint64(0); ; i++ {
		b := strconv.AppendUint(buf, i, 10)
		if sum := sha256.Sum256(b); zeroBits(&sum) >= difficulty {
			return string(b[len(challenge):])
		}
	}
}
