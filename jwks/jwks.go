// Package jwks holds the public keys of the platform's identity provider,
// fetched from its JWKS URL, so the HTTP layer can verify the RS256, ES256
// and EdDSA user tokens the provider signs.
//
// The keys are fetched and parsed with lestrrat-go/jwx (jwk.Fetch) on this
// package's own schedule rather than jwk.Cache's: a refresh every Refresh
// (5 min), and, when a token names a kid the set does not have (the
// provider rotated), one refresh at once, but at most one per MinRefresh
// (10 s) whatever the number of unknown kids, so a flood of forged kids
// cannot turn into a flood of fetches. Owning the schedule is what lets
// Gen tell the verified-token cache that a key was removed.
package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// Defaults for Config.
const (
	RefreshDefault    = 5 * time.Minute
	MinRefreshDefault = 10 * time.Second
	// TimeoutDefault bounds one fetch. A token with a new kid waits for it.
	TimeoutDefault = 2 * time.Second
	// MinRSABits refuses RSA keys too short to trust.
	MinRSABits = 2048
	maxBody    = 1 << 20
)

// Errors of Key. ErrUnavailable wraps flashsale.ErrUnavailable: without
// keys nobody can tell a valid token from a forged one, which is a 503 to
// retry, not a 401.
var (
	ErrUnknownKey  = errors.New("jwks: no key with this kid")
	ErrKeyMismatch = errors.New("jwks: the key is not for this algorithm")
	ErrUnavailable = fmt.Errorf("jwks: the key set could not be fetched: %w", flashsale.ErrUnavailable)
)

// Config configures Keys. URL is required.
type Config struct {
	URL                          string
	Refresh, MinRefresh, Timeout time.Duration
	HTTPClient                   *http.Client
	Logger                       *slog.Logger
	// Now is the clock of the refresh rate limit (tests); time.Now when nil.
	Now func() time.Time
}

// Keys is the provider's current key set. It is safe for concurrent use.
type Keys struct {
	url        string
	client     *http.Client
	refresh    time.Duration
	minRefresh time.Duration
	timeout    time.Duration
	now        func() time.Time
	log        *slog.Logger

	snap atomic.Pointer[snapshot]
	// mu serialises fetches; lastFetch (under mu) is when the last began.
	mu        sync.Mutex
	lastFetch time.Time

	stop chan struct{}
	done chan struct{}
}

// snapshot is one fetched set: the usable keys by kid, and a generation
// that changes whenever a key is removed or replaced.
type snapshot struct {
	keys map[string]key
	gen  uint64
}

type key struct {
	alg string // the JWK's "alg", "" when it names none
	pub any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// New fetches the set once and starts the periodic refresh. A provider
// that does not answer at start is logged, not fatal: HS256 tokens still
// verify, and platform tokens are 503 until the set arrives.
func New(cfg Config) (*Keys, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("jwks: URL %q must be an http:// or https:// URL", cfg.URL)
	}
	k := &Keys{
		url:        cfg.URL,
		client:     cfg.HTTPClient,
		refresh:    orDefault(cfg.Refresh, RefreshDefault),
		minRefresh: orDefault(cfg.MinRefresh, MinRefreshDefault),
		timeout:    orDefault(cfg.Timeout, TimeoutDefault),
		now:        cfg.Now,
		log:        cfg.Logger,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if k.client == nil {
		k.client = &http.Client{Timeout: k.timeout}
	}
	if k.now == nil {
		k.now = time.Now
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	k.mu.Lock()
	if err := k.fetchLocked(); err != nil {
		k.log.Warn("identity provider keys not fetched at start; platform tokens are refused until they are", "url", k.url, "err", err)
	}
	k.mu.Unlock()
	go k.loop()
	return k, nil
}

func orDefault(v, d time.Duration) time.Duration {
	if v <= 0 {
		return d
	}
	return v
}

// Close stops the periodic refresh.
func (k *Keys) Close() error {
	close(k.stop)
	<-k.done
	k.client.CloseIdleConnections()
	return nil
}

func (k *Keys) loop() {
	defer close(k.done)
	t := time.NewTicker(k.refresh)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
			k.mu.Lock()
			if err := k.fetchLocked(); err != nil {
				k.log.Warn("identity provider keys not refreshed; keeping the last set", "url", k.url, "err", err)
			}
			k.mu.Unlock()
		}
	}
}

// Gen is the current set's generation: a token verified under another
// generation may have been signed by a key since removed, and must be
// verified again.
func (k *Keys) Gen() uint64 {
	if s := k.snap.Load(); s != nil {
		return s.gen
	}
	return 0
}

// Key returns the public key kid names, checked to be one alg (RS256,
// ES256 or EdDSA) verifies with. A kid the set lacks costs one refresh,
// unless one began within MinRefresh; then it is ErrUnknownKey, or
// ErrUnavailable when no set was ever fetched.
func (k *Keys) Key(kid, alg string) (any, error) {
	if s := k.snap.Load(); s != nil {
		if key, ok := s.keys[kid]; ok {
			return key.check(alg)
		}
	}
	k.mu.Lock()
	// Again under the lock: the refresh this caller waited for may have
	// brought the kid.
	s := k.snap.Load()
	if s != nil {
		if key, ok := s.keys[kid]; ok {
			k.mu.Unlock()
			return key.check(alg)
		}
	}
	var err error
	if k.lastFetch.IsZero() || k.now().Sub(k.lastFetch) >= k.minRefresh {
		err = k.fetchLocked()
		s = k.snap.Load()
	}
	k.mu.Unlock()
	if s == nil {
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, ErrUnavailable
	}
	if key, ok := s.keys[kid]; ok {
		return key.check(alg)
	}
	return nil, ErrUnknownKey
}

// fetchLocked fetches the set and installs it; k.mu is held. A failed
// fetch keeps the last set.
func (k *Keys) fetchLocked() error {
	k.lastFetch = k.now()
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	set, err := jwk.Fetch(ctx, k.url, jwk.WithHTTPClient(k.client), jwk.WithMaxFetchBodySize(maxBody))
	if err != nil {
		return err
	}
	keys := make(map[string]key, set.Len())
	for i := range set.Len() {
		jk, _ := set.Key(i)
		kid, ok := jk.KeyID()
		if !ok || kid == "" {
			continue // a token names its key; one without a kid is never chosen
		}
		if use, ok := jk.KeyUsage(); ok && use != "sig" {
			continue
		}
		var raw any
		if err := jwk.Export(jk, &raw); err != nil {
			continue
		}
		// Public signature keys only: a symmetric ("oct") key in the set
		// would let anyone who read the set sign HS256 tokens, and a
		// private key should not be there at all.
		switch raw.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			continue
		}
		alg := ""
		if a, ok := jk.Algorithm(); ok {
			alg = a.String()
		}
		keys[kid] = key{alg: alg, pub: raw}
	}
	old := k.snap.Load()
	next := &snapshot{keys: keys}
	if old != nil {
		next.gen = old.gen
		if removedOrChanged(old.keys, keys) {
			next.gen++
		}
	}
	k.snap.Store(next)
	return nil
}

func removedOrChanged(old, next map[string]key) bool {
	type equaler interface{ Equal(crypto any) bool }
	for kid, o := range old {
		n, ok := next[kid]
		if !ok || o.alg != n.alg {
			return true
		}
		if e, ok := o.pub.(equaler); !ok || !e.Equal(n.pub) {
			return true
		}
	}
	return false
}

// check returns the key if alg may use it: the JWK's own alg, when it
// names one, must be alg, and the key must be of alg's type (an RSA key of
// at least MinRSABits for RS256, P-256 for ES256, Ed25519 for EdDSA).
func (k key) check(alg string) (any, error) {
	if k.alg != "" && k.alg != alg {
		return nil, ErrKeyMismatch
	}
	ok := false
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		ok = alg == "RS256" && pub.N.BitLen() >= MinRSABits
	case *ecdsa.PublicKey:
		ok = alg == "ES256" && pub.Curve == elliptic.P256()
	case ed25519.PublicKey:
		ok = alg == "EdDSA"
	}
	if !ok {
		return nil, ErrKeyMismatch
	}
	return k.pub, nil
}
