package webhook

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/sinktest"
)

// TestSinkConformance: the webhook passes the suite every events transport
// passes, against a receiver that checks each signature and answers 204.
func TestSinkConformance(t *testing.T) {
	sinktest.Run(t, func(tb testing.TB) sinktest.Harness {
		var (
			mu  sync.Mutex
			got []flashsale.Notice
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			if err := Verify(secret, r.Header.Get(SignatureHeader), body, time.Now(), ToleranceDefault); err != nil {
				tb.Errorf("receiver: %v", err)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			mu.Lock()
			got = append(got, flashsale.Notice{ID: r.Header.Get(EventIDHeader), Type: flashsale.NoticeType(r.Header.Get(EventTypeHeader)),
				Payload: body, Test: r.Header.Get(TestHeader) == "true"})
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		tb.Cleanup(srv.Close)
		s, err := New(srv.URL, secret, nil)
		if err != nil {
			tb.Fatal(err)
		}
		return sinktest.Harness{
			Sink: s,
			Received: func() []flashsale.Notice {
				mu.Lock()
				defer mu.Unlock()
				return append([]flashsale.Notice(nil), got...)
			},
			Down: srv.Close,
		}
	})
}
