package http

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// limitRead applies the read limit (ReadPerIP) to the sale list, the
// public sale view and order polling.
// The purchase limits (per sale, user and address) are the funnel's, which
// applies them after the sold-out flag: a sold-out answer costs nothing,
// and limiting it would cost a Redis round trip.
func (s *Server) limitRead(r *http.Request) error {
	if s.limiter == nil || s.readPerIP.Off() {
		return nil
	}
	return flashsale.Take(r.Context(), s.limiter, "read-ip:"+s.clientIP(r), s.readPerIP, s.log)
}

// retryAfterSeconds is Retry-After for a wait: whole seconds, rounded up,
// at least 1 (the header has no finer unit).
func retryAfterSeconds(wait time.Duration) []string {
	return []string{strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))}
}

// clientIP is the address a request came from: the peer's, or, when the
// peer is a trusted proxy (FLASHSALE_TRUSTED_PROXIES), the rightmost
// address in X-Forwarded-For that is not a trusted proxy. The left of the
// header is whatever the client wrote, so only what the trusted proxies
// appended is believed; a client that is not behind one cannot choose its
// address by sending the header.
func (s *Server) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(s.trustedProxies) == 0 {
		// No peer is trusted, so the peer is the client: no parse, which
		// every purchase paid for before knowing the sale was sold out.
		return host
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(peer) {
		return host
	}
	xff := r.Header.Values("X-Forwarded-For")
	for i := len(xff) - 1; i >= 0; i-- {
		hops := strings.Split(xff[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[j]))
			if err != nil {
				return peer.String() // a hop we cannot read: believe nothing left of it
			}
			if a = a.Unmap(); !s.trusted(a) {
				return a.String()
			}
		}
	}
	return peer.String()
}

func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.trustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
