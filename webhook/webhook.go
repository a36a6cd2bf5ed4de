// Package webhook delivers order events (flashsale.Notice) to the
// platform's HTTPS endpoint: one POST per event with the event's JSON as
// the body, signed with HMAC-SHA256 over a timestamp and the body, so the
// receiver can check it came from us and is not a replay of an old one.
// Retries, order and the delivery log are the dispatcher's (funnel).
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// Headers of a delivery.
const (
	// SignatureHeader is "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" under the secret>" (the scheme Stripe's webhooks made
	// familiar): the timestamp is signed too, so a receiver refuses a
	// captured request replayed later.
	SignatureHeader = "Flashsale-Signature"
	// EventIDHeader and EventTypeHeader repeat the body's id and type, so
	// a receiver can drop a duplicate before parsing it.
	EventIDHeader   = "Flashsale-Event-Id"
	EventTypeHeader = "Flashsale-Event-Type"
	// TestHeader is "true" on the events of a test sale (a load test's).
	TestHeader = "Flashsale-Test"
)

// ToleranceDefault is how old a signature Verify accepts by default.
const ToleranceDefault = 5 * time.Minute

// Sink posts notices to one URL.
type Sink struct {
	url    string
	secret []byte
	client *http.Client
	now    func() time.Time
}

var _ flashsale.NoticeSink = (*Sink)(nil)

// New returns a Sink posting to url, signing with secret. client nil
// means a client of its own (the dispatcher bounds each call's time).
func New(url string, secret []byte, client *http.Client) (*Sink, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("webhook: url %q must be http:// or https://", url)
	}
	if len(secret) < 16 {
		return nil, errors.New("webhook: the signing secret must be at least 16 bytes")
	}
	if client == nil {
		client = &http.Client{
			Transport:     &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Sink{url: url, secret: secret, client: client, now: time.Now}, nil
}

// Name is the transport's name in the outbox and the delivery log.
func (s *Sink) Name() string { return "webhook" }

// Deliver posts n. Only a 2xx answer delivers it; a redirect is not
// followed (the endpoint is configuration, a redirect is a mistake to see).
func (s *Sink) Deliver(ctx context.Context, n flashsale.Notice) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(n.Payload))
	if err != nil {
		return 0, fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "flashsale/"+flashsale.Version)
	req.Header.Set(EventIDHeader, n.ID)
	req.Header.Set(EventTypeHeader, string(n.Type))
	req.Header.Set(SignatureHeader, Sign(s.secret, s.now(), n.Payload))
	if n.Test {
		req.Header.Set(TestHeader, "true")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("webhook: post %s: %w", n.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("webhook: post %s: receiver answered %s", n.ID, resp.Status)
	}
	return resp.StatusCode, nil
}

// Sign returns the signature header's value for body at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks a signature header against body: the receiver's side, for
// tests and for platforms writing one in Go. It refuses a header older or
// newer than tolerance at now, and compares in constant time.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("webhook: malformed signature header")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("webhook: signature timestamp outside the tolerance")
	}
	if !hmac.Equal([]byte(sig), []byte(mac(secret, ts, body))) {
		return errors.New("webhook: signature mismatch")
	}
	return nil
}
